package projector

import (
	"context"
	"errors"
	"fmt"

	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// Reasons the gate reads the document again; both are retried under the policy.
var (
	errNotVisible = errors.New("document not at the predecessor's revision yet")
	errMoved      = errors.New("document moved between read and write")
)

// gated is the kind of document the revision gate keeps: one per stream,
// holding the stream revision of the last event applied ([driver.Store]).
// Within one engine, events of one document queue in revision order.
type gated struct{}

func (gated) handle(ctx context.Context, e *Engine, t target, ev Event, undecodable error) Result {
	return e.gate(ctx, t, ev, undecodable)
}

func (gated) valid() error { return nil }

func (gated) batches() bool { return true }

func (gated) prepare(context.Context, *Engine, string) error { return nil }

func (gated) within(ctx context.Context, _ *Engine, _ target, _ Event, attempt func(context.Context) (step, error)) (step, error) {
	return attempt(ctx)
}

func (gated) read(ctx context.Context, store driver.Store, collection, id string, state any) (bool, int64, error) {
	rev, found, err := store.Load(ctx, collection, id, 0, state)
	if !found {
		return found, -1, err
	}
	return found, int64(rev), err
}

// replayOnce applies parked event ev to the document as it is now. The gate
// moved the document past ev when it parked it, so ev is a duplicate to the
// gate; the revision stays, and the write is conditional on it.
func (gated) replayOnce(ctx context.Context, e *Engine, t target, ev Event) error {
	state := t.p.newState()
	rev, found, err := e.store.Load(ctx, t.p.Collection(), t.id, 0, state)
	creates := t.p.creates(ev)
	switch {
	case err != nil:
		return err
	case !found:
		return retry.Permanent(fmt.Errorf("document %q is gone", t.id))
	case decide(ev.StreamRevision, false, found, rev) != duplicate:
		// The gate does not count the event as applied: it has not moved
		// the document past it.
		return retry.Permanent(fmt.Errorf("document %q is at revision %d, before the parked event's %d", t.id, rev, ev.StreamRevision))
	}
	var from any = state
	if creates && ev.StreamRevision == rev {
		from = nil
	}
	next, err := t.p.applyTo(from, ev)
	if err != nil {
		return retry.Permanent(err)
	}
	matched, err := e.store.Update(ctx, t.p.Collection(), t.id, rev, rev, next)
	switch {
	case err != nil:
		return err
	case !matched:
		return errMoved
	}
	return nil
}

// gate applies ev to gated document t: the revision gate described in the
// package documentation, whose rule is [decide]. undecodable is the
// decoding error of ev's payload (only under [Skip]): the gate then moves
// the document past ev without applying it.
func (e *Engine) gate(ctx context.Context, t target, ev Event, undecodable error) Result {
	tk := e.queue.enter(t.key(), ev.StreamRevision)
	res := e.gateTurn(ctx, tk, t, ev, undecodable)
	e.queue.leave(tk, res.Outcome != Failed, res.Err)
	return res
}

func (e *Engine) gateTurn(ctx context.Context, tk *ticket, t target, ev Event, undecodable error) Result {
	if err := e.queue.wait(ctx, tk); err != nil {
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: -1})
	}
	apply := e.applier(t.p, ev, undecodable)
	if t.p.creates(ev) {
		return e.create(ctx, tk, t, ev, apply)
	}
	return e.advance(ctx, tk, t, ev, apply)
}

// create inserts the document at the event's revision without reading it
// first; when it is there already, the strategy's check (the revision gate,
// [decide]) says whether the event is a duplicate. A second creation of the
// document (it exists at an earlier revision) is a step that fails with
// [ErrAlreadyCreated] at the event's place in the stream: the failure policy
// says whether the document moves past it.
func (e *Engine) create(ctx context.Context, tk *ticket, t target, ev Event, apply applyStep) Result {
	k := e.keeperOf(t.p)
	state, skipped, err := e.step(t.p, nil, apply)
	if err != nil {
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: -1})
	}
	waits := 0
	outcome, err := retry.DoValue(ctx, e.policyCounting(t, ev, &waits), func(ctx context.Context) (Outcome, error) {
		out, err := k.within(ctx, e, t, ev, func(ctx context.Context) (step, error) {
			return e.createOnce(ctx, k, t, ev, state, skipped, waits+1)
		})
		return out.outcome, err
	}, e.retryOpts...)
	var again *recreated
	if errors.As(err, &again) {
		return e.advance(ctx, tk, t, ev, func(any) (any, error) {
			return nil, fmt.Errorf("%w at revision %d", ErrAlreadyCreated, again.rev)
		})
	}
	if err != nil {
		r := e.fail(t, ev, failure{err: err, wanted: -1, seen: -1, attempts: waits + 1})
		r.Waits = waits
		return r
	}
	return e.result(t, ev, outcome, waits, skipped)
}

// recreated: a creation event found its document created already, at an
// earlier revision.
type recreated struct{ rev uint64 }

func (r *recreated) Error() string {
	return fmt.Sprintf("%v at revision %d", ErrAlreadyCreated, r.rev)
}

