package projector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"

	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// Reasons the gate reads the document again; both are retried under the policy.
var (
	errNotVisible = errors.New("document not at the predecessor's revision yet")
	errMoved      = errors.New("document moved between read and write")
)

// errBehind: the document is not there, and an earlier event of it is in
// flight in this engine. The attempt queues behind that event, out of the
// document's lock, and reads again; it is not a wait of the retry policy.
var errBehind = errors.New("behind an earlier event of the document")

// gated is the kind of document the revision gate keeps: one per stream,
// holding the stream revision of the last event applied ([driver.Store]).
// Within one engine, events of one document queue in revision order.
type gated struct{}

func (gated) handle(ctx context.Context, e *Engine, t target, ev Event, undecodable error) Result {
	return e.gate(ctx, t, ev, undecodable)
}

func (gated) valid() error { return nil }

func (gated) prepare(context.Context, *Engine, string) error { return nil }

func (gated) within(ctx context.Context, _ *Engine, _ target, _ Event, attempt func(context.Context) (step, error)) (step, error) {
	return attempt(ctx)
}

func (gated) read(ctx context.Context, store driver.Store, collection, id string, state any) (bool, int64, error) {
	head, found, err := store.Load(ctx, collection, id, 0, state)
	if !found {
		return found, -1, err
	}
	return found, int64(head.Revision), err
}

// replayOnce applies parked event ev to the document as it is now. The gate
// moved the document past ev when it parked it, so ev is a duplicate to the
// gate; the revision stays, and the write is conditional on it.
func (gated) replayOnce(ctx context.Context, e *Engine, t target, ev Event, pe ParkedEvent, wrote *string) (bool, error) {
	state := t.p.newState()
	head, found, err := e.docs().Load(ctx, t.p.Collection(), t.id, 0, state)
	if err != nil {
		return false, err
	}
	if settled, done, err := replaySettled(t, ev, pe, head, found, *wrote); settled {
		return done, err
	}
	next, err := e.replayedState(ctx, t, ev, head, state)
	if err != nil {
		return false, err
	}
	head.Stream = ev.StreamID
	claimed, err := e.claimReplay(ctx, pe, &head, wrote)
	if err != nil {
		return false, err
	}
	matched, err := e.docs().Update(ctx, t.p.Collection(), t.id, head.Revision, head, next)
	switch {
	case err != nil:
		return false, err // it may have written: the claim stays
	case !matched && claimed != nil:
		// Moved meanwhile: nothing was written, and the claim goes, so that
		// a replay run again after this one gives up does not doubt it.
		if err := e.claimer().ReleaseReplay(ctx, pe, *claimed); err != nil {
			return false, err
		}
		return false, errMoved
	case !matched:
		return false, errMoved
	}
	return false, nil
}

// replayedState is the state of gated document t (read at head, with
// state) once parked event ev is replayed into it: folded anew from its
// stream ([Engine.refold]) where the engine can; else ev applied to it as
// it is, which is exact when ev is the last event the document has, or its
// steps commute.
func (e *Engine) replayedState(ctx context.Context, t target, ev Event, head driver.Head, state any) (any, error) {
	if e.refolds(t, head) {
		next, err := e.refold(ctx, t, ev.StreamID, head.Revision, ev)
		switch {
		case err == nil:
			return next, nil
		case errors.Is(err, ErrStreamDeleted):
		case !errors.Is(err, errNoRefold):
			return nil, err
		}
	}
	var from any = state
	switch {
	case t.p.creates(ev) && ev.StreamRevision == head.Revision:
		from = nil
	case t.p.startsDocument(ev) && !holdsNothing(t.p, state):
		return nil, retry.Permanent(recreatedSince(t))
	}
	next, err := t.p.applyTo(from, ev)
	if err != nil {
		return nil, retry.Permanent(err)
	}
	return next, nil
}

// holdsNothing reports whether state, a document of p as read, is the zero
// state: no event has changed it (those p passed over, parked or skipped
// moved it on without a change). A creation ([Create]) made anew over it
// throws nothing away.
func holdsNothing(p Definition, state any) bool {
	return state == nil || reflect.DeepEqual(state, p.newState())
}

