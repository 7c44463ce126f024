package esdbtest

import (
	"errors"
	"fmt"
)

// expectKind is the kind of an expected revision.
type expectKind int

const (
	expectAny expectKind = iota
	expectNoStream
	expectStreamExists
	expectRevision
)

// expectation is the expected revision of an append or a delete.
type expectation struct {
	kind     expectKind
	revision uint64 // with expectRevision
}

// number is the expectation as the node's ExpectedVersion number: -2 any,
// -1 no stream, -4 stream exists, or the revision.
func (e expectation) number() int64 {
	switch e.kind {
	case expectNoStream:
		return -1
	case expectStreamExists:
		return -4
	case expectRevision:
		return int64(e.revision)
	}
	return -2
}

// errStreamDeleted is the outcome of a write to a deleted stream: a
// tombstoned one, or with ExpectedRevision StreamExists a soft-deleted one.
var errStreamDeleted = errors.New("stream deleted")

// wrongVersion reports a failed expectation.
type wrongVersion struct {
	expected expectation
	current  int64 // revision of the stream's last event, -1 without events
}

func (w *wrongVersion) Error() string {
	return fmt.Sprintf("wrong expected version: expected %d, current %d", w.expected.number(), w.current)
}

// checkOutcome is what the node's commit check decides for a write.
type checkOutcome int

const (
	checkOK checkOutcome = iota
	checkWrong
	checkDeleted
	checkRepeat // an idempotent repeat of a write already done
)

// commitCheck is the decision on a write and what it needs.
type commitCheck struct {
	outcome checkOutcome
	current int64        // revision of the stream's last event, -1 without events
	soft    bool         // the stream is soft-deleted: the write recreates it
	repeat  appendResult // with checkRepeat: what the first write returned
}

// check decides a write of events (their ids matter for idempotence) to a
// stream under an expectation, as the node's IndexWriter.CheckCommit does;
// l.mu must be held.
func (l *eventLog) check(stream string, exp expectation, events []proposed) commitCheck {
	cur := l.lastRevision(stream)
	if cur == deletedStream {
		return commitCheck{outcome: checkDeleted, current: cur}
	}
	soft := l.metadataOf(stream).softDeleted()
	c := commitCheck{outcome: checkOK, current: cur, soft: soft}
	existing := l.streams[stream]
	if res, ok := idempotentRepeat(existing, exp, events); ok {
		return commitCheck{outcome: checkRepeat, current: cur, repeat: res}
	}
	switch exp.kind {
	case expectAny:
		return c
	case expectStreamExists:
		if soft {
			return commitCheck{outcome: checkDeleted, current: cur}
		}
		if cur < 0 && l.lastRevision(metaPrefix+stream) < 0 {
			return commitCheck{outcome: checkWrong, current: cur}
		}
		return c
	}
	want := exp.number()
	switch {
	case want < cur && exp.kind == expectNoStream && soft && len(events) > 0:
		return c // a soft-deleted stream is written again
	case want != cur:
		return commitCheck{outcome: checkWrong, current: cur}
	}
	return c
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