// createOnce is one attempt of create.
func (e *Engine) createOnce(ctx context.Context, k keeper, t target, ev Event, state any, skipped error, attempts int) (step, error) {
	if skipped != nil {
		if err := e.park(ctx, t, ev, skipped, attempts); err != nil {
			return step{}, err
		}
	}
	err := e.store.Insert(ctx, t.p.Collection(), t.id, k.record(stored{}, ev).rev, state)
	if !errors.Is(err, driver.ErrDuplicate) {
		return step{outcome: Applied}, err
	}
	rev, found, err := e.store.Load(ctx, t.p.Collection(), t.id, 0, nil)
	if err != nil {
		return step{}, err
	}
	switch v, _ := k.check(stored{found: found, rev: rev}, ev, true); v {
	case create: // deleted since: insert again
		return step{}, errMoved
	case refuse:
		return step{}, retry.Permanent(&recreated{rev: rev})
	}
	return step{outcome: Duplicate}, nil
}

// advance moves the document from revision n-1 to n.
func (e *Engine) advance(ctx context.Context, tk *ticket, t target, ev Event, apply applyStep) Result {
	waits, attempts := 0, 0
	seen := int64(-1)
	var skipped error
	var queued error // an earlier event of the document, in flight here, failed
	k := e.keeperOf(t.p)
	outcome, err := retry.DoValue(ctx, e.policyCounting(t, ev, &waits), func(ctx context.Context) (Outcome, error) {
		attempts++
		rev := int64(-1)
		out, err := k.within(ctx, e, t, ev, func(ctx context.Context) (step, error) {
			var out step
			var err error
			out, rev, err = e.advanceOnce(ctx, k, tk, t, ev, apply, attempts, &queued)
			return out, err
		})
		if err == nil || rev >= 0 {
			seen = rev
		}
		skipped = out.skipped
		return out.outcome, err
	}, e.retryOpts...)
	if err == nil {
		return e.result(t, ev, outcome, waits, skipped)
	}
	f := failure{err: err, wanted: int64(ev.StreamRevision) - 1, seen: seen, attempts: attempts}
	switch {
	case queued != nil:
		f.err, f.wanted = queued, -1
	case retry.IsPermanent(err):
		f.wanted = -1 // it did not wait: the event itself is at fault
	case ctx.Err() != nil:
		// Stopped from outside; err says so.
	case errors.Is(err, errNotVisible) || errors.Is(err, errMoved):
		f.err = fmt.Errorf("%w: %w", ErrPredecessorMissing, err)
		f.seen = e.revisionNow(ctx, t, seen)
	}
	r := e.fail(t, ev, f)
	r.Waits = waits
	return r
}

// advanceOnce is one read-decide-write of advance; rev is the revision it
// read (-1: none).
func (e *Engine) advanceOnce(ctx context.Context, k keeper, tk *ticket, t target, ev Event, apply applyStep, attempts int, queued *error) (step, int64, error) {
	n := ev.StreamRevision
	state := t.p.newState()
	rev, found, err := e.store.Load(ctx, t.p.Collection(), t.id, n-1, state)
	for err == nil && !found && e.queue.predecessor(tk) != nil {
		// An earlier event of this document arrived here while this one
		// waited: queue behind it rather than poll, then read again.
		if *queued = e.queue.wait(ctx, tk); *queued != nil {
			return step{}, -1, retry.Permanent(*queued)
		}
		rev, found, err = e.store.Load(ctx, t.p.Collection(), t.id, n-1, state)
	}
	if err != nil {
		return step{}, -1, err
	}
	read := stored{found: found, rev: rev}
	switch v, _ := k.check(read, ev, false); v {
	case wait:
		return step{}, -1, errNotVisible
	case duplicate:
		return step{outcome: Duplicate}, int64(rev), nil
	}
	next, why, err := e.step(t.p, state, apply)
	if err != nil {
		return step{}, int64(rev), err
	}
	if why != nil {
		// The projection may have changed the state in place before it
		// failed: write the document back as it is stored.
		fresh := t.p.newState()
		if _, found, err := e.store.Load(ctx, t.p.Collection(), t.id, n-1, fresh); err != nil {
			return step{}, int64(rev), err
		} else if !found {
			return step{}, int64(rev), errMoved
		}
		next = fresh
		if err := e.park(ctx, t, ev, why, attempts); err != nil {
			return step{}, int64(rev), err
		}
	}
	matched, err := e.store.Update(ctx, t.p.Collection(), t.id, rev, k.record(read, ev).rev, next)
	switch {
	case err != nil:
		return step{}, int64(rev), err
	case !matched:
		return step{}, int64(rev), errMoved
	}
	return step{outcome: Applied, skipped: why}, int64(rev), nil
}

// revisionNow reads the document's revision for an error message; it keeps
// what was seen before when the read fails.
func (e *Engine) revisionNow(ctx context.Context, t target, seen int64) int64 {
	if ctx.Err() != nil {
		return seen
	}
	rev, found, err := e.store.Load(ctx, t.p.Collection(), t.id, 0, nil)
	switch {
	case err != nil:
		return seen
	case !found:
		return -1
	}
	return int64(rev)
}