// recreatedSince is why a parked event whose handler creates the document
// ([Create]) is not replayed into document t, which later events have
// changed since (it is not the zero state: their events applied, not only
// moved it on as parked or skipped): the state it makes would replace
// theirs.
func recreatedSince(t target) error {
	return fmt.Errorf("%w: document %q was made since by later events, whose changes a replay of its creation "+
		"would throw away: rebuild the projection to fold its events in order", ErrAlreadyCreated, t.id)
}

// replaySettled says, from the document as read (head; found: it exists),
// whether a replay of parked event ev into it is settled without a write
// (settled), and how: done, an earlier replay of it wrote it (cut short
// after its write); err, it cannot apply (a permanent error), or nil when
// this replay's earlier attempt wrote it (wrote: the token it gave the
// document) and its answer was lost.
func replaySettled(t target, ev Event, pe ParkedEvent, head driver.Head, found bool, wrote string) (settled, done bool, err error) {
	switch {
	case found && wrote != "" && head.Write == wrote:
		return true, false, nil // an earlier attempt's write took, and its answer was lost
	case found && wrote == "" && pe.Claim != nil && head.Write == pe.Claim.After:
		return true, true, nil // a replay cut short after its write
	case found && wrote == "" && pe.Claim != nil && head.Write != pe.Claim.Before:
		return true, false, retry.Permanent(ErrReplayUncertain) // written since by something else
	case !found:
		return true, false, retry.Permanent(fmt.Errorf("document %q is gone", t.id))
	case head.Stream != "" && head.Stream != ev.StreamID:
		return true, false, retry.Permanent(fmt.Errorf("%w: document %q is fed by stream %q, not %q", ErrOtherStream, t.id, head.Stream, ev.StreamID))
	case decide(ev.StreamRevision, false, found, head.Revision) != duplicate:
		// The gate does not count the event as applied: it has not moved
		// the document past it.
		return true, false, retry.Permanent(fmt.Errorf("document %q is at revision %d, before the parked event's %d", t.id, head.Revision, ev.StreamRevision))
	}
	return false, false, nil
}

// claimReplay gives head the write token of a replay of pe: one of its own
// when the parker keeps no claims or the document has none (claimed nil);
// else a token recorded first as pe's claim (claimed, and in *wrote), so
// that a replay cut short after its write is known by the token the write
// gives the document.
func (e *Engine) claimReplay(ctx context.Context, pe ParkedEvent, head *driver.Head, wrote *string) (claimed *ReplayClaim, err error) {
	c := e.claimer()
	if c == nil || head.Write == "" {
		head.Write = "" // a token of its own, not the one read
		return nil, nil
	}
	claim := ReplayClaim{Before: head.Write, After: newToken()}
	if err := c.ClaimReplay(ctx, pe, claim); err != nil {
		return nil, retry.Permanent(err)
	}
	head.Write, *wrote = claim.After, claim.After
	return &claim, nil
}

// newToken returns a write token no other write has: 96 random bits.
func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// gate applies ev to gated document t: the revision gate described in the
// package documentation, whose rule is [decide]. undecodable is the
// decoding error of ev's payload (only under [Skip]): the gate then moves
// the document past ev without applying it.
func (e *Engine) gate(ctx context.Context, t target, ev Event, undecodable error) Result {
	return e.gateHolding(ctx, t, ev, undecodable, e.holding(ctx, t))
}

// gateHolding is the gate, holding documents under [Hold] (hold) in the
// document's queue: in the order of their events.
func (e *Engine) gateHolding(ctx context.Context, t target, ev Event, undecodable error, hold bool) Result {
	tk := e.queue.enter(t.key(), ev.StreamRevision)
	var res Result
	e.traceQueued(ctx, tk)
	if err := e.queue.wait(ctx, e.stop, tk); err != nil {
		res = e.fail(t, ev, failure{err: err, wanted: -1, seen: -1})
	} else if hold {
		res = e.holdTurn(ctx, t, ev, func() Result { return e.gateTurn(ctx, tk, t, ev, undecodable) })
	} else {
		res = e.gateTurn(ctx, tk, t, ev, undecodable)
	}
	e.queue.leave(tk, res.Outcome != Failed, res.Err)
	return res
}

