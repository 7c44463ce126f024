package esdbtest

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// linkEventType is the type of a link event; its data is "revision@stream".
const linkEventType = "$>"

// unixEpochTicks converts a time to what the client expects in the "created"
// metadata: 100 ns ticks since the Unix epoch.
func unixEpochTicks(t time.Time) int64 { return t.UnixNano() / 100 }

// record is one event of the log. Records never change once appended, so
// readers may use them without holding the log's lock.
type record struct {
	id          uuid.UUID
	stream      string
	revision    uint64
	position    uint64 // commit and prepare position, equal here
	eventType   string
	contentType string
	created     int64 // 100 ns ticks since the Unix epoch
	data        []byte
	metadata    []byte // the user's (custom) metadata
}

// size is how far the log position moves for this record.
func (r *record) size() uint64 {
	return uint64(len(r.data) + len(r.metadata) + len(r.eventType) + 64)
}

// linkTarget parses the data of a link event.
func (r *record) linkTarget() (stream string, revision uint64, ok bool) {
	if r.eventType != linkEventType {
		return "", 0, false
	}
	rev, name, found := strings.Cut(string(r.data), "@")
	if !found {
		return "", 0, false
	}
	n, err := strconv.ParseUint(rev, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return name, n, true
}

// proposed is an event as the client sends it.
type proposed struct {
	id          uuid.UUID
	eventType   string
	contentType string
	data        []byte
	metadata    []byte
}

// expectKind is the kind of an expected revision.
type expectKind int

const (
	expectAny expectKind = iota
	expectNoStream
	expectStreamExists
	expectRevision
)

// expectation is the expected revision of an append.
type expectation struct {
	kind     expectKind
	revision uint64 // with expectRevision
}

// appendResult is what an append did.
type appendResult struct {
	exists   bool   // the stream has events (false only for an empty append to a missing stream)
	revision uint64 // revision of the stream's last event
	position uint64 // position of the stream's last event written or matched
	written  int    // events written; 0 for an idempotent repeat
}

// wrongVersion reports a failed expectation.
type wrongVersion struct {
	expected expectation
	exists   bool   // the stream has events
	current  uint64 // revision of its last event, when it exists
}

// eventLog is the in-memory log: $all and an index per stream.
type eventLog struct {
	now func() time.Time

	mu      sync.RWMutex
	all     []*record
	streams map[string][]*record
	end     uint64        // position of the last record, 0 when empty
	changed chan struct{} // closed and replaced at every append
}

func newEventLog() *eventLog {
	return &eventLog{
		now:     time.Now,
		streams: make(map[string][]*record),
		changed: make(chan struct{}),
	}
}

// append writes events to a stream if the expectation holds.
func (l *eventLog) append(stream string, exp expectation, events []proposed) (appendResult, *wrongVersion) {
	l.mu.Lock()
	defer l.mu.Unlock()
	existing := l.streams[stream]
	if res, ok := idempotentRepeat(existing, exp, events); ok {
		return res, nil
	}
	if w := check(existing, exp); w != nil {
		return appendResult{}, w
	}
	created := unixEpochTicks(l.now())
	next := uint64(len(existing))
	for _, p := range events {
		r := &record{
			id:          p.id,
			stream:      stream,
			revision:    next,
			eventType:   p.eventType,
			contentType: p.contentType,
			created:     created,
			data:        p.data,
			metadata:    p.metadata,
		}
		l.end += r.size()
		r.position = l.end
		next++
		l.all = append(l.all, r)
		existing = append(existing, r)
	}
	l.streams[stream] = existing
	if len(events) > 0 {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	if len(existing) == 0 {
		// An empty append to a missing stream: nothing to report but success.
		return appendResult{}, nil
	}
	last := existing[len(existing)-1]
	return appendResult{exists: true, revision: last.revision, position: last.position, written: len(events)}, nil
}

// check tests an expectation against a stream's events.
func check(existing []*record, exp expectation) *wrongVersion {
	w := &wrongVersion{expected: exp, exists: len(existing) > 0}
	if w.exists {
		w.current = uint64(len(existing)) - 1
	}
	switch exp.kind {
	case expectNoStream:
		if w.exists {
			return w
		}
	case expectStreamExists:
		if !w.exists {
			return w
		}
	case expectRevision:
		if !w.exists || w.current != exp.revision {
			return w
		}
	}
	return nil
}

// idempotentRepeat reports whether events were already written where the
// expectation puts them (compared on ids), as the real server's idempotent
// write check does, and if so what the first write returned.
func idempotentRepeat(existing []*record, exp expectation, events []proposed) (appendResult, bool) {
	if len(events) == 0 || len(existing) == 0 {
		return appendResult{}, false
	}
	var first int
	switch exp.kind {
	case expectNoStream:
		first = 0
	case expectRevision:
		if exp.revision >= uint64(len(existing)) {
			return appendResult{}, false
		}
		first = int(exp.revision) + 1
	default:
		first = -1
		for i, r := range existing {
			if r.id == events[0].id {
				first = i
				break
			}
		}
		if first < 0 {
			return appendResult{}, false
		}
	}
	if first+len(events) > len(existing) {
		return appendResult{}, false
	}
	for i, p := range events {
		if existing[first+i].id != p.id {
			return appendResult{}, false
		}
	}
	last := existing[first+len(events)-1]
	return appendResult{exists: true, revision: last.revision, position: last.position}, true
}

// allFrom returns the records of $all from index i on, and the channel closed
// at the next append.
func (l *eventLog) allFrom(i int) ([]*record, <-chan struct{}) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if i >= len(l.all) {
		return nil, l.changed
	}
	return l.all[i:len(l.all):len(l.all)], l.changed
}

// streamFrom returns the records of a stream from revision rev on, and the
// channel closed at the next append.
func (l *eventLog) streamFrom(stream string, rev uint64) ([]*record, <-chan struct{}) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	events := l.streams[stream]
	if rev >= uint64(len(events)) {
		return nil, l.changed
	}
	return events[rev:len(events):len(events)], l.changed
}

// allSnapshot returns $all as it is now.
func (l *eventLog) allSnapshot() []*record {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.all[:len(l.all):len(l.all)]
}

// streamSnapshot returns a stream's records as they are now.
func (l *eventLog) streamSnapshot(stream string) []*record {
	l.mu.RLock()
	defer l.mu.RUnlock()
	events := l.streams[stream]
	return events[:len(events):len(events)]
}

// lookup returns one record of a stream, or nil.
func (l *eventLog) lookup(stream string, rev uint64) *record {
	l.mu.RLock()
	defer l.mu.RUnlock()
	events := l.streams[stream]
	if rev >= uint64(len(events)) {
		return nil
	}
	return events[rev]
}

// resolve returns the event to send for r and, when r is a resolved link, the
// link itself.
func (l *eventLog) resolve(r *record, resolveLinks bool) (event, link *record) {
	if !resolveLinks {
		return r, nil
	}
	stream, rev, ok := r.linkTarget()
	if !ok {
		return r, nil
	}
	target := l.lookup(stream, rev)
	if target == nil {
		return r, nil
	}
	return target, r
}

// head returns the position of the last record and the number of records.
func (l *eventLog) head() (uint64, int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end, len(l.all)
}

// firstAfter returns the index in all of the first record whose position is
// greater than pos (inclusive = false) or at least pos (inclusive = true).
func firstAfter(all []*record, pos uint64, inclusive bool) int {
	return sort.Search(len(all), func(i int) bool {
		if inclusive {
			return all[i].position >= pos
		}
		return all[i].position > pos
	})
}
