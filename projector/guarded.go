package projector

import (
	"context"
	"errors"
	"fmt"

	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// versioned is the kind of document every strategy but the revision gate
// keeps: the state with a [driver.Meta] of what it has applied, read whole
// and written conditional on the meta's version, so that two writers never
// overwrite each other. Within one engine a document's read-decide-write is
// serialized by a lock.
type versioned struct{}

func (versioned) handle(ctx context.Context, e *Engine, t target, ev Event, undecodable error) Result {
	return e.guarded(ctx, t, ev, undecodable)
}

func (versioned) valid() error { return nil }

func (versioned) prepare(context.Context, *Engine, string) error { return nil }

func (versioned) within(ctx context.Context, _ *Engine, _ target, _ Event, attempt func(context.Context) (step, error)) (step, error) {
	return attempt(ctx)
}

func (versioned) read(ctx context.Context, store driver.Store, collection, id string, state any) (bool, int64, error) {
	gs, ok := store.(driver.GuardedStore)
	if !ok {
		return false, -1, fmt.Errorf("projector: %T keeps no versioned documents", store)
	}
	_, found, err := gs.LoadGuarded(ctx, collection, id, state)
	return found, -1, err
}

// replayOnce applies ev to the document as it is now, keeping its meta,
// conditional on its version.
func (versioned) replayOnce(ctx context.Context, e *Engine, t target, ev Event, _ ParkedEvent, wrote *string) (bool, error) {
	state := t.p.newState()
	meta, found, err := e.docs().LoadGuarded(ctx, t.p.Collection(), t.id, state)
	switch {
	case err != nil:
		return false, err
	case !found:
		return false, retry.Permanent(fmt.Errorf("document %q is not in %s (deleted, or never written): a replay applies an event to its document as it is", t.id, t.p.Collection()))
	case meta.Replayed == ev.ID:
		// Written with the event's change: by an earlier replay, or by
		// this one's earlier attempt, whose answer was lost.
		return *wrote == "", nil
	}
	next, notFolded, err := e.replayedGuardedState(ctx, t, ev, meta, state)
	if err != nil {
		return false, err
	}
	expected := meta.Version
	meta.Version++
	meta.Replayed = ev.ID // with the change: a replay run again knows
	*wrote = ev.ID
	written, err := e.docs().PutGuarded(ctx, t.p.Collection(), t.id, expected, meta, next)
	switch {
	case err != nil:
		return false, err
	case !written:
		return false, errMoved
	}
	if notFolded != "" {
		// Said once it is written: an attempt that failed, and was tried
		// again, applied nothing.
		e.logger.Warn("replayed event applied to the document as it is, after later events of its stream: a field that depends on "+
			"their order may differ from the fold (rebuild the projection to be exact)", "projection", t.p.Name(), "document", t.id,
			"stream", ev.StreamID, "revision", ev.StreamRevision, "not folded anew", notFolded)
	}
	return false, nil
}

// replayedGuardedState is the state of versioned document t (read with
// meta and state) once parked event ev is replayed into it: under
// [RevisionMap], folded anew from its streams where later events of ev's
// stream came before it ([Engine.refoldMap]); else ev applied to it as it
// is, which is exact when its steps commute, or, under a revision map,
// when nothing of ev's stream came after it. notFolded says why a document
// that needed folding anew was not ("" when it was, or needed not).
func (e *Engine) replayedGuardedState(ctx context.Context, t target, ev Event, meta driver.Meta, state any) (next any, notFolded string, err error) {
	if _, ok := e.keeperOf(t.p).(revisionMap); ok && e.refoldsMap(meta, ev) {
		notFolded = fmt.Sprintf("it is fed by %d streams, more than the %d a replay reads", len(meta.Revisions), maxRefoldStreams)
		if len(meta.Revisions) <= maxRefoldStreams {
			next, err := e.refoldMap(ctx, t, meta, ev)
			switch {
			case err == nil:
				return next, "", nil
			case !errors.Is(err, ErrStreamDeleted) && !errors.Is(err, errNoRefold):
				return nil, "", err
			}
			notFolded = err.Error()
		}
	}
	if t.p.startsDocument(ev) && !holdsNothing(t.p, state) {
		return nil, "", retry.Permanent(recreatedSince(t))
	}
	next, err = t.p.applyTo(state, ev)
	if err != nil {
		return nil, "", retry.Permanent(err)
	}
	return next, notFolded, nil
}

// needGuarded reports a store that cannot keep versioned documents.
func needGuarded(store driver.Store, strategy string) error {
	if _, ok := store.(driver.GuardedStore); !ok {
		return fmt.Errorf("the %s strategy needs whole-document reads and version-conditional writes (driver.GuardedStore); %T has not", strategy, store)
	}
	return nil
}

// needPosition refuses an event without a global position, for a strategy
// that orders by it.
func needPosition(k keeper, ev Event) error {
	if ev.Position == 0 {
		return retry.Permanent(fmt.Errorf("the %s strategy needs the event's global position, and it has none", k))
	}
	return nil
}

// guarded applies ev to versioned document t: read it, ask the strategy,
// apply, write it conditional on its version; again while the strategy says
// wait or the write misses, under the engine's retry policy.
func (e *Engine) guarded(ctx context.Context, t target, ev Event, undecodable error) Result {
	k := e.keeperOf(t.p)
	waits, attempts := 0, 0
	var skipped error
	outcome, err := retry.DoValue(ctx, e.policyCounting(ctx, t, ev, &waits), func(ctx context.Context) (Outcome, error) {
		attempts++
		unlock := e.locks.lock(t.key())
		defer unlock()
		out, err := k.within(ctx, e, t, ev, func(ctx context.Context) (step, error) {
			return e.guardedStep(ctx, k, t, ev, undecodable, attempts)
		})
		skipped = out.skipped
		return out.outcome, err
	}, e.retryOptions()...)
	if err == nil {
		return e.result(t, ev, outcome, waits, skipped)
	}
	if refused := e.refusedStep(t, err); refused != nil {
		return e.onceRefused().guarded(ctx, t, ev, refused)
	}
	f := failure{err: err, wanted: -1, seen: -1, attempts: attempts}
	switch {
	case retry.IsPermanent(err), ctx.Err() != nil, errors.Is(err, retry.ErrStopped):
	case errors.Is(err, errNotVisible) || errors.Is(err, errMoved):
		f.wanted = int64(ev.StreamRevision) - 1
		f.err = fmt.Errorf("%w: %w", ErrPredecessorMissing, err)
	}
	r := e.fail(t, ev, f)
	r.Waits = waits
	return r
}

// guardedHole is what becomes of an event of a revision map whose stream's
// predecessor the document has not reached, when the event store says the
// revisions between are gone ([StreamReader]): passed is false when they are
// not (wait). The event of a deleted stream the document never saw is a
// duplicate; under [Block] the event fails for good, naming the revisions;
// under [Skip] and [Park] (which records the hole) it applies: passed, with
// no outcome yet.
func (e *Engine) guardedHole(ctx context.Context, t target, ev Event, meta driver.Meta) (out step, passed bool, err error) {
	have, seen := meta.Revisions[streamKey(ev.StreamID)]
	h, err := e.holeBefore(ctx, t, ev, seen, have)
	switch {
	case err != nil:
		return step{}, true, err
	case !h.gone:
		return step{}, false, errNotVisible
	case !seen && h.deleted:
		return step{outcome: Duplicate}, true, nil
	}
	gone := h.err(t, ev.StreamID, ev.StreamRevision)
	if h.stray {
		out, err := e.refuseStray(ctx, t, ev, gone, 1)
		return out, true, err
	}
	if !h.notOurs && !e.movesPastHole(t.p) {
		return step{}, true, retry.Permanent(gone)
	}
	if held, err := e.holdAtHole(ctx, t, ev, h); held || err != nil {
		return step{}, true, err
	}
	if err := e.parkHole(ctx, t, ev, h, gone); err != nil {
		return step{}, true, err
	}
	return step{}, true, nil
}

// guardedStep is one read-decide-write of versioned document t.
func (e *Engine) guardedStep(ctx context.Context, k keeper, t target, ev Event, undecodable error, attempts int) (step, error) {
	state := t.p.newState()
	meta, found, err := e.docs().LoadGuarded(ctx, t.p.Collection(), t.id, state)
	if err != nil {
		return step{}, err
	}
	read := stored{found: found, meta: meta}
	if out, done, err := e.guardedVerdict(ctx, k, t, ev, read, attempts, undecodable); done || err != nil {
		return out, err
	}
	var from any
	if found {
		from = state
	}
	next, skipped, err := e.step(t.p, from, e.applier(t.p, ev, undecodable))
	if err != nil {
		return step{}, err
	}
	if skipped != nil {
		if next, err = e.passOverGuarded(ctx, t, ev, found, next, skipped, attempts); err != nil {
			return step{}, err
		}
	}
	if err := e.putVersioned(ctx, k, t, read, ev, next); err != nil {
		return step{}, err
	}
	return step{outcome: Applied, skipped: skipped}, nil
}

// guardedVerdict is what the strategy k says of ev in versioned document
// t as read: done when that settles it (a duplicate, a refusal, a wait, a
// gap filled, a hole the document moves past with an outcome), else ev
// applies.
func (e *Engine) guardedVerdict(ctx context.Context, k keeper, t target, ev Event, read stored, attempts int, undecodable error) (out step, done bool, err error) {
	v, err := k.check(read, ev, t.p.creates(ev))
	if err == nil && v == wait && e.firstOfStream(t.p, ev, read.meta.Revisions) {
		v = apply // as a batch folds it (firstHere)
	}
	switch {
	case err != nil && v == refuse:
		out, err = e.refused(ctx, t, ev, err, attempts)
		return out, true, err
	case err != nil:
		return step{}, true, err
	case v == duplicate:
		return step{outcome: Duplicate}, true, nil
	case v == wait:
		return e.guardedWait(ctx, k, t, ev, read, attempts, undecodable)
	}
	return step{}, false, nil
}

// guardedWait is what becomes of ev, whose stream's previous event
// versioned document t as read has not reached: on the first attempt, the
// gap is filled from the stream where it can be (see
// [Engine.fillGapGuarded]), else asked whether it is gone from the stream
// (a hole); otherwise ev waits (errNotVisible).
func (e *Engine) guardedWait(ctx context.Context, k keeper, t target, ev Event, read stored, attempts int, undecodable error) (out step, done bool, err error) {
	if attempts > 1 {
		return step{}, true, errNotVisible
	}
	if undecodable == nil && e.fillsGaps(t.p) {
		if out, filled, err := e.fillGapGuarded(ctx, k, t, ev); filled || err != nil {
			return out, true, err
		}
	}
	if e.streamReader() == nil || !k.everyRevision() {
		return step{}, true, errNotVisible
	}
	// Late, or gone from the stream? Asked once, on the first wait.
	out, passed, err := e.guardedHole(ctx, t, ev, read.meta)
	return out, !passed || err != nil || out.outcome != 0, err
}

// fillGapGuarded is [Engine.fillGap] for a document under a revision map:
// the events of ev's stream between the revision the document has of it
// (none: from the stream's start) and ev, read from the event store, then
// ev, folded on the document as it is, which is written once, recording
// ev's revision (filled). It fills nothing where fillGap would not (an
// event that does not decode, routes to another document, fails its step,
// or creates the document a second time; a gap not given one by one): ev
// then waits for its predecessors as before. The document is read again
// for it, as the fold changes the state it folds on.
func (e *Engine) fillGapGuarded(ctx context.Context, k keeper, t target, ev Event) (out step, filled bool, err error) {
	state := t.p.newState()
	meta, found, err := e.docs().LoadGuarded(ctx, t.p.Collection(), t.id, state)
	if err != nil {
		return step{}, false, err
	}
	read := stored{found: found, meta: meta}
	if v, err := k.check(read, ev, t.p.creates(ev)); err != nil || v != wait {
		return step{}, false, errMoved // it moved meanwhile: decide again
	}
	from := uint64(0)
	if have, seen := meta.Revisions[streamKey(ev.StreamID)]; seen {
		from = have + 1
	}
	var cur any
	if found {
		cur = state
	}
	return e.fillFrom(ctx, t, ev, from, cur, e.applier(t.p, ev, nil), func(next any) error {
		return e.putVersioned(ctx, k, t, read, ev, next)
	})
}

// passOverGuarded is the state of versioned document t to move past ev,
// whose step failed (skipped says why) under a policy that moves past it:
// the document as it is stored (the step may have changed it in place),
// read again when found, else next; ev is parked first.
func (e *Engine) passOverGuarded(ctx context.Context, t target, ev Event, found bool, next any, skipped error, attempts int) (any, error) {
	if found {
		fresh := t.p.newState()
		if _, _, err := e.docs().LoadGuarded(ctx, t.p.Collection(), t.id, fresh); err != nil {
			return nil, err
		}
		next = fresh
	}
	if err := e.park(ctx, t, ev, skipped, attempts); err != nil {
		return nil, err
	}
	return next, nil
}

// putVersioned writes versioned document t with state next and the meta that
// records ev, conditional on the version read (none: the document must not
// exist); errMoved when another write came first.
func (e *Engine) putVersioned(ctx context.Context, k keeper, t target, read stored, ev Event, next any) error {
	expected := int64(-1)
	if read.found {
		expected = read.meta.Version
	}
	written := k.record(read, ev)
	written.meta.Version = read.meta.Version + 1
	ok, err := e.docs().PutGuarded(ctx, t.p.Collection(), t.id, expected, written.meta, next)
	if err == nil && !ok {
		return errMoved
	}
	return err
}