// gateTurn is the gate once ev's turn in its document's queue has come.
func (e *Engine) gateTurn(ctx context.Context, tk *ticket, t target, ev Event, undecodable error) Result {
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
	var refused error // the event is refused for good, and the policy moved on
	outcome, err := retry.DoValue(ctx, e.policyCounting(ctx, t, ev, &waits), func(ctx context.Context) (Outcome, error) {
		unlock := e.locks.lock(t.key())
		defer unlock()
		out, err := k.within(ctx, e, t, ev, func(ctx context.Context) (step, error) {
			return e.createOnce(ctx, k, t, ev, state, skipped, waits+1)
		})
		refused = out.skipped
		return out.outcome, err
	}, e.retryOptions()...)
	var again *recreated
	if errors.As(err, &again) {
		over, serr := e.startsOver(ctx, ev.StreamID, again.rev)
		switch {
		case serr != nil:
			return e.fail(t, ev, failure{err: serr, wanted: -1, seen: int64(again.rev), attempts: waits + 1})
		case over:
			return e.restart(ctx, t, ev, again.rev, state, skipped, waits)
		}
		return e.advance(ctx, tk, t, ev, func(state any) (any, error) {
			if holdsNothing(t.p, state) {
				// Only events the projection passed over (dropped, of a
				// type it does not handle) made the document: the creation
				// applies, as in the fold.
				return apply(state)
			}
			return nil, fmt.Errorf("%w at revision %d%s", ErrAlreadyCreated, again.rev, createHint)
		})
	}
	if refusal := e.refusedStep(t, err); refusal != nil {
		return e.onceRefused().create(ctx, tk, t, ev, failing(refusal))
	}
	if err != nil {
		r := e.fail(t, ev, failure{err: err, wanted: -1, seen: -1, attempts: waits + 1})
		r.Waits = waits
		return r
	}
	if refused != nil {
		skipped = refused
	}
	return e.result(t, ev, outcome, waits, skipped)
}

// restart starts document t over at creation event ev: it is at revision
// rev, of events its stream no longer holds (the stream was deleted, or
// truncated past them, and written again), so ev is not a second creation.
// The document is replaced by state (ev's), conditional on rev.
func (e *Engine) restart(ctx context.Context, t target, ev Event, rev uint64, state any, skipped error, waits int) Result {
	to := e.keeperOf(t.p).record(stored{}, ev)
	unlock := e.locks.lock(t.key())
	matched, err := e.docs().Update(ctx, t.p.Collection(), t.id, rev, driver.Head{Revision: to.rev, Stream: to.stream}, state)
	unlock()
	switch {
	case err == nil && !matched:
		err = errMoved
	case err == nil:
		e.logger.Info("document starts over: its stream was deleted (or truncated) and written again", "projection", t.p.Name(),
			"document", t.id, "stream", ev.StreamID, "from", rev, "revision", ev.StreamRevision)
		return e.result(t, ev, Applied, waits, skipped)
	}
	r := e.fail(t, ev, failure{err: err, wanted: -1, seen: int64(rev), attempts: waits + 1})
	r.Waits = waits
	return r
}

// recreated: a creation event found its document created already, at an
// earlier revision.
type recreated struct{ rev uint64 }

func (r *recreated) Error() string {
	return fmt.Sprintf("%v at revision %d%s", ErrAlreadyCreated, r.rev, createHint)
}

// createHint follows the error of a second creation: what Create means,
// and the way out when the event comes again in a stream's life.
const createHint = ": this event's handler is registered with Create, which starts a document anew, once a stream " +
	"(register it with On to apply it to the document as it is: a document starts with its stream's first event under On too)"

