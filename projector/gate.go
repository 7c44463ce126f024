package projector

import (
	"context"
	"errors"
	"fmt"

	"github.com/revgate/projector/retry"
)

// Reasons the gate reads the document again; both are retried under the policy.
var (
	errNotVisible = errors.New("document not at the predecessor's revision yet")
	errMoved      = errors.New("document moved between read and write")
)

// gate applies ev to document id of projection p: the revision gate described
// in the package documentation.
// undecodable is the decoding error of ev's payload (only under [Skip]): the
// gate then moves the document past ev without applying it.
func (e *Engine) gate(ctx context.Context, p Definition, id string, ev Event, undecodable error) Result {
	if strategyOf(p).kind != kindStreamRevision {
		// Not revision-ordered: no queue by revision, only a lock around each
		// read-apply-write.
		return e.guarded(ctx, p, id, ev, func(state any) (any, error) {
			if undecodable != nil {
				return nil, undecodable
			}
			return p.applyTo(state, ev)
		})
	}
	t := e.queue.enter(docKey{p.Collection(), id}, ev.StreamRevision)
	res := e.gateTurn(ctx, t, p, id, ev, undecodable)
	e.queue.leave(t, res.Outcome != Failed, res.Err)
	return res
}

func (e *Engine) gateTurn(ctx context.Context, t *ticket, p Definition, id string, ev Event, undecodable error) Result {
	if err := e.queue.wait(ctx, t); err != nil {
		return e.fail(p, id, ev, -1, -1, 0, err)
	}
	apply := func(state any) (any, error) {
		if undecodable != nil {
			return nil, undecodable
		}
		return p.applyTo(state, ev)
	}
	if p.creates(ev) {
		return e.create(ctx, p, id, ev, apply)
	}
	return e.advance(ctx, t, p, id, ev, apply)
}

// applyStep is the projection's step for one event; it fails for an event
// that cannot be applied.
type applyStep func(state any) (any, error)

// step runs apply on state. A permanent failure under [Skip] gives state
// itself (the zero state for nil) and the cause in skipped.
func (e *Engine) step(p Definition, state any, apply applyStep) (next any, skipped, err error) {
	next, err = apply(state)
	if err == nil {
		return next, nil, nil
	}
	if e.policyOf(p) == Block {
		return nil, nil, retry.Permanent(err)
	}
	if state == nil {
		state = p.newState()
	}
	return state, err, nil
}

// result is the outcome of a gate pass: skipped turns Applied into Skipped.
func (e *Engine) result(p Definition, id string, ev Event, outcome Outcome, waits int, skipped error) Result {
	if outcome == Applied && skipped != nil {
		r := e.fail(p, id, ev, -1, -1, 0, retry.Permanent(skipped))
		r.Outcome, r.Waits = Skipped, waits
		if e.policyOf(p) == Park {
			r.Outcome = Parked
		}
		return r
	}
	return Result{Projection: p.Name(), Document: id, Outcome: outcome, Waits: waits}
}

// create inserts the document at the event's revision. A duplicate key means
// the event was applied already, unless the document is older than the event.
func (e *Engine) create(ctx context.Context, p Definition, id string, ev Event, apply applyStep) Result {
	n := ev.StreamRevision
	state, skipped, err := e.step(p, nil, apply)
	if err != nil {
		return e.fail(p, id, ev, -1, -1, 0, err)
	}
	waits := 0
	outcome, err := retry.DoValue(ctx, e.policyCounting(p, id, ev, &waits), func(ctx context.Context) (Outcome, error) {
		if skipped != nil {
			if err := e.park(ctx, p, id, ev, skipped, waits+1); err != nil {
				return 0, err
			}
		}
		err := e.store.Insert(ctx, p.Collection(), id, n, state)
		if !errors.Is(err, ErrDuplicate) {
			return Applied, err
		}
		rev, found, err := e.store.Load(ctx, p.Collection(), id, 0, nil)
		switch {
		case err != nil:
			return 0, err
		case !found: // deleted since: insert again
			return 0, errMoved
		case rev < n:
			return 0, retry.Permanent(fmt.Errorf("%w at revision %d", ErrAlreadyCreated, rev))
		}
		return Duplicate, nil
	}, e.retryOpts...)
	if err != nil {
		r := e.fail(p, id, ev, -1, -1, waits+1, err)
		r.Waits = waits
		return r
	}
	return e.result(p, id, ev, outcome, waits, skipped)
}

