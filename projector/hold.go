package projector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// Holder is a [Parker] that also says which documents the [Hold] policy
// holds: those with held events ([ParkedEvent.Held]) not replayed yet.
// mongostore.Store is one.
type Holder interface {
	Parker
	// Held returns the documents of projection's build collection that
	// hold events, with how many each holds.
	Held(ctx context.Context, projection, collection string) (map[string]int, error)
	// Holds returns how many events document holds in projection's build
	// collection.
	Holds(ctx context.Context, projection, collection, document string) (int, error)
}

// ErrHeld: the event was not applied because an earlier event of its
// document failed and holds the document ([Hold]).
var ErrHeld = errors.New("the document is held behind an earlier event that failed")

func (e *Engine) holder() Holder { h, _ := e.parker.(Holder); return h }

// movesPast reports whether p's failure policy moves a document past an
// event that fails for good ([Skip], [Park]); under [Block] and [Hold] the
// document stays before it.
func (e *Engine) movesPast(p Definition) bool {
	pol := e.policyOf(p)
	return pol == Skip || pol == Park
}

// movesPastHole reports whether p's failure policy moves a document past
// events gone from the event store ([ErrRevisionsGone]): [Skip], [Park],
// and [Hold], for which holding the document would be for ever (no fix
// brings the events back, and a replay meets the same hole) and which
// records the hole as [Park] does. Under [Block] the event fails for good.
func (e *Engine) movesPastHole(p Definition) bool {
	return e.movesPast(p) || e.policyOf(p) == Hold
}

// holdable refuses the hold policy for a projection whose documents do not
// say which events they have applied: a held document's events must be
// known as applied or not when they come again, and replayed in order.
func holdable(p Definition, pol FailurePolicy) error {
	if pol != Hold {
		return nil
	}
	switch keeperOf(p).(type) {
	case streamRevision, revisionMap:
		return nil
	}
	return fmt.Errorf("projector: projection %q: the hold policy needs the StreamRevision or RevisionMap strategy (a document that knows, per stream, which events it has applied), not %v",
		p.Name(), keeperOf(p))
}

// holds is which documents the engine knows to be held: read from the
// [Holder] for a projection the first time one of its events is handled,
// and added to as documents are held. The [Holder]'s records are the truth:
// a document found here is looked up there again before an event is held
// behind it (a replay elsewhere may have freed it).
type holds struct {
	mu     sync.Mutex
	loaded map[string]bool
	docs   map[docKey]bool
}

func newHolds() *holds { return &holds{loaded: map[string]bool{}, docs: map[docKey]bool{}} }

// HoldPreparer is a [Holder] with something to set up before the hold
// policy runs (mongostore.Store: the index of its lookups of a held
// document, and of a document's parked events, which a replay makes).
// [Engine.Prepare] calls it when a projection holds or parks.
type HoldPreparer interface {
	PrepareHolds(ctx context.Context) error
}

// maybeHeld reports whether document t may be held, reading the projection's
// held documents the first time.
func (e *Engine) maybeHeld(ctx context.Context, t target) (bool, error) {
	h := e.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded[t.p.Name()] {
		docs, err := e.holder().Held(ctx, t.p.Name(), t.p.Collection())
		if err != nil {
			return false, fmt.Errorf("reading the held documents: %w", err)
		}
		for id := range docs {
			h.docs[docKey{t.p.Collection(), id}] = true
		}
		h.loaded[t.p.Name()] = true
	}
	return h.docs[t.key()], nil
}

// isHeld reports whether document t holds events, from the [Holder]; a
// document it no longer holds is forgotten.
func (e *Engine) isHeld(ctx context.Context, t target) (bool, error) {
	maybe, err := e.maybeHeld(ctx, t)
	if err != nil || !maybe {
		return false, err
	}
	n, err := e.holder().Holds(ctx, t.p.Name(), t.p.Collection(), t.id)
	if err != nil {
		return false, fmt.Errorf("reading the held document: %w", err)
	}
	if n > 0 {
		return true, nil
	}
	e.holds.mu.Lock()
	delete(e.holds.docs, t.key())
	e.holds.mu.Unlock()
	return false, nil
}