// createOnce is one attempt of create. When the insert finds the document,
// the strategy's check on it decides: a duplicate, a second creation
// ([recreated]), or an event of another stream (refused, per the policy).
func (e *Engine) createOnce(ctx context.Context, k keeper, t target, ev Event, state any, skipped error, attempts int) (step, error) {
	if skipped != nil {
		if err := e.park(ctx, t, ev, skipped, attempts); err != nil {
			return step{}, err
		}
	}
	to := k.record(stored{}, ev)
	err := e.docs().Insert(ctx, t.p.Collection(), t.id, driver.Head{Revision: to.rev, Stream: to.stream}, state)
	if !errors.Is(err, driver.ErrDuplicate) {
		return step{outcome: Applied}, err
	}
	head, found, err := e.docs().Load(ctx, t.p.Collection(), t.id, 0, nil)
	if err != nil {
		return step{}, err
	}
	v, why := k.check(stored{found: found, rev: head.Revision, stream: head.Stream}, ev, true)
	switch {
	case why != nil:
		return e.refused(ctx, t, ev, why, attempts)
	case v == create: // deleted since: insert again
		return step{}, errMoved
	case v == refuse:
		return step{}, retry.Permanent(&recreated{rev: head.Revision})
	}
	return step{outcome: Duplicate}, nil
}

// refused is what becomes of an event its strategy refuses for good (an
// event of another stream; under HandledIDs, one older than the window): it
// fails under the block policy; under skip and park it is reported (and
// parked), the document left as it is.
func (e *Engine) refused(ctx context.Context, t target, ev Event, why error, attempts int) (step, error) {
	if !e.movesPast(t.p) {
		return step{}, retry.Permanent(why)
	}
	if err := e.park(ctx, t, ev, why, attempts); err != nil {
		return step{}, err
	}
	return step{outcome: Applied, skipped: why}, nil
}

// advance moves the document from revision n-1 to n.
func (e *Engine) advance(ctx context.Context, tk *ticket, t target, ev Event, apply applyStep) Result {
	waits, attempts := 0, 0
	seen := int64(-1)
	var skipped error
	var queued error // an earlier event of the document, in flight here, failed
	k := e.keeperOf(t.p)
	outcome, err := retry.DoValue(ctx, e.policyCounting(ctx, t, ev, &waits), func(ctx context.Context) (Outcome, error) {
		attempts++
		for {
			rev := int64(-1)
			unlock := e.locks.lock(t.key())
			out, err := k.within(ctx, e, t, ev, func(ctx context.Context) (step, error) {
				var out step
				var err error
				out, rev, err = e.advanceOnce(ctx, k, tk, t, ev, apply, attempts)
				return out, err
			})
			unlock()
			if errors.Is(err, errBehind) {
				// An earlier event of this document arrived here while this
				// one waited: queue behind it rather than poll, then read
				// again.
				if queued = e.queue.wait(ctx, e.stop, tk); queued != nil {
					return 0, retry.Permanent(queued)
				}
				continue
			}
			if err == nil || rev >= 0 {
				seen = rev
			}
			skipped = out.skipped
			return out.outcome, err
		}
	}, e.retryOptions()...)
	if err == nil {
		return e.result(t, ev, outcome, waits, skipped)
	}
	if refused := e.refusedStep(t, err); refused != nil && queued == nil {
		return e.onceRefused().advance(ctx, tk, t, ev, failing(refused))
	}
	f := failure{err: err, wanted: int64(ev.StreamRevision) - 1, seen: seen, attempts: attempts}
	switch {
	case queued != nil:
		f.err, f.wanted = queued, -1
	case retry.IsPermanent(err):
		f.wanted = -1 // it did not wait: the event itself is at fault
	case ctx.Err() != nil, errors.Is(err, retry.ErrStopped):
		// Stopped from outside; err says so.
	case errors.Is(err, errNotVisible) || errors.Is(err, errMoved):
		now, found, ok := e.headNow(ctx, t)
		if found && now.Stream != "" && now.Stream != ev.StreamID {
			// It waited for a predecessor that is not coming: the document
			// is fed by another stream.
			return e.otherStream(ctx, t, ev, k, now, waits, attempts)
		}
		f.err = fmt.Errorf("%w: %w", ErrPredecessorMissing, err)
		switch {
		case !ok:
			f.seen = seen // what was seen before the read failed
		case !found:
			f.seen = -1
		default:
			f.seen = int64(now.Revision)
		}
	}
	r := e.fail(t, ev, f)
	r.Waits = waits
	return r
}