// advance moves the document from revision n-1 to n.
func (e *Engine) advance(ctx context.Context, t *ticket, p Definition, id string, ev Event, apply applyStep) Result {
	n := ev.StreamRevision
	waits, attempts := 0, 0
	seen := int64(-1)
	var skipped error
	var queued error // an earlier event of the document, in flight here, failed
	outcome, err := retry.DoValue(ctx, e.policyCounting(p, id, ev, &waits), func(ctx context.Context) (Outcome, error) {
		attempts++
		state := p.newState()
		rev, found, err := e.store.Load(ctx, p.Collection(), id, n-1, state)
		for err == nil && !found && e.queue.predecessor(t) != nil {
			// An earlier event of this document arrived here while this one
			// waited: queue behind it rather than poll, then read again.
			if queued = e.queue.wait(ctx, t); queued != nil {
				return 0, retry.Permanent(queued)
			}
			rev, found, err = e.store.Load(ctx, p.Collection(), id, n-1, state)
		}
		switch {
		case err != nil:
			return 0, err
		case !found:
			return 0, errNotVisible
		}
		seen = int64(rev)
		if rev > n-1 {
			return Duplicate, nil
		}
		next, why, err := e.step(p, state, apply)
		if err != nil {
			return 0, err
		}
		if why != nil {
			// The projection may have changed the state in place before it
			// failed: write the document back as it is stored.
			fresh := p.newState()
			if _, found, err := e.store.Load(ctx, p.Collection(), id, n-1, fresh); err != nil {
				return 0, err
			} else if !found {
				return 0, errMoved
			}
			next = fresh
		}
		skipped = why
		if skipped != nil {
			if err := e.park(ctx, p, id, ev, skipped, attempts); err != nil {
				return 0, err
			}
		}
		matched, err := e.store.Update(ctx, p.Collection(), id, n-1, n, next)
		switch {
		case err != nil:
			return 0, err
		case !matched:
			return 0, errMoved
		}
		return Applied, nil
	}, e.retryOpts...)
	if err == nil {
		return e.result(p, id, ev, outcome, waits, skipped)
	}
	wanted := int64(n) - 1
	switch {
	case queued != nil:
		err, wanted = queued, -1
	case retry.IsPermanent(err):
		wanted = -1 // it did not wait: the event itself is at fault
	case ctx.Err() != nil:
		// Stopped from outside; err says so.
	case errors.Is(err, errNotVisible) || errors.Is(err, errMoved):
		err = fmt.Errorf("%w: %w", ErrPredecessorMissing, err)
		seen = e.revisionNow(ctx, p, id, seen)
	}
	r := e.fail(p, id, ev, wanted, seen, attempts, err)
	r.Waits = waits
	return r
}

// revisionNow reads the document's revision for an error message; it keeps
// what was seen before when the read fails.
func (e *Engine) revisionNow(ctx context.Context, p Definition, id string, seen int64) int64 {
	if ctx.Err() != nil {
		return seen
	}
	rev, found, err := e.store.Load(ctx, p.Collection(), id, 0, nil)
	switch {
	case err != nil:
		return seen
	case !found:
		return -1
	}
	return int64(rev)
}

// policyCounting is the engine's policy with a hook that counts the waits of
// one event and logs them, then calls the user's hook.
func (e *Engine) policyCounting(p Definition, id string, ev Event, waits *int) retry.Policy {
	pol := e.policy
	user := pol.OnRetry
	pol.OnRetry = func(a retry.Attempt) {
		*waits++
		// Rate-limited: the first wait and then every power of two.
		if a.Number&(a.Number-1) == 0 {
			e.logger.Debug("gate waits", "projection", p.Name(), "document", id, "stream", ev.StreamID,
				"revision", ev.StreamRevision, "attempt", a.Number, "delay", a.Delay, "reason", a.Err)
		}
		if user != nil {
			user(a)
		}
	}
	return pol
}