// handleOne applies ev to document t with t's strategy; under [Hold], an
// event of a held document is held behind, and one that fails for good
// holds its document (see holding for the other policies).
func (e *Engine) handleOne(ctx context.Context, t target, ev Event, undecodable error) Result {
	if r, ok := e.knownResult(t, ev); ok {
		return r
	}
	k := e.keeperOf(t.p)
	if !e.holding(ctx, t) {
		return k.handle(ctx, e, t, ev, undecodable)
	}
	if _, gated := k.(streamRevision); gated {
		return k.handle(ctx, e, t, ev, undecodable) // the gate holds, in its queue
	}
	return e.holdTurn(ctx, t, ev, func() Result { return k.handle(ctx, e, t, ev, undecodable) })
}

// holding reports whether the events of document t go through the hold
// checks (holdTurn): under [Hold]; and under any other policy while t may
// hold events recorded under Hold before (the policy changed with held
// records outstanding): its later events are held behind them until
// replay-parked applies them, as under Hold, instead of each waiting for
// a predecessor that is held, which stopped the whole projection. Only
// the document held waits; the others go on. A failed look at the held
// documents counts as none under another policy than Hold.
func (e *Engine) holding(ctx context.Context, t target) bool {
	if e.policyOf(t.p) == Hold {
		return true
	}
	if e.holder() == nil {
		return false
	}
	maybe, err := e.maybeHeld(ctx, t)
	return err == nil && maybe
}

// holdTurn is the gate's turn under [Hold]: an event of a held document is
// held behind (or a duplicate); one that fails for good holds its document,
// under Hold (under another policy, its own policy has it). It runs in the
// document's queue, so the events of one document are held in their order.
func (e *Engine) holdTurn(ctx context.Context, t target, ev Event, turn func() Result) Result {
	held, err := e.isHeld(ctx, t)
	if err != nil {
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: -1})
	}
	if held {
		return e.holdBehind(ctx, t, ev)
	}
	if e.policyOf(t.p) != Hold {
		return turn()
	}
	return e.holdFailed(ctx, t, ev, turn())
}

// holdFailed holds document t at ev when r, ev's result, is a permanent
// failure (or a wait that found the document held meanwhile). A transient
// failure (a store that does not answer, a predecessor that does not come)
// is not held: it stops the catch-up as under [Block].
func (e *Engine) holdFailed(ctx context.Context, t target, ev Event, r Result) Result {
	var fe *Error
	if r.Outcome != Failed || ctx.Err() != nil || errors.Is(r.Err, retry.ErrStopped) || !errors.As(r.Err, &fe) {
		return r
	}
	if errors.Is(r.Err, ErrHeld) {
		return e.holdBehind(ctx, t, ev)
	}
	if fe.Retryable() {
		return r
	}
	rec := parkedOf(t, ev, fe.Err, max(fe.Attempts, 1))
	rec.Held = true
	if _, err := e.parker.Park(ctx, rec); err != nil {
		return e.fail(t, ev, failure{err: fmt.Errorf("holding the document: %w", err), wanted: -1, seen: -1})
	}
	e.markHeld(t)
	e.logger.Warn("document held: its later events are recorded behind this one until replay-parked applies them",
		"projection", t.p.Name(), "document", t.id, "stream", ev.StreamID, "revision", ev.StreamRevision)
	r.Outcome = Held
	return r
}

// holdAtHole holds document t, under [Hold], at the first event of hole h
// that could not be routed when it came (parked then with no document): t,
// fed by its stream, needs it, and a fix can route it, so that t waits
// before it as before any event that fails, instead of moving past it. The
// record names t now, held; the event t is at fails with [ErrHeld], which
// holds it behind (see holdFailed). held is false when there is no such
// event, or the policy is another.
func (e *Engine) holdAtHole(ctx context.Context, t target, ev Event, h hole) (held bool, err error) {
	if e.policyOf(t.p) != Hold {
		return false, nil
	}
	// Held at the first, and every later one of the hole held behind it,
	// in their order, as ReplayHeld applies them.
	var first *routedAway
	for _, a := range h.away {
		if !a.unroutable() {
			continue
		}
		rec := parkedOf(t, a.ev, a.err, 1)
		rec.Held = true
		if _, err := e.parker.Park(ctx, rec); err != nil {
			return false, fmt.Errorf("holding the document: %w", err)
		}
		if first == nil {
			first = &a
		}
	}
	if first == nil {
		return false, nil
	}
	e.markHeld(t)
	a := *first
	e.logger.Warn("document held at an event of its stream that could not be routed: its later events are recorded behind it until replay-parked applies them",
		"projection", t.p.Name(), "document", t.id, "stream", a.ev.StreamID, "revision", a.ev.StreamRevision, "err", a.err)
	return true, retry.Permanent(fmt.Errorf("%w: revision %d of stream %q, which could not be routed: %w", ErrHeld, a.ev.StreamRevision, a.ev.StreamID, a.err))
}