// otherStream is the result of an event that waited for a predecessor in a
// document fed by another stream: refused for good, per the policy.
func (e *Engine) otherStream(ctx context.Context, t target, ev Event, k keeper, now driver.Head, waits, attempts int) Result {
	_, why := k.check(stored{found: true, rev: now.Revision, stream: now.Stream}, ev, false)
	out, err := e.refused(ctx, t, ev, why, attempts)
	if err != nil {
		r := e.fail(t, ev, failure{err: err, wanted: -1, seen: int64(now.Revision), attempts: attempts})
		r.Waits = waits
		return r
	}
	return e.result(t, ev, out.outcome, waits, out.skipped)
}

// advanceOnce is one read-decide-write of advance, under the document's
// lock; rev is the revision it read (-1: none). It returns errBehind,
// having written nothing, when the document is not there and an earlier
// event of it is in flight.
func (e *Engine) advanceOnce(ctx context.Context, k keeper, tk *ticket, t target, ev Event, apply applyStep, attempts int) (step, int64, error) {
	n := ev.StreamRevision
	state := t.p.newState()
	head, found, err := e.docs().Load(ctx, t.p.Collection(), t.id, n-1, state)
	if err == nil && !found && e.queue.predecessor(tk) != nil {
		return step{}, -1, errBehind
	}
	if err != nil {
		return step{}, -1, err
	}
	read := stored{found: found, rev: head.Revision, stream: head.Stream}
	v, why := k.check(read, ev, false)
	switch {
	case why != nil:
		out, err := e.refused(ctx, t, ev, why, attempts)
		return out, int64(head.Revision), err
	case v == wait:
		return e.firstWait(ctx, k, t, ev, apply, attempts)
	case v == duplicate:
		return step{outcome: Duplicate}, int64(head.Revision), nil
	}
	rev := int64(head.Revision)
	next, skipped, err := e.step(t.p, state, apply)
	if err != nil {
		return step{}, rev, err
	}
	if skipped != nil {
		if next, err = e.passOver(ctx, t, ev, head.Revision, skipped, attempts); err != nil {
			return step{}, rev, err
		}
	}
	if err := e.putGated(ctx, t, read, k.record(read, ev), next); err != nil {
		return step{}, rev, err
	}
	return step{outcome: Applied, skipped: skipped}, rev, nil
}

// firstWait is advanceOnce's answer for an event whose predecessor the
// document has not reached: errNotVisible, to wait for it, unless, on the
// first wait, the event store's streams have the events between (folded
// from there: fillGap) or say they are gone (passHole).
func (e *Engine) firstWait(ctx context.Context, k keeper, t target, ev Event, apply applyStep, attempts int) (step, int64, error) {
	if attempts != 1 {
		return step{}, -1, errNotVisible
	}
	if e.fillsGaps(t.p) {
		if out, rev, filled, err := e.fillGap(ctx, k, t, ev, apply); filled || err != nil {
			return out, rev, err
		}
	}
	if e.streamReader() != nil {
		// Late, or gone from the stream?
		if out, rev, passed, err := e.passHole(ctx, k, t, ev, apply, attempts); passed || err != nil {
			return out, rev, err
		}
	}
	return step{}, -1, errNotVisible
}

// passOver is the state of document t, at revision rev, to move past ev
// whose step failed (skipped says why) under a policy that moves past it:
// the document as it is stored (the projection may have changed the state
// in place before it failed), read again; ev is parked first.
func (e *Engine) passOver(ctx context.Context, t target, ev Event, rev uint64, skipped error, attempts int) (any, error) {
	fresh := t.p.newState()
	if now, found, err := e.docs().Load(ctx, t.p.Collection(), t.id, rev, fresh); err != nil {
		return nil, err
	} else if !found || now.Revision != rev {
		return nil, errMoved
	}
	if err := e.park(ctx, t, ev, skipped, attempts); err != nil {
		return nil, err
	}
	return fresh, nil
}

