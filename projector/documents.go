package projector

import (
	"context"
	"errors"
)

// WithDocuments has the runner hand its engine only the events of the
// documents keep accepts (by document id), so that several processes can
// share one projection's documents, each running the documents of its
// share (a stable hash of the id picks a document's share: every event of
// a document goes to the same process, whichever streams feed it). The
// runner routes each event as the engine would (ties included); an event
// that feeds only documents keep refuses is passed over as a checkpoint,
// as events of other streams are. Events the projection does not route,
// cannot route, or whose document it cannot tell (a stream's deletion
// record) reach the engine as without the option. The engine must have one
// projection.
func WithDocuments(keep func(id string) bool) RunnerOption {
	return func(r *Runner) { r.keep = keep }
}

// keepDocuments wraps the runner's source so that it delivers only the
// events of the documents r.keep accepts (see [WithDocuments]).
func (r *Runner) keepDocuments() error {
	if r.keep == nil {
		return nil
	}
	if len(r.engine.projections) != 1 {
		return errors.New("WithDocuments needs an engine of one projection")
	}
	kept := keptSource{Source: r.source, engine: r.engine, keep: r.keep}
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
	keep   func(id string) bool
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
	if err != nil || d.Event == nil || d.Settle != nil || isDeletionRecord(*d.Event) {
		return d, err
	}
	if s.source.passesOver(ctx, d.Event) {
		return Delivery{Checkpoint: d.Checkpoint, CaughtUp: d.CaughtUp}, nil
	}
	return d, nil
}

// passesOver reports whether every document ev feeds is refused; it keeps
// the decoded payload in ev, so that the engine does not decode it again.
func (s keptSource) passesOver(ctx context.Context, ev *Event) bool {
	decoded, targets, unroutable, decodeErr := s.engine.routed(ctx, *ev)
	if decodeErr == nil {
		ev.Payload = decoded.Payload
	}
	if len(targets) == 0 || len(unroutable) > 0 {
		return false
	}
	for _, t := range targets {
		if s.keep(t.id) {
			return false
		}
	}
	return true
}
