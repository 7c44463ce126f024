package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/revgate/projector/projector/driver"
)

// DeletionPolicy is what becomes of a document under the revision gate when
// the stream that feeds it is deleted: soft-deleted (DeleteStream) or
// tombstoned (TombstoneStream). The engine sees a deletion as the record a
// node writes in $all: the "$streamDeleted" event of a tombstone, in the
// stream itself, or the "$metadata" event of "$$<stream>" whose $tb says the
// stream is deleted (a subscription reads these only if its filter lets them
// through: app.StreamPrefix and app.Category do).
type DeletionPolicy int

const (
	// KeepDocument (the default) leaves the document as it is: it stays the
	// fold of the events the stream had.
	KeepDocument DeletionPolicy = iota
	// MarkDeleted keeps the document and marks it deleted (mongostore:
	// field _deleted true), for readers to filter on. An event of the stream
	// written again clears the mark.
	MarkDeleted
	// RemoveDocument removes the document.
	RemoveDocument
)

func (d DeletionPolicy) String() string {
	switch d {
	case KeepDocument:
		return "keep"
	case MarkDeleted:
		return "mark"
	case RemoveDocument:
		return "remove"
	}
	return fmt.Sprintf("DeletionPolicy(%d)", int(d))
}

// Types of the records a node writes for a deleted stream.
const (
	// typeStreamDeleted is the event a tombstone writes in the stream.
	typeStreamDeleted = "$streamDeleted"
	// typeMetadata is the event of a stream's metadata, in "$$<stream>".
	typeMetadata = "$metadata"
)

// deletion is the stream a deletion record deletes.
type deletion struct {
	stream    string
	tombstone bool
}

// deletionOf reports whether ev is a node's record of a deleted stream: a
// tombstone, or metadata whose $tb is the largest revision (what a soft
// delete writes). Metadata that only truncates (a $tb below it, $maxCount,
// $maxAge) is not a deletion.
func deletionOf(ev Event) (deletion, bool) {
	switch {
	case ev.Type == typeStreamDeleted:
		return deletion{stream: ev.StreamID, tombstone: true}, true
	case ev.Type == typeMetadata && strings.HasPrefix(ev.StreamID, "$$"):
		if tb, ok := truncateBefore(ev); !ok || tb != math.MaxInt64 {
			return deletion{}, false
		}
		return deletion{stream: strings.TrimPrefix(ev.StreamID, "$$")}, true
	}
	return deletion{}, false
}

// truncateBefore returns the $tb of ev, a stream's metadata event, when it
// has one.
func truncateBefore(ev Event) (uint64, bool) {
	var m struct {
		TruncateBefore *uint64 `json:"$tb"`
	}
	if ev.Type != typeMetadata || json.Unmarshal(ev.Data, &m) != nil || m.TruncateBefore == nil {
		return 0, false
	}
	return *m.TruncateBefore, true
}

// isDeletionRecord reports whether ev is a node's record about a stream
// (a tombstone or stream metadata): never an event of a projection's own.
func isDeletionRecord(ev Event) bool {
	return ev.Type == typeStreamDeleted || (ev.Type == typeMetadata && strings.HasPrefix(ev.StreamID, "$$"))
}

// handleRecord handles a node's record about a stream: for a deletion, each
// projection under the revision gate whose router routes the stream's events
// applies its [DeletionPolicy] to the stream's document. Other strategies
// keep their documents (fed by many streams, or by events that are not in a
// stream's order), and metadata that only truncates changes nothing: the gate
// finds the holes it leaves ([StreamReader]). It returns one result per
// document marked or removed.
func (e *Engine) handleRecord(ctx context.Context, ev Event) []Result {
	d, ok := deletionOf(ev)
	if !ok {
		return nil
	}
	var results []Result
	for _, p := range e.projections {
		if of, id, ok := e.deletedDocument(p, ev, d); ok {
			results = append(results, e.deleteDocument(ctx, target{p, id}, of, d))
		}
	}
	return results
}

// deletedDocument returns the document of p whose stream deletion record ev
// (of deletion d) deletes, and ev as an event of that stream: none when p
// keeps its documents (its policy, or a strategy other than the revision
// gate) or its router does not route the stream's events.
func (e *Engine) deletedDocument(p Definition, ev Event, d deletion) (of Event, id string, ok bool) {
	if _, gated := e.keeperOf(p).(streamRevision); !gated || p.deletionPolicy() == KeepDocument {
		return Event{}, "", false
	}
	// Routed as an event of the deleted stream would be.
	of = Event{ID: ev.ID, Type: ev.Type, StreamID: d.stream, Position: ev.Position, Prepare: ev.Prepare, Created: ev.Created, Data: ev.Data}
	id, ok, err := p.Route(of)
	if err != nil || !ok {
		return Event{}, "", false
	}
	return of, id, true
}