// passHole handles an event whose predecessor its document has not reached
// when the event store says the revisions between them are gone (see
// [StreamReader]): passed is false when they are not (the predecessor is
// late: wait for it). A document that is gone with its deleted stream stays
// gone (the event is history of it: a duplicate). Otherwise, under [Block]
// the event fails for good, naming the revisions; under [Skip], [Park] and
// [Hold] it applies on the document as it is (the zero state if there is
// none), and under [Park] and [Hold] the hole is recorded first.
func (e *Engine) passHole(ctx context.Context, k keeper, t target, ev Event, apply applyStep, attempts int) (out step, rev int64, passed bool, err error) {
	state := t.p.newState()
	head, found, err := e.docs().Load(ctx, t.p.Collection(), t.id, 0, state)
	switch {
	case err != nil:
		return step{}, -1, false, err
	case found && head.Revision+1 >= ev.StreamRevision:
		return step{}, int64(head.Revision), true, errMoved // it moved: decide again
	case found && head.Stream != "" && head.Stream != ev.StreamID:
		return step{}, -1, false, nil // another stream's document: refused once the wait runs out
	}
	h, err := e.holeBefore(ctx, t, ev, found, head.Revision)
	switch {
	case err != nil:
		return step{}, -1, true, err
	case !h.gone:
		return step{}, -1, false, nil
	case !found && h.deleted:
		return step{outcome: Duplicate}, -1, true, nil
	}
	rev = -1
	if found {
		rev = int64(head.Revision)
	}
	gone := h.err(t, ev.StreamID, ev.StreamRevision)
	if h.stray {
		out, err := e.refuseStray(ctx, t, ev, gone, attempts)
		return out, rev, true, err
	}
	if !h.notOurs && !e.movesPastHole(t.p) {
		return step{}, rev, true, retry.Permanent(gone)
	}
	if held, err := e.holdAtHole(ctx, t, ev, h); held || err != nil {
		return step{}, rev, true, err
	}
	read := stored{found: found, rev: head.Revision, stream: head.Stream}
	out, err = e.stepOverHole(ctx, k, t, ev, apply, attempts, h, gone, read, state)
	return out, rev, true, err
}

// stepOverHole applies ev to document t as read (state its state, when
// found), moving it past hole h: a step of ev that fails is parked under
// the policy, and the hole is recorded (gone says why) before the write.
func (e *Engine) stepOverHole(ctx context.Context, k keeper, t target, ev Event, apply applyStep, attempts int, h hole, gone error, read stored, state any) (step, error) {
	var from any
	if read.found {
		from = state
	}
	next, skipped, err := e.step(t.p, from, apply)
	if err != nil {
		return step{}, err
	}
	switch {
	case skipped != nil && read.found:
		// The event failed too, and the policy moves past it, with the
		// state as stored: the step may have changed the one read in place.
		if next, err = e.passOver(ctx, t, ev, read.rev, skipped, attempts); err != nil {
			return step{}, err
		}
	case skipped != nil:
		next = t.p.newState()
		if err := e.park(ctx, t, ev, skipped, attempts); err != nil {
			return step{}, err
		}
	}
	if err := e.parkHole(ctx, t, ev, h, gone); err != nil {
		return step{}, err
	}
	if err := e.putGated(ctx, t, read, k.record(read, ev), next); err != nil {
		return step{}, err
	}
	return step{outcome: Applied, skipped: skipped}, nil
}

// putGated writes document t with state next at head to: inserted when read
// found none, else updated from the revision read; errMoved when another
// write came first.
func (e *Engine) putGated(ctx context.Context, t target, read, to stored, next any) error {
	head := driver.Head{Revision: to.rev, Stream: to.stream}
	if !read.found {
		err := e.docs().Insert(ctx, t.p.Collection(), t.id, head, next)
		if errors.Is(err, driver.ErrDuplicate) {
			return errMoved
		}
		return err
	}
	matched, err := e.docs().Update(ctx, t.p.Collection(), t.id, read.rev, head, next)
	if err == nil && !matched {
		return errMoved
	}
	return err
}

// headNow reads the document's head, for the error of an event that gave up
// waiting; ok is false when it could not be read.
func (e *Engine) headNow(ctx context.Context, t target) (head driver.Head, found, ok bool) {
	if ctx.Err() != nil {
		return driver.Head{}, false, false
	}
	head, found, err := e.docs().Load(ctx, t.p.Collection(), t.id, 0, nil)
	return head, found, err == nil
}

// errNotFilled ends a gap's read (see [Engine.fillGap]) at an event it
// cannot fold.
var errNotFilled = errors.New("the gap cannot be filled from the stream")