// holdUnroutable holds document t, under [Hold], at ev, which cannot be
// routed (cause) while the earlier events of its stream feed t: the
// stream's next event would hold t at it ([Engine.holdAtHole]), but there
// may be none, and t's events of other streams must wait behind it now.
// Delivered again to a document already past it (parked or skipped under
// another policy before a restart), it holds nothing: its record, if any,
// is replayed as it is.
func (e *Engine) holdUnroutable(ctx context.Context, t target, ev Event, cause error) Result {
	read, err := e.readApplied(ctx, t)
	if err != nil {
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: -1, attempts: 1})
	}
	r := e.recordHeld(ctx, t, ev, read, cause, 1)
	if r.Outcome == Held {
		e.markHeld(t)
		e.logger.Warn("document held at an event of its stream that could not be routed: its later events are recorded behind it until replay-parked applies them",
			"projection", t.p.Name(), "document", t.id, "stream", ev.StreamID, "revision", ev.StreamRevision)
	}
	return r
}

// markHeld notes that document t is held.
func (e *Engine) markHeld(t target) {
	e.holds.mu.Lock()
	e.holds.docs[t.key()] = true
	e.holds.mu.Unlock()
}

// holdBehind records ev behind the event that holds document t, unless the
// document has ev's effect already (a duplicate).
func (e *Engine) holdBehind(ctx context.Context, t target, ev Event) Result {
	read, err := e.readApplied(ctx, t)
	if err != nil {
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: -1})
	}
	return e.holdUnlessApplied(ctx, t, ev, read)
}

// holdAllBehind is holdBehind for evs, events of document t in order, when
// t is held and fed by many streams (a [RevisionMap] summary, whose held
// document meets every later event of all its streams): one look at the
// holds and one read of the document for all of them, which nothing
// changes while it is held, instead of both for each. ok is false when t
// is not held, or kept otherwise (the gate holds in its queue), and nothing
// was done. A failure to record one fails it, and leaves the rest alone.
func (e *Engine) holdAllBehind(ctx context.Context, t target, evs []Event) (results []Result, ok bool) {
	if _, guarded := e.keeperOf(t.p).(revisionMap); !guarded || !e.holding(ctx, t) {
		return nil, false
	}
	if held, err := e.isHeld(ctx, t); err != nil || !held {
		return nil, false // a failed look: each event looks again, and fails
	}
	read, err := e.readApplied(ctx, t)
	if err != nil {
		return nil, false
	}
	for i, ev := range evs {
		r := e.holdUnlessApplied(ctx, t, ev, read)
		results = append(results, r)
		if r.Outcome == Failed {
			for range evs[i+1:] {
				results = append(results, Result{Projection: t.p.Name(), Document: t.id, Outcome: Failed, Err: ErrNotHandled})
			}
			break
		}
	}
	return results, true
}

// holdUnlessApplied records ev behind the event that holds document t, as
// read, unless the document has ev's effect already, by its strategy's
// check (a duplicate), or ev is recorded already (delivered again: held
// once, a duplicate too).
func (e *Engine) holdUnlessApplied(ctx context.Context, t target, ev Event, read stored) Result {
	cause := ErrHeld
	if !e.registry.known(ev) && !strings.HasPrefix(ev.Type, "$") {
		// Of a type this build does not register: delivered now, with
		// the document not held, it would be passed over (or fail, under
		// FailUnknownTypes). A replay by a build that does not register
		// it either does the same (decodeParked).
		cause = fmt.Errorf("%w%s", ErrHeld, heldUnknown)
	}
	return e.recordHeld(ctx, t, ev, read, cause, 0)
}