// deleteDocument applies t's deletion policy to its document, in the
// document's queue (after its events in flight), for deletion d, whose
// record is ev as an event of the deleted stream.
func (e *Engine) deleteDocument(ctx context.Context, t target, ev Event, d deletion) (res Result) {
	tk := e.queue.enter(t.key(), math.MaxUint64)
	defer func() { e.queue.leave(tk, res.Outcome != Failed, res.Err) }()
	if err := e.queue.wait(ctx, e.stop, tk); err != nil {
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: -1})
	}
	unlock := e.locks.lock(t.key())
	defer unlock()
	state := t.p.newState()
	head, found, err := e.docs().Load(ctx, t.p.Collection(), t.id, 0, state)
	switch {
	case err != nil:
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: -1, attempts: 1})
	case !found, head.Stream != "" && head.Stream != ev.StreamID, head.Deleted:
		return Result{Projection: t.p.Name(), Document: t.id, Outcome: Duplicate}
	}
	if since, err := e.writtenSince(ctx, d, head.Revision); err != nil {
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: int64(head.Revision), attempts: 1})
	} else if since {
		return Result{Projection: t.p.Name(), Document: t.id, Outcome: Duplicate}
	}
	var matched bool
	if t.p.deletionPolicy() == RemoveDocument {
		e.known.forget(t.key())
		matched, err = e.docs().Delete(ctx, t.p.Collection(), t.id, head.Revision)
	} else {
		marked := driver.Head{Revision: head.Revision, Stream: head.Stream, Deleted: true}
		matched, err = e.docs().Update(ctx, t.p.Collection(), t.id, head.Revision, marked, state)
	}
	if err == nil && !matched {
		err = errMoved
	}
	if err != nil {
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: int64(head.Revision), attempts: 1})
	}
	e.logger.Info("stream deleted", "projection", t.p.Name(), "document", t.id, "stream", ev.StreamID, "policy", t.p.deletionPolicy())
	return Result{Projection: t.p.Name(), Document: t.id, Outcome: Applied}
}

// writtenSince reports whether the document at revision rev holds events
// of stream d.stream written after its deletion: the stream was written
// again, and the record comes late (another worker's, or delivered again
// after a restart) and deletes nothing. Writing the stream again hides its
// events before the deletion from its first new revision on: a revision at
// or past the stream's first readable one is written since. The node keeps
// that first new revision as the $tb of the stream's metadata, also once
// the stream written again is truncated ($maxCount, $maxAge): with a
// [StreamHistory], a revision at or past it is written since. Metadata a
// user wrote since without that $tb shows the old events again, and
// nothing the node serves tells a late record from one in order (a read of
// a stream gives no log positions): the record applies, as it does in the
// log's order. A tombstoned stream is never written again.
func (e *Engine) writtenSince(ctx context.Context, d deletion, rev uint64) (bool, error) {
	if e.streamReader() == nil || d.tombstone {
		return false, nil
	}
	first, err := e.streamReader().FirstRevision(ctx, d.stream)
	switch {
	case err == nil && first > 0 && rev >= first:
		return true, nil
	case err != nil && !errors.Is(err, ErrStreamDeleted):
		return false, fmt.Errorf("reading where stream %q starts: %w", d.stream, err)
	}
	again, err := e.writtenAgainFrom(ctx, d.stream)
	if err != nil {
		return false, fmt.Errorf("reading the metadata of deleted stream %q: %w", d.stream, err)
	}
	return again >= 0 && rev >= uint64(again), nil
}

// writtenAgainFrom returns the $tb of stream's metadata as it is now: where
// the stream starts again after a soft delete (the node writes it when the
// stream is written again), or -1 when the metadata has none or the stream
// has none to read ([ErrStreamDeleted]: a tombstoned stream's metadata
// cannot be read). Any other error of the read is returned: the record is
// tried again, not applied on a guess.
func (e *Engine) writtenAgainFrom(ctx context.Context, stream string) (int64, error) {
	if e.streamHistory() == nil {
		return -1, nil
	}
	tb := int64(-1)
	err := e.streamHistory().ReadStream(ctx, "$$"+stream, 0, func(ev Event) error {
		tb = -1
		if t, ok := truncateBefore(ev); ok && t < math.MaxInt64 {
			tb = int64(t)
		}
		return nil
	})
	switch {
	case errors.Is(err, ErrStreamDeleted):
		return -1, nil
	case err != nil:
		return -1, err
	}
	return tb, nil
}