// fillGap applies to document t the events of ev's stream between its
// revision and ev, read from the event store, then ev, and writes it once
// at ev's revision (filled); rev is the revision it read (-1: none). An
// event delivered before its predecessors (to a persistent group's
// consumers, or again) then does not wait for them, and they are counted
// as applied when they come (see [known]). It fills nothing, and the event
// waits as before, where the stream does not give those events one by one
// (gone, truncated, deleted), where one does not decode, routes elsewhere or
// fails its step, where ev's own step fails, and where the read fails: their
// delivery then goes through the gate and the failure policy as usual.
func (e *Engine) fillGap(ctx context.Context, k keeper, t target, ev Event, apply applyStep) (out step, rev int64, filled bool, err error) {
	state := t.p.newState()
	head, found, err := e.docs().Load(ctx, t.p.Collection(), t.id, 0, state)
	switch {
	case err != nil:
		return step{}, -1, false, err
	case found && head.Revision+1 >= ev.StreamRevision:
		return step{}, int64(head.Revision), false, errMoved // it moved: decide again
	case found && head.Stream != "" && head.Stream != ev.StreamID:
		return step{}, int64(head.Revision), false, nil
	}
	from, rev := uint64(0), int64(-1)
	var cur any
	if found {
		from, rev, cur = head.Revision+1, int64(head.Revision), state
	}
	read := stored{found: found, rev: head.Revision, stream: head.Stream}
	out, filled, err = e.fillFrom(ctx, t, ev, from, cur, apply, func(next any) error {
		return e.putGated(ctx, t, read, k.record(read, ev), next)
	})
	return out, rev, filled, err
}

// fillFrom is the fill of ev's gap from revision from on cur (nil: no
// document), under the gate or a revision map: the events between, read
// from the event store (foldGap), then ev's step (apply), and put, the
// write of the result (filled once it is written). It fills nothing where
// the events between cannot be folded, where ev's step fails, or where the
// store cannot keep the state ([driver.ErrUnencodable]: a state the store
// cannot keep may be an event's between, and each comes through the gate,
// which names the one); put's other errors are returned.
func (e *Engine) fillFrom(ctx context.Context, t target, ev Event, from uint64, cur any, apply applyStep, put func(next any) error) (step, bool, error) {
	cur, ok := e.foldGap(ctx, t, ev, from, cur)
	if !ok {
		return step{}, false, nil
	}
	next, err := apply(cur)
	if err != nil {
		return step{}, false, nil
	}
	if err := put(next); err != nil {
		if errors.Is(err, driver.ErrUnencodable) {
			err = nil
		}
		return step{}, false, err
	}
	// Noted once written, still under the document's lock, which every
	// delivery through the gate takes: a predecessor that comes meanwhile
	// is found a duplicate and counted then (countAhead).
	e.known.filled(e.aheadKey(t.p, t.id, ev.StreamID), from, ev.StreamRevision)
	return step{outcome: Applied}, true, nil
}

// foldGap folds on cur (nil: no document) the events of ev's stream from
// revision from up to ev, read from the event store: ok when each came, in
// order, and would simply apply (see [Engine.fillGap]).
func (e *Engine) foldGap(ctx context.Context, t target, ev Event, from uint64, cur any) (any, bool) {
	want := from
	err := e.readStream(ctx, ev.StreamID, from, func(g Event) error {
		if g.StreamRevision >= ev.StreamRevision {
			return ErrStopRead
		}
		if g.StreamRevision != want {
			return errNotFilled
		}
		decoded, err := e.registry.Decode(g)
		if err != nil {
			return errNotFilled
		}
		if to, ok, err := e.route(ctx, t.p, decoded); err != nil || !ok || to != t.id {
			return errNotFilled
		}
		if g.StreamRevision > 0 && t.p.startsDocument(decoded) && !holdsNothing(t.p, cur) {
			// A second creation, which the gate refuses (or starts the
			// document over at, after a deletion): its delivery decides.
			return errNotFilled
		}
		next, err := t.p.applyTo(cur, decoded)
		if err != nil {
			return errNotFilled
		}
		cur, want = next, want+1
		return nil
	})
	return cur, err == nil && want == ev.StreamRevision
}