// heldUnknown is what the record of an event held behind another says when
// the build that held it did not register its type (holdUnlessApplied).
const heldUnknown = " (its type was not registered by the build that held it)"

// recordHeld records ev as held in document t, as read, for cause, unless
// the document has ev's effect already (a duplicate) or ev is recorded
// already (delivered again: held once, a duplicate too).
func (e *Engine) recordHeld(ctx context.Context, t target, ev Event, read stored, cause error, attempts int) Result {
	if v, _ := e.keeperOf(t.p).check(read, ev, t.p.creates(ev)); v == duplicate {
		return Result{Projection: t.p.Name(), Document: t.id, Outcome: Duplicate}
	}
	rec := parkedOf(t, ev, cause, attempts)
	rec.Held = true
	recorded, err := e.parker.Park(ctx, rec)
	switch {
	case err != nil:
		return e.fail(t, ev, failure{err: fmt.Errorf("holding the event: %w", err), wanted: -1, seen: -1, attempts: attempts})
	case !recorded:
		return Result{Projection: t.p.Name(), Document: t.id, Outcome: Duplicate}
	}
	return e.report(t, ev, permanent(cause), Held)
}

// readApplied reads what document t says of the events it has applied, as
// its strategy keeps it: the meta alone (a summary's state can be large,
// and a held one is read for the events held behind it).
func (e *Engine) readApplied(ctx context.Context, t target) (stored, error) {
	if _, gated := e.keeperOf(t.p).(streamRevision); gated {
		head, found, err := e.docs().Load(ctx, t.p.Collection(), t.id, 0, nil)
		return stored{found: found, rev: head.Revision, stream: head.Stream}, err
	}
	meta, found, err := e.docs().LoadGuarded(ctx, t.p.Collection(), t.id, nil)
	return stored{found: found, meta: meta}, err
}

// parkedOf is the record of ev failing in document t.
func parkedOf(t target, ev Event, cause error, attempts int) ParkedEvent {
	ev.Payload = nil
	return ParkedEvent{
		Event: ev, Projection: t.p.Name(), Document: t.id,
		Error: cause.Error(), Attempts: attempts, ParkedAt: time.Now().UTC(), Collection: t.p.Collection(),
	}
}

// heldPrefix returns the held events of document doc of p, from the first,
// decoded, up to the first that cannot go through the gate as it is (of
// another document, or one heldEvent refuses): those go one at a time, and
// fail there.
func (e *Engine) heldPrefix(ctx context.Context, p Definition, held []ParkedEvent, doc string) []Event {
	var evs []Event
	for _, pe := range held {
		if pe.Document != doc {
			break
		}
		ev, err := e.heldEvent(ctx, p, pe)
		if err != nil {
			break
		}
		evs = append(evs, ev)
	}
	return evs
}

// heldEvent is held event pe of p decoded for its replay, or why it cannot
// go through the gate: it was held in another build's collection, its
// payload does not decode, or p's router now sends it to another document
// or declines it where a rebuild would refuse it (routedElsewhere).
func (e *Engine) heldEvent(ctx context.Context, p Definition, pe ParkedEvent) (Event, error) {
	if pe.Collection != "" && pe.Collection != p.Collection() {
		return pe.Event, fmt.Errorf("%w: collection %s, not %s", ErrOtherBuild, pe.Collection, p.Collection())
	}
	ev, err := e.decodeParked(pe)
	if err == nil {
		err = e.routedElsewhere(ctx, p, ev, pe.Document)
	}
	return ev, err
}

