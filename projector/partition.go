package projector

import (
	"context"
	"strings"
)

// partitionKey is what a runner spreads events over its workers by. It is
// the event's stream, so that one worker handles a stream's events in
// order. For an engine of one projection whose documents are versioned
// (fed by many streams: RevisionMap, HandledIDs, ...), it is the document
// the event feeds, so that a document's events meet in one worker's batches
// and the document is read and written once a batch rather than once a
// batch of every worker. A stream still goes to one worker there: a
// strategy that needs a stream's events in order (RevisionMap) needs them
// all routed to one document. An event the projection cannot route (its
// router fails on it, or cannot route it without the payload that does not
// decode) goes where its stream's last event went (followsKey): handled
// after the events of that document before it, so that one that holds the
// document (Hold) holds it where the log does, and one that the next event
// of its stream passes over (Park) has been handled when it does; else (no
// event of its stream seen), and an event the projection declines (it does
// not fail), by its stream.
//
// To route an event, partitionKey decodes and routes it as Handle does (an
// event whose payload does not decode goes where its router sends it
// without reading the payload), and keeps the payload in ev so that the
// worker does not decode it again.
func (e *Engine) partitionKey(ctx context.Context, ev *Event) string {
	if !e.byDocument() {
		if d, ok := deletionOf(*ev); ok {
			// A node's record of a deleted stream, in "$$<stream>":
			// handled by the worker of the stream's events, in the log's
			// order with them (in another, it could come after the events
			// of the stream written again, and be taken for a late one).
			return d.stream
		}
		return ev.StreamID
	}
	decoded, targets, unroutable, decodeErr := e.routed(ctx, *ev)
	if len(targets) != 1 {
		if id, ok := e.streamDocs.Get(ev.StreamID); ok && len(unroutable) > 0 {
			return followsKey + id
		}
		return ev.StreamID
	}
	if decodeErr == nil {
		ev.Payload = decoded.Payload
	}
	e.streamDocs.Add(ev.StreamID, targets[0].id)
	return documentKey + targets[0].id
}

// documentKey starts a partition key that names a document, apart from
// stream names; followsKey one that names the document whose worker an
// event not routed to it goes to (not its route).
const (
	documentKey = "\x00"
	followsKey  = "\x01"
)

// workerKey is what key's worker is chosen by: an event that follows a
// document goes to that document's worker.
func workerKey(key string) string {
	if id, ok := strings.CutPrefix(key, followsKey); ok {
		return documentKey + id
	}
	return key
}

// routedTo returns the document a partition key names, if it names one:
// the worker's batch takes it as the event's route.
func routedTo(key string) (id string, ok bool) {
	return strings.CutPrefix(key, documentKey)
}

// byDocument reports whether the engine's events are spread over workers
// by document (see partitionKey), as spreadsByDocument found when the
// engine was made.
func (e *Engine) byDocument() bool { return e.spread }

// spreadsByDocument reports whether an engine of projections, keeping
// their documents as keepers say, spreads its events by document: it has
// one projection, whose documents are versioned, and it folds them in
// batches.
func spreadsByDocument(projections []Definition, keepers map[string]keeper, batching bool) bool {
	if len(projections) != 1 || !batching {
		return false
	}
	_, gated := keepers[projections[0].Name()].(streamRevision)
	return !gated
}
