package projector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/revgate/projector/retry"
)

// ParkedEvent is an event that failed permanently in one projection and was
// set aside under the [Park] policy, with why: what an operator looks at, and
// what [Engine.Replay] applies once the projection is fixed.
type ParkedEvent struct {
	Projection, Document string
	Stream               string
	Revision, Position   uint64
	EventID, Type        string
	Data, Metadata       []byte
	Created              time.Time
	// Error is why it failed; Attempts how many times it was tried.
	Error    string
	Attempts int
	ParkedAt time.Time
}

// Event returns the parked event as the engine handles it.
func (p ParkedEvent) Event() Event {
	return Event{ID: p.EventID, Type: p.Type, StreamID: p.Stream, StreamRevision: p.Revision,
		Position: p.Position, Data: p.Data, Metadata: p.Metadata, Created: p.Created}
}

// Parker records parked events: mongostore keeps them in a collection.
type Parker interface {
	// Park records p; recording the same event of the same projection again
	// is not an error.
	Park(ctx context.Context, p ParkedEvent) error
}

// WithParker sets where the [Park] policy records events.
func WithParker(p Parker) Option { return func(e *Engine) { e.parker = p } }

// park records ev, which failed in p with cause, before the gate moves the
// document past it: a record is never missing for a document that moved.
func (e *Engine) park(ctx context.Context, p Definition, id string, ev Event, cause error, attempts int) error {
	if e.policyOf(p) != Park {
		return nil
	}
	err := e.parker.Park(ctx, ParkedEvent{
		Projection: p.Name(), Document: id, Stream: ev.StreamID, Revision: ev.StreamRevision, Position: ev.Position,
		EventID: ev.ID, Type: ev.Type, Data: ev.Data, Metadata: ev.Metadata, Created: ev.Created,
		Error: cause.Error(), Attempts: attempts, ParkedAt: time.Now().UTC(),
	})
	if err != nil {
		return fmt.Errorf("parking the event: %w", err)
	}
	return nil
}

// ErrNotParked: replaying an event of a projection the engine does not run.
var ErrNotParked = errors.New("no such projection in this engine")

// Replay applies a parked event, once its projection is fixed, to the
// document as it is now. The document's revision already counts the event
// (the gate moved past it when it was parked), so the revision stays; the
// state becomes the projection's step on the current state. That is exact for
// projections whose steps commute (counters, sets, merged quantities); an
// order-sensitive read model gets the event's effect out of its order, and is
// made exact by a rebuild instead. The result is Applied, or Failed with why
// (the event stays parked).
//
// Under the revision gate the write cannot be conditional on anything the
// gate changes (the revision stays), so replay while the projection is not
// running: a running projector that is catching up folds from what it has
// read before (mongostore caches the documents of its batches) and would
// write over the replay. Under the other strategies the write is conditional
// on the document's version and safe at any time.
func (e *Engine) Replay(ctx context.Context, pe ParkedEvent) Result {
	var p Definition
	for _, d := range e.projections {
		if d.Name() == pe.Projection {
			p = d
		}
	}
	ev := pe.Event()
	if p == nil {
		return Result{Projection: pe.Projection, Document: pe.Document, Outcome: Failed, Err: fmt.Errorf("%w: %q", ErrNotParked, pe.Projection)}
	}
	decoded, err := e.registry.Decode(ev)
	if err != nil {
		return e.fail(p, pe.Document, ev, -1, -1, 1, retry.Permanent(err))
	}
	attempts := 0
	if strategyOf(p).kind != kindStreamRevision {
		gs := e.store.(GuardedStore)
		err = retry.Do(ctx, e.policy, func(ctx context.Context) error {
			attempts++
			state := p.newState()
			meta, found, err := gs.LoadGuarded(ctx, p.Collection(), pe.Document, state)
			switch {
			case err != nil:
				return err
			case !found:
				return retry.Permanent(fmt.Errorf("document %q is gone", pe.Document))
			}
			next, err := p.applyTo(state, decoded)
			if err != nil {
				return retry.Permanent(err)
			}
			expected := meta.Version
			meta.Version++
			written, err := gs.PutGuarded(ctx, p.Collection(), pe.Document, expected, meta, next)
			switch {
			case err != nil:
				return err
			case !written:
				return errMoved
			}
			return nil
		}, e.retryOpts...)
		if err != nil {
			return e.fail(p, pe.Document, decoded, -1, -1, attempts, err)
		}
		return Result{Projection: p.Name(), Document: pe.Document, Outcome: Applied}
	}
	err = retry.Do(ctx, e.policy, func(ctx context.Context) error {
		attempts++
		state := p.newState()
		rev, found, err := e.store.Load(ctx, p.Collection(), pe.Document, 0, state)
		switch {
		case err != nil:
			return err
		case !found:
			return retry.Permanent(fmt.Errorf("document %q is gone", pe.Document))
		case rev < pe.Revision:
			return retry.Permanent(fmt.Errorf("document %q is at revision %d, before the parked event's %d", pe.Document, rev, pe.Revision))
		}
		var next any
		if p.creates(decoded) && pe.Revision == rev {
			next, err = p.applyTo(nil, decoded)
		} else {
			next, err = p.applyTo(state, decoded)
		}
		if err != nil {
			return retry.Permanent(err)
		}
		matched, err := e.store.Update(ctx, p.Collection(), pe.Document, rev, rev, next)
		switch {
		case err != nil:
			return err
		case !matched:
			return errMoved
		}
		return nil
	}, e.retryOpts...)
	if err != nil {
		return e.fail(p, pe.Document, decoded, -1, -1, attempts, err)
	}
	return Result{Projection: p.Name(), Document: pe.Document, Outcome: Applied}
}
