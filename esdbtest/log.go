package esdbtest

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// linkEventType is the type of a link event; its data is "revision@stream".
const linkEventType = "$>"

// unixEpochTicks converts a time to what the client expects in the "created"
// metadata: 100 ns ticks since the Unix epoch.
func unixEpochTicks(t time.Time) int64 { return t.UnixNano() / 100 }

// record is one event of the log. Records never change once appended, except
// for the scavenged mark, so readers may use them without holding the log's
// lock.
type record struct {
	id          uuid.UUID
	stream      string
	revision    uint64 // deletedStream for a tombstone
	position    uint64 // commit and prepare position, equal here
	eventType   string
	contentType string
	created     int64 // 100 ns ticks since the Unix epoch
	data        []byte
	metadata    []byte      // the user's (custom) metadata
	meta        *streamMeta // for a record of a metadata stream: the metadata it sets
	scavenged   atomic.Bool // removed from $all by Server.Scavenge
	// wire is the record's Streams.Read message, encoded (readMessage):
	// with its id structured, and as a string; with its position, and as a
	// read of its stream sends it (none).
	wire [4]atomic.Pointer[[]byte]
}

// size is how far the log position moves for this record.
func (r *record) size() uint64 {
	return uint64(len(r.data) + len(r.metadata) + len(r.eventType) + 64)
}

func (r *record) isTombstone() bool { return r.revision == deletedStream }

// proposed is an event as the client sends it.
type proposed struct {
	id          uuid.UUID
	eventType   string
	contentType string
	data        []byte
	metadata    []byte
}

// eventLog is the in-memory log: $all and an index per stream. Scavenged
// records stay in both slices, marked, so that indexes into them stay valid.
type eventLog struct {
	now func() time.Time

	mu         sync.RWMutex
	all        []*record
	streams    map[string][]*record // by revision
	tombstones map[string]*record
	end        uint64        // position of the last record, 0 when empty
	scavenged  int           // records of all marked scavenged
	changed    chan struct{} // closed and replaced when records are written
	projection *systemProjections
}

func newEventLog(now func() time.Time) *eventLog {
	if now == nil {
		now = time.Now
	}
	return &eventLog{
		now:        now,
		streams:    make(map[string][]*record),
		tombstones: make(map[string]*record),
		changed:    make(chan struct{}),
	}
}

// write adds a record at the end of the log; l.mu must be held. The caller
// calls publish once the operation's records are all written.
func (l *eventLog) write(stream string, revision uint64, p proposed, created int64) *record {
	r := &record{
		id:          p.id,
		stream:      stream,
		revision:    revision,
		eventType:   p.eventType,
		contentType: p.contentType,
		created:     created,
		data:        p.data,
		metadata:    p.metadata,
	}
	if isMetastream(stream) {
		r.meta = emptyMeta
		if r.contentType == contentJSON && len(r.data) > 0 {
			r.meta = parseMeta(r.data)
		}
	}
	l.end += r.size()
	r.position = l.end
	l.all = append(l.all, r)
	if r.isTombstone() {
		l.tombstones[stream] = r
	} else {
		l.streams[stream] = append(l.streams[stream], r)
	}
	return r
}

// publish runs the system projections over the records an operation wrote
// and wakes the readers; l.mu must be held.
func (l *eventLog) publish(written []*record) {
	if len(written) == 0 {
		return
	}
	if l.projection != nil {
		l.projection.process(l, written)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// lastRevision returns the revision of a stream's last event as the node's
// index sees it: deletedStream for a tombstoned stream (and for the metadata
// stream of one), -1 for a stream without events; l.mu must be held.
func (l *eventLog) lastRevision(stream string) int64 {
	if l.tombstones[stream] != nil || isMetastream(stream) && l.tombstones[originalOf(stream)] != nil {
		return deletedStream
	}
	return int64(len(l.streams[stream])) - 1
}

// metadataOf returns a stream's metadata; l.mu must be held.
func (l *eventLog) metadataOf(stream string) *streamMeta {
	if isMetastream(stream) {
		return metastreamMeta
	}
	metas := l.streams[metaPrefix+stream]
	if len(metas) == 0 {
		return emptyMeta
	}
	return metas[len(metas)-1].meta
}

// rawMetadataOf returns the data of the last event of a stream's metadata
// stream, nil without one; l.mu must be held.
func (l *eventLog) rawMetadataOf(stream string) []byte {
	metas := l.streams[metaPrefix+stream]
	if len(metas) == 0 {
		return nil
	}
	return metas[len(metas)-1].data
}

// allFrom returns the records of $all from index i on, scavenged ones
// included, and the channel closed at the next write.
func (l *eventLog) allFrom(i int) ([]*record, <-chan struct{}) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if i >= len(l.all) {
		return nil, l.changed
	}
	return l.all[i:len(l.all):len(l.all)], l.changed
}

// streamFrom returns the records of a stream from revision rev on,
// regardless of its metadata, and the channel closed at the next write.
func (l *eventLog) streamFrom(stream string, rev uint64) ([]*record, <-chan struct{}) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	events := l.streams[stream]
	if rev >= uint64(len(events)) {
		return nil, l.changed
	}
	return events[rev:len(events):len(events)], l.changed
}

// tombstoneOf returns a stream's tombstone, nil if it has none.
func (l *eventLog) tombstoneOf(stream string) *record {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.tombstones[stream]
}

// allSnapshot returns $all as it is now, scavenged records included.
func (l *eventLog) allSnapshot() []*record {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.all[:len(l.all):len(l.all)]
}

// streamSnapshot returns a stream's records as they are now, regardless of
// its metadata, without its tombstone.
func (l *eventLog) streamSnapshot(stream string) []*record {
	l.mu.RLock()
	defer l.mu.RUnlock()
	events := l.streams[stream]
	return events[:len(events):len(events)]
}

// head returns the position of the last record and the number of records,
// scavenged ones included.
func (l *eventLog) head() (uint64, int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end, len(l.all)
}

// size returns the number of records in $all that are not scavenged.
func (l *eventLog) size() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.all) - l.scavenged
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
