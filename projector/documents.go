package projector

import (
	"context"
	"errors"
	"sync/atomic"
)

// partialCheckpoints is a checkpoint store whose checkpoints cover some
// of the projection's documents only: those of the segments of a
// projection that several processes share, each running its own segments
// (a stable hash of the id gives a document's segment, so that every event
// of a document goes to the same process, whichever streams feed it), and
// each segment from its own checkpoint. A runner given one ([NewRunner])
// hands its engine only the events the store still needs: it routes each
// event as the engine would (ties included), and passes over, as a
// checkpoint, an event that feeds only documents the store does not cover,
// or covers from a checkpoint at or past the event. Events the projection
// does not route, cannot route, or whose document it cannot tell (a
// stream's deletion record) reach the engine as they would without it. The
// engine must have one projection.
type partialCheckpoints interface {
	CheckpointStore
	// NeedsEvent reports whether the event at checkpoint at must still be
	// applied to document id: the store covers the document, and its
	// checkpoint for the document is before at (by commit position, then by
	// prepare position: the events of a transaction written by the legacy TCP
	// API share a commit position).
	// The runner may ask about one event more than once.
	NeedsEvent(id string, at Checkpoint) bool
}

// keepDocuments wraps the runner's source, when its checkpoint store
// covers some documents only, so that it delivers only the events of those
// (see partialCheckpoints).
func (r *Runner) keepDocuments() error {
	partial, ok := r.checkpoints.(partialCheckpoints)
	if !ok {
		return nil
	}
	if len(r.engine.projections) != 1 {
		return errors.New("a checkpoint store that covers some documents only needs an engine of one projection")
	}
	kept := keptSource{Source: r.source, engine: r.engine, keep: partial.NeedsEvent, passed: &r.counts.elsewhere}
	if a, ok := r.source.(AnchoredSource); ok {
		r.source = anchoredKeptSource{keptSource: kept, anchored: a}
		return nil
	}
	r.source = kept
	return nil
}

// keptSource is a source whose subscriptions pass over the events of
// documents keep refuses.
type keptSource struct {
	Source
	engine *Engine
	keep   func(id string, at Checkpoint) bool
	passed *atomic.Uint64 // counts the events it passes over
}

func (s keptSource) Subscribe(ctx context.Context, from *Checkpoint) (Subscription, error) {
	sub, err := s.Source.Subscribe(ctx, from)
	if err != nil {
		return nil, err
	}
	return keptSubscription{Subscription: sub, source: s}, nil
}

// anchoredKeptSource is a keptSource that checks checkpoints as the source
// it wraps does.
type anchoredKeptSource struct {
	keptSource
	anchored AnchoredSource
}

func (s anchoredKeptSource) Log(ctx context.Context) (string, error) { return s.anchored.Log(ctx) }

func (s anchoredKeptSource) Check(ctx context.Context, cp Checkpoint) error {
	return s.anchored.Check(ctx, cp)
}

type keptSubscription struct {
	Subscription
	source keptSource
}

func (s keptSubscription) Next(ctx context.Context) (Delivery, error) {
	d, err := s.Subscription.Next(ctx)
	if err != nil || d.Event == nil || d.Settle != nil {
		return d, err
	}
	if s.source.passesOver(ctx, d.Event, d.Checkpoint) {
		s.source.passed.Add(1)
		return Delivery{Checkpoint: d.Checkpoint, CaughtUp: d.CaughtUp}, nil
	}
	return d, nil
}

// passesOverRecord reports whether ev, a node's record about a stream, is
// passed over: a deletion whose document the store does not need it for (it
// covers the document from a checkpoint past it: a run that resumes another
// segment from before it must not delete the document again, which may
// have been written again since). Other records reach the engine.
func (s keptSource) passesOverRecord(ev Event, at Checkpoint) bool {
	d, ok := deletionOf(ev)
	if !ok {
		return false
	}
	_, id, ok := s.engine.deletedDocument(s.engine.projections[0], ev, d)
	return ok && !s.keep(id, at)
}

// passesOver reports whether no document ev, at checkpoint at, feeds needs
// it; it keeps the decoded payload in ev, so that the engine does not
// decode it again. A projection that routes by the envelope
// ([Projection.RoutesByEnvelope]) has the events of documents it does not
// need passed over without their payloads decoded.
func (s keptSource) passesOver(ctx context.Context, ev *Event, at *Checkpoint) bool {
	switch {
	case at == nil:
		return false
	case isDeletionRecord(*ev):
		return s.passesOverRecord(*ev, *at)
	}
	p := s.engine.projections[0]
	bare, byEnvelope := s.routeBare(p, *ev)
	if byEnvelope && !s.keep(bare, *at) {
		return true
	}
	decoded, targets, unroutable, decodeErr := s.engine.routed(ctx, *ev)
	if decodeErr == nil {
		ev.Payload = decoded.Payload
		if byEnvelope && (len(targets) != 1 || targets[0].id != bare) {
			s.engine.misroutedByEnvelope(p, *ev, bare, targets)
		}
	}
	if len(targets) == 0 || len(unroutable) > 0 {
		return false
	}
	for _, t := range targets {
		if s.keep(t.id, *at) {
			return false
		}
	}
	return true
}

// routeBare routes ev, its payload not decoded, when p routes by the
// envelope: ok when its router names a document, the same with no payload
// and with the zero value of the event's type (a router that reads the
// payload all the same answers otherwise for one of them, or fails).
func (s keptSource) routeBare(p Definition, ev Event) (id string, ok bool) {
	if r := p.envelopeRouting(); r == nil || r.readsPayload.Load() || ev.Payload != nil {
		return "", false
	}
	zero := ev
	zero.Payload, _ = s.engine.registry.zero(ev)
	id, routed, trusted, _ := routeUndecoded(p.Route, ev, zero)
	return id, routed && trusted
}

// envelopeRouting is what the engine knows of a router said to read the
// envelope only ([Projection.RoutesByEnvelope]).
type envelopeRouting struct {
	// readsPayload: an event went to another document with its payload
	// than without; its events are decoded before they are routed.
	readsPayload atomic.Bool
}

// misroutedByEnvelope says, once for p in this process, that p's router
// sent ev to document bare without its payload and elsewhere (targets) with
// it, although p routes by the envelope: events passed over on that word
// may have been this process's documents'. p's events are decoded before
// they are routed from then on, by every engine of p.
func (e *Engine) misroutedByEnvelope(p Definition, ev Event, bare string, targets []target) {
	if p.envelopeRouting().readsPayload.Swap(true) {
		return
	}
	decoded := "none"
	if len(targets) > 0 {
		decoded = targets[0].id
	}
	e.logger.Error("a projection said to route by the envelope (RoutesByEnvelope) has a router that reads the payload: "+
		"its events are decoded before they are routed from now on, and events passed over before may have been missed: "+
		"fix the router or remove RoutesByEnvelope, then rebuild the projection",
		"projection", p.Name(), "event", ev.ID, "stream", ev.StreamID, "revision", ev.StreamRevision,
		"bare_document", bare, "decoded_document", decoded)
}