// replayHeldFolded applies held events evs (decoded, in order) to
// versioned document id of p (fed by several streams: RevisionMap,
// HandledIDs, GlobalPosition) with one read and one write, folded as the
// batch path folds a document's events (foldVersioned), instead of a read
// and a write of the whole document each: a summary held behind a
// thousand events took minutes. It returns how many of evs, from the
// first, it applied (or found applied already); the events from the first
// that the strategy would not simply apply (a predecessor missing), or
// whose step fails, go through the gate one at a time, and so do all of
// them when the document moved meanwhile or the store did not answer.
func (e *Engine) replayHeldFolded(ctx context.Context, p Definition, id string, evs []Event) int {
	if len(evs) < 2 {
		return 0
	}
	defer e.locks.lock(docKey{p.Collection(), id})()
	k := e.keeperOf(p)
	firstOf := func(ev Event, revs map[string]uint64) bool { return e.firstOfStream(p, ev, revs) }
	idx := make([]int, len(evs))
	for i := range idx {
		idx[i] = i
	}
	limit := -1
	for range 2 {
		state := p.newState()
		meta, found, err := e.docs().LoadGuarded(ctx, p.Collection(), id, state)
		if err != nil {
			return 0
		}
		cur := driver.Guarded{Meta: meta, State: state}
		put, results, _, failed, _ := foldVersioned(k, p, id, evs, idx, cur, found, firstOf, limit, false)
		if failed >= 0 {
			// Its handlers may have changed the state read in place: read
			// again, and fold up to the step that fails.
			limit = failed
			continue
		}
		if put != nil {
			if written, err := e.docs().PutGuarded(ctx, p.Collection(), id, put.Expected, put.Meta, put.State); err != nil || !written {
				return 0
			}
		}
		return len(results)
	}
	return 0
}

// HeldReplay is what [Engine.ReplayHeld] did to one held document.
type HeldReplay struct {
	Document string
	// Applied are the held events now applied (or found applied already),
	// in order; Left the first that still fails and those behind it.
	Applied, Left []ParkedEvent
	// Err is why Left[0] still fails.
	Err error
}

// ReplayHeld applies the held events of one document of projection name
// (records of [Hold], as the [Holder] lists them), once the projection is
// fixed: in the order of their stream revisions (of their positions for a
// document fed by several streams), each through the gate as if delivered
// now. An event the document has already (a replay that was cut short, a
// rebuild since) is a duplicate and counts as applied: nothing is applied
// twice. It stops at the first event that still fails: all of them apply,
// or none past that one. Mark the applied ones replayed, and the document
// is free.
func (e *Engine) ReplayHeld(ctx context.Context, name string, held []ParkedEvent) HeldReplay {
	p := e.projection(name)
	var out HeldReplay
	if len(held) > 0 {
		out.Document = held[0].Document
	}
	if p == nil {
		out.Left, out.Err = held, fmt.Errorf("%w: %q", ErrUnknownProjection, name)
		return out
	}
	events := slices.Clone(held)
	_, gated := e.keeperOf(p).(streamRevision)
	slices.SortStableFunc(events, func(a, b ParkedEvent) int {
		if gated {
			return cmp.Compare(a.StreamRevision, b.StreamRevision)
		}
		return cmp.Compare(a.Position, b.Position)
	})
	start := 0
	if !gated && guardedBatches(e.keeperOf(p)) {
		start = e.replayHeldFolded(ctx, p, out.Document, e.heldPrefix(ctx, p, events, out.Document))
		out.Applied = append(out.Applied, events[:start]...)
	}
	for i := start; i < len(events); i++ {
		pe := events[i]
		if pe.Document != out.Document {
			out.Left, out.Err = events[i:], fmt.Errorf("held events of two documents, %q and %q, in one replay", out.Document, pe.Document)
			return out
		}
		ev, err := e.heldEvent(ctx, p, pe)
		t := target{p, pe.Document}
		var r Result
		switch {
		case err != nil:
			r = e.fail(t, pe.Event, refusal(err))
		default:
			// Through the gate, not held again: its failure is this
			// replay's.
			if gated {
				r = e.gateHolding(ctx, t, ev, nil, false)
			} else {
				r = e.keeperOf(p).handle(ctx, e, t, ev, nil)
			}
		}
		if r.Outcome != Applied && r.Outcome != Duplicate {
			out.Left, out.Err = events[i:], r.Err
			if out.Err == nil {
				out.Err = fmt.Errorf("event %s@%d: %v", pe.StreamID, pe.StreamRevision, r.Outcome)
			}
			return out
		}
		out.Applied = append(out.Applied, pe)
	}
	e.holds.mu.Lock()
	delete(e.holds.docs, docKey{p.Collection(), out.Document})
	e.holds.mu.Unlock()
	return out
}
