package projector

// partitionKey is what a runner spreads events over its workers by. It is
// the event's stream, so that one worker handles a stream's events in
// order. For an engine of one projection whose documents are versioned
// (fed by many streams: RevisionMap, HandledIDs, ...), it is the document
// the event feeds, so that a document's events meet in one worker's batches
// and the document is read and written once a batch rather than once a
// batch of every worker. A stream still goes to one worker there: a
// strategy that needs a stream's events in order (RevisionMap) needs them
// all routed to one document. An event the projection does not route, or
// cannot, goes by its stream.
//
// To route an event, partitionKey decodes it, and keeps the payload in ev
// so that the worker does not decode it again.
func (e *Engine) partitionKey(ev *Event) string {
	if !e.byDocument() {
		return ev.StreamID
	}
	p := e.projections[0]
	decoded, err := e.registry.Decode(*ev)
	if err != nil {
		return ev.StreamID
	}
	id, ok, err := p.Route(decoded)
	if !ok || err != nil {
		return ev.StreamID
	}
	ev.Payload = decoded.Payload
	return "\x00" + id // apart from stream names
}

// byDocument reports whether the engine's events are spread over workers
// by document (see partitionKey): it has one projection, whose documents
// are versioned.
func (e *Engine) byDocument() bool {
	if len(e.projections) != 1 {
		return false
	}
	_, gated := e.keeperOf(e.projections[0]).(streamRevision)
	return !gated
}
