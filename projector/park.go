package projector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/revgate/projector/retry"
)

// ParkedEvent is an event that failed permanently in one projection and was
// set aside under the [Park] policy, with why: what an operator looks at, and
// what [Engine.Replay] applies once the projection is fixed.
type ParkedEvent struct {
	// Event is the event as it was read, without its Payload.
	Event
	Projection, Document string
	// Error is why it failed; Attempts how many times it was tried.
	Error    string
	Attempts int
	ParkedAt time.Time
	// Held: recorded under the [Hold] policy, not applied, its document
	// before it: [Engine.ReplayHeld] applies it, not [Engine.Replay].
	Held bool
	// Collection is the collection (the build) the event failed in; Claim
	// a replay of it that wrote, or was about to write, its document and
	// was not marked done ([ReplayClaimer]).
	Collection string
	Claim      *ReplayClaim
	// Record is the store's id of the record it was read from.
	Record string
}

// ReplayClaim is a replay of a parked event under way: the document's write
// token before it ([driver.Head].Write), and the one its write gives the
// document. Recorded before the write, it tells a later replay whether the
// write took: a replay killed between its write and marking the event
// replayed is not applied twice.
type ReplayClaim struct {
	Before, After string
}

// ReplayClaimer is a [Parker] that records replays under way on the parked
// events (mongostore.Store is one). Without one, a replay killed between its
// write and marking the event replayed applies it again when run again
// (under the revision gate; the other strategies mark the document itself).
type ReplayClaimer interface {
	// ClaimReplay records c on the parked event, if not replayed yet (else
	// an error wrapping [ErrReplayedAlready]).
	ClaimReplay(ctx context.Context, pe ParkedEvent, c ReplayClaim) error
	// ReleaseReplay removes claim c from the parked event, if it is still
	// the one recorded there: the replay's write did not happen (its
	// condition matched nothing), and a later replay has nothing to doubt.
	ReleaseReplay(ctx context.Context, pe ParkedEvent, c ReplayClaim) error
}

// ErrOtherBuild: a parked event of another build of the projection (a
// rebuild's collection, or the one a rebuild replaced) than the engine's:
// it is that build's to replay, and stays.
var ErrOtherBuild = errors.New("parked in another build of the projection")

// ErrReplayedAlready: the parked event was marked replayed.
var ErrReplayedAlready = errors.New("the parked event is replayed already")

// ErrReplayUncertain: a replay of the event was cut short, and the document
// has been written since by something else: whether it has the event's
// effect cannot be told.
var ErrReplayUncertain = errors.New("an earlier replay of this event was cut short and the document was written since: " +
	"whether it has the event's effect cannot be told; rebuild the projection, or, once you have looked at the document, " +
	"mark the record replayed (set replayedAt on it in projector_parked)")

func (e *Engine) claimer() ReplayClaimer { c, _ := e.parker.(ReplayClaimer); return c }

// Parker records parked events: mongostore keeps them in a collection.
type Parker interface {
	// Park records p. Recording the same event of the same projection again
	// is not an error: it records nothing, and recorded is false, unless
	// p says more than the record (a document where it named none or
	// another, or held where it was parked): p replaces it then, and
	// recorded is true.
	Park(ctx context.Context, p ParkedEvent) (recorded bool, err error)
}

// WithParker sets where the [Park] policy records events.
func WithParker(p Parker) Option { return func(e *Engine) { e.parker = p } }

// park records ev, which failed in document t with cause, before the gate
// moves the document past it: a record is never missing for a document that
// moved.
func (e *Engine) park(ctx context.Context, t target, ev Event, cause error, attempts int) error {
	if pol := e.policyOf(t.p); pol != Park && pol != Hold {
		return nil
	}
	if _, err := e.parker.Park(ctx, parkedOf(t, ev, cause, attempts)); err != nil {
		return fmt.Errorf("parking the event: %w", err)
	}
	return nil
}

// replayUnrouted replays an event parked because p could not route it: no
// document counts it (one that moved past it names it since: see
// parkHole), so once p routes it, it goes through the gate as if delivered
// now. A document that has its effect already (the event was delivered
// again and routed since) counts as replayed, and so does an event p no
// longer wants (Duplicate: there is nothing to apply). Under
// [GlobalPosition] a document past the event's position may have moved
// past it without its effect, or have it (delivered again since, and
// routed): its position cannot tell, so the replay fails, and says a
// rebuild folds it exactly once. An event of a tied stream deleted since,
// whose earlier events' document cannot be read, fails as its router's
// error does (errTieGone: see tieOf).
func (e *Engine) replayUnrouted(ctx context.Context, p Definition, ev Event) Result {
	id, ok, err := e.route(ctx, p, ev)
	switch {
	case err != nil:
		return e.fail(target{p: p}, ev, permanent(err))
	case !ok:
		// The projection no longer wants it (its upcaster drops it, or
		// its router declines it): nothing to apply, and nothing waits.
		return Result{Projection: p.Name(), Outcome: Duplicate}
	}
	switch e.keeperOf(p).(type) {
	case globalPosition:
		if r, past := e.pastPosition(ctx, target{p, id}, ev); past {
			return r
		}
	case handledIDs:
		if r, past := e.pastWindow(ctx, target{p, id}, ev); past {
			return r
		}
	}
	r := e.keeperOf(p).handle(ctx, e, target{p, id}, ev, nil)
	if r.Outcome == Duplicate {
		r.Outcome = Applied // the document has the event's effect: replayed
	}
	return r
}

// pastPosition is the failure of a replay of ev, parked with no document,
// to document t under [GlobalPosition], where t is past ev's position
// (past): whether t has ev's effect cannot be told. A document at ev's
// position has it (applied). So is one inside ev's transaction (at its
// commit position, before it) when ev's record does not tell its prepare
// position (an earlier version parked it): ev may be the one it is at.
func (e *Engine) pastPosition(ctx context.Context, t target, ev Event) (r Result, past bool) {
	meta, found, err := e.docs().LoadGuarded(ctx, t.p.Collection(), t.id, nil)
	at, applied := ev.at(), appliedAt(meta)
	switch {
	case err != nil:
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: -1, attempts: 1}), true
	case !found:
		return Result{}, false // the gate applies it
	case ev.Prepare == 0 && at.Position == applied.Position && applied.Prepare < applied.Position:
		// Not told: past, below.
	case at.After(applied):
		return Result{}, false
	case at == applied:
		return Result{Projection: t.p.Name(), Document: t.id, Outcome: Applied}, true
	}
	return e.fail(t, ev, permanent(fmt.Errorf("not replayed: under the global position strategy, document %q is past this event's position (%s, the event's %s): "+
		"it moved past the event without its effect, or got it when the event was delivered again after the router's fix, and its position cannot tell which; "+
		"a rebuild of the projection folds it exactly once", t.id, applied, at))), true
}

// pastWindow is the failure of a replay of ev, parked with no document,
// to document t under [HandledIDs], where t's window of handled ids has
// moved past ev's position without it (past): t may have got ev when it
// was delivered again after the router's fix, and its window no longer
// tells. (An event parked with its document replays whatever the window:
// the document moved past it without its effect.)
func (e *Engine) pastWindow(ctx context.Context, t target, ev Event) (r Result, past bool) {
	meta, found, err := e.docs().LoadGuarded(ctx, t.p.Collection(), t.id, nil)
	if err != nil {
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: -1, attempts: 1}), true
	}
	if _, err := e.keeperOf(t.p).check(stored{found: found, meta: meta}, ev, false); !errors.Is(err, ErrOutsideWindow) {
		return Result{}, false // the gate applies it, or finds it a duplicate
	}
	return e.fail(t, ev, permanent(fmt.Errorf("not replayed: %w (position %s, document %q's window starts after %s): "+
		"it was parked with no document (its router could not route it), and the document has handled more events since than its window keeps, "+
		"so whether it got the event when it was delivered again cannot be told; a rebuild of the projection folds it exactly once "+
		"(replay such an event before its document handles as many events as the window holds)",
		ErrOutsideWindow, ev.at(), t.id, evictedAt(meta)))), true
}

// GoneType is the type of the record [Park] leaves for a hole in a stream:
// events gone from the event store ([ErrRevisionsGone]) that the document
// moved past. It has no event to replay: [Engine.Replay] fails on it, and it
// stays listed until it is removed, or a rebuild folds the stream as it is.
const GoneType = "$revisions-gone"

// parkHole records, under the [Park] and [Hold] policies, the hole a
// document moved past at event ev (its error gone): the events of its
// stream that its router declined, each parked against it (one routed to
// another document is that one's to handle, and one the router could not
// route was parked when it came), or, for events gone from the stream, a
// record of type [GoneType]. It logs the move. A hole of events that are
// not the projection's (hole.notOurs) is neither: it is no failure.
func (e *Engine) parkHole(ctx context.Context, t target, ev Event, h hole, gone error) error {
	if h.notOurs {
		return nil
	}
	switch {
	case len(h.away) > 0 && !slices.ContainsFunc(h.away, func(a routedAway) bool { return !a.unroutable() }):
		// Each was parked as it came, its document unknown (a payload
		// that does not decode, a router that failed): no routing to
		// fix, the records name the document now.
		e.logger.Warn("document moved past events of its stream that could not be routed when they came (parked then): "+
			"their records name this document now, and replay-parked applies them here once they are fixed", "projection", t.p.Name(),
			"document", t.id, "stream", ev.StreamID, "from", h.from, "to", h.to, "revision", ev.StreamRevision)
	case len(h.away) > 0:
		e.logger.Warn("document moved past events of its stream that are routed elsewhere", "projection", t.p.Name(),
			"document", t.id, "stream", ev.StreamID, "from", h.from, "to", h.to, "revision", ev.StreamRevision, "err", gone)
	default:
		e.logger.Warn("document moved past events that are gone from its stream", "projection", t.p.Name(), "document", t.id,
			"stream", ev.StreamID, "from", h.from, "to", h.to, "revision", ev.StreamRevision)
	}
	if pol := e.policyOf(t.p); pol != Park && pol != Hold {
		return nil
	}
	for _, a := range h.away {
		var cause error
		switch {
		case a.to != "":
			continue // another document's to handle (it is a stray there)
		case !a.matters(t.p):
			// Not the projection's (dropped by its upcaster, a type it
			// does not handle): passed over, as when the hole is all such.
			continue
		case a.unroutable():
			// Parked when it came, with no document: the
			// record now names the document that moved past it without
			// its effect, so that a replay applies it there (replayed as
			// one with no document, the gate would find it a duplicate).
			cause = fmt.Errorf("%w; document %q, fed by its stream, moved past it", a.err, t.id)
		default:
			one := hole{gone: true, from: a.ev.StreamRevision, to: a.ev.StreamRevision, away: []routedAway{a}}
			cause = one.err(t, ev.StreamID, ev.StreamRevision)
		}
		recorded, err := e.parker.Park(ctx, parkedOf(t, a.ev, cause, 1))
		if err != nil {
			return fmt.Errorf("parking an event routed away: %w", err)
		}
		if recorded && a.err == nil {
			// Declined when it came (no result then): one the router could
			// not route (a.err) was parked, and counted, when it came.
			countParkedBeside(ctx)
		}
	}
	if len(h.away) > 0 {
		return nil
	}
	_, err := e.parker.Park(ctx, ParkedEvent{
		Event: Event{ID: fmt.Sprintf("gone:%s@%d-%d", ev.StreamID, h.from, h.to), Type: GoneType,
			StreamID: ev.StreamID, StreamRevision: h.from, Position: ev.Position, Prepare: ev.Prepare},
		Projection: t.p.Name(), Document: t.id,
		Error: gone.Error(), Attempts: 1, ParkedAt: time.Now().UTC(), Collection: t.p.Collection(),
	})
	if err != nil {
		return fmt.Errorf("recording the hole: %w", err)
	}
	return nil
}

// parkedBesideKey is the context key of the count, a runner's, of the
// events parkHole parks beside the one handled, which their delivery
// passed over (RunnerStats.ParkedLater): they have no result of their
// own, and are parked events all the same.
type parkedBesideKey struct{}

// countingParkedBeside returns ctx with n as the count of the events
// parked beside the ones handled under it.
func countingParkedBeside(ctx context.Context, n *atomic.Uint64) context.Context {
	return context.WithValue(ctx, parkedBesideKey{}, n)
}

func countParkedBeside(ctx context.Context) {
	if n, ok := ctx.Value(parkedBesideKey{}).(*atomic.Uint64); ok {
		n.Add(1)
	}
}

// ErrUnknownProjection: replaying an event of a projection the engine does not run.
var ErrUnknownProjection = errors.New("no such projection in this engine")

// Replay applies a parked event, once its projection is fixed, to the
// document as it is now. The document already counts the event (the engine
// moved it past the event when it parked it), so under the revision gate its
// revision stays, and under the other strategies its meta; the state becomes
// the projection's step on the current state. That is exact for
// projections whose steps commute (counters, sets, merged quantities); an
// order-sensitive read model gets the event's effect out of its order, and is
// made exact by a rebuild instead. Except under the revision gate in an
// engine that reads streams ([StreamHistory]): a document that events after
// the parked one changed since is folded anew from its stream, up to its
// revision, the event in its place, exact for any read model; an event of
// the stream that still fails is left out, as it was when it came, and
// parked (a stream that no longer starts at revision 0 is not folded anew).
// So too under [RevisionMap] in such an engine, where the document has
// later events of the parked one's stream: it is folded anew from every
// stream its revision map holds, each up to its revision, the event in its
// stream's order (the streams merged by when their events were written),
// exact for any read model the revision map keeps; the events parked
// against it and not replayed yet are left out, each applied in its own
// replay. It is not folded anew, and the event applies to it as it is,
// where one of its streams no longer starts at revision 0, where an
// event's document cannot be told (its payload does not decode, its
// router fails, or a tied stream's event comes before any is routed), or
// where it is fed by more than 1,000 streams (a summary of the whole log).
// The result is Applied, Duplicate when the
// document has the replay's effect already (an earlier replay wrote it and
// was not marked done, see [ReplayClaimer]; or the event was parked in an
// earlier build, and the current one, a rebuild, folded it; or the event,
// parked with no document, is one the projection no longer wants: its
// upcaster drops it now), or Failed with why (the event stays parked).
//
// Under the revision gate the write cannot be conditional on anything the
// gate changes (the revision stays), so replay while the projection is not
// running: a running projector that is catching up folds from what it has
// read before (mongostore caches the documents of its batches) and would
// write over the replay. Under the other strategies the write is conditional
// on the document's version and safe at any time.
func (e *Engine) Replay(ctx context.Context, pe ParkedEvent) Result {
	p := e.projection(pe.Projection)
	ev := pe.Event
	if p == nil {
		return Result{Projection: pe.Projection, Document: pe.Document, Outcome: Failed, Err: fmt.Errorf("%w: %q", ErrUnknownProjection, pe.Projection)}
	}
	t := target{p, pe.Document}
	if pe.Held {
		return e.fail(t, ev, permanent(errors.New("a held event: its document waits before it; replay it with its document's other held events (ReplayHeld)")))
	}
	if pe.Type == GoneType {
		return e.fail(t, ev, permanent(fmt.Errorf("%s: the events are gone from the event store: there is nothing to replay (a rebuild folds the stream as it is now)", pe.Error)))
	}
	if strings.Contains(pe.Error, ErrOutsideWindow.Error()) {
		// Refused as it came because it may have been applied already (a
		// redelivery older than the window): a replay cannot tell either.
		return e.fail(t, ev, permanent(fmt.Errorf("%w: it may have been applied already, and a replay cannot tell, so it would apply it twice: "+
			"a rebuild of the projection folds it exactly once", ErrOutsideWindow)))
	}
	decoded, err := e.decodeParked(pe)
	if err != nil {
		f := permanent(err)
		f.attempts = 1
		return e.fail(t, ev, f)
	}
	e.forgetUndecodedTie(p, ev.StreamID)
	if pe.Collection != "" && pe.Collection != p.Collection() {
		return e.fail(t, decoded, permanent(fmt.Errorf("%w: collection %s, not %s", ErrOtherBuild, pe.Collection, p.Collection())))
	}
	if pe.Document == "" {
		return e.replayUnrouted(ctx, p, decoded)
	}
	if err := e.routedElsewhere(ctx, p, decoded, pe.Document); err != nil {
		return e.fail(t, decoded, refusal(err))
	}
	if f, stray := e.strayAt(ctx, t, decoded); stray {
		return e.fail(t, decoded, f)
	}
	return e.replayAt(ctx, t, decoded, pe)
}

// decodeParked decodes parked event pe for a replay. An event of a type
// the registry does not know fails, and stays parked: the build that
// replays it lacks its type (an older binary, a rename without [Renamed]
// or [Upcast] from the old name), so it can neither apply it nor tell
// that the projection no longer wants it. Its error keeps the cause it was
// parked for, which the record then holds. A live event of such a type is
// passed over instead: no build ever handled it. So is an event held
// behind another by a build that did not register its type either
// (heldUnknown): it comes back undecoded, as it was delivered, and the
// replay does what that build would have done with the document free.
func (e *Engine) decodeParked(pe ParkedEvent) (Event, error) {
	ev := pe.Event
	if _, _, known := e.registry.formOf(ev); !known && !strings.HasPrefix(ev.Type, "$") { // not the node's records (deletions)
		if pe.Held && strings.HasPrefix(pe.Error, ErrHeld.Error()+heldUnknown) {
			return e.registry.Decode(ev)
		}
		cause := pe.Error
		if i := strings.LastIndex(cause, parkedFor); i >= 0 && strings.Contains(cause[:i], notKnown) {
			cause = cause[i+len(parkedFor):] // refused by such a build before: the cause it was parked for
		}
		return ev, fmt.Errorf("%s%q: replay it with a build that registers the type (or names this old name of it with Renamed or Upcast)%s%s",
			notKnown, ev.Type, parkedFor, cause)
	}
	return e.registry.Decode(ev)
}

// The words of decodeParked's error.
const (
	notKnown  = "not replayed: this build's registry does not know event type "
	parkedFor = "; it was parked for: "
)

// replayAt applies parked event ev (record pe) to document t as it is now,
// under the engine's retry policy (see [Engine.Replay]).
func (e *Engine) replayAt(ctx context.Context, t target, ev Event, pe ParkedEvent) Result {
	attempts := 0
	var wrote string // what an attempt's write gave the document (its token)
	var before bool  // an earlier replay wrote it
	err := retry.Do(ctx, e.policy, func(ctx context.Context) error {
		attempts++
		unlock := e.locks.lock(t.key())
		defer unlock()
		var err error
		before, err = e.keeperOf(t.p).replayOnce(ctx, e, t, ev, pe, &wrote)
		return err
	})
	switch {
	case err != nil:
		return e.fail(t, ev, failure{err: err, wanted: -1, seen: -1, attempts: attempts})
	case before:
		return Result{Projection: t.p.Name(), Document: t.id, Outcome: Duplicate}
	}
	return Result{Projection: t.p.Name(), Document: t.id, Outcome: Applied}
}

// strayAt says why ev, parked against document t, is not replayed there,
// as it was refused when it came: under a strategy that gates every
// revision, t's document never had ev's stream, none of whose earlier
// events is routed to it and some are to others (a stray: see hole), so it
// would get the stream from the middle. It cannot tell, and says nothing,
// when the engine reads no streams, or the stream is deleted. A document
// or stream that cannot be read is a failure too, not a permanent one: the
// event stays parked.
func (e *Engine) strayAt(ctx context.Context, t target, ev Event) (failure, bool) {
	if e.streamHistory() == nil || !e.keeperOf(t.p).everyRevision() || ev.StreamRevision == 0 {
		return failure{}, false
	}
	had, err := e.hadStream(ctx, t, ev.StreamID)
	if err != nil {
		return failure{err: err, wanted: -1, seen: -1, attempts: 1}, true
	}
	if had {
		return failure{}, false
	}
	h, err := e.routedAwayBefore(ctx, t, ev, false, 0)
	switch {
	case err != nil && e.deleted(ctx, ev.StreamID):
		return failure{}, false
	case err != nil:
		return failure{err: err, wanted: -1, seen: -1, attempts: 1}, true
	case !h.stray:
		return failure{}, false
	}
	f := permanent(fmt.Errorf("not replayed: %w", h.err(t, ev.StreamID, ev.StreamRevision)))
	f.attempts = 1
	return f, true
}

// hadStream reports whether document t has had events of stream: under
// the revision gate, whether it is that stream's document; under
// RevisionMap, whether its meta has the stream.
func (e *Engine) hadStream(ctx context.Context, t target, stream string) (bool, error) {
	if _, ok := e.keeperOf(t.p).(revisionMap); ok {
		meta, found, err := e.docs().LoadGuarded(ctx, t.p.Collection(), t.id, t.p.newState())
		_, had := meta.Revisions[streamKey(stream)]
		return found && had, err
	}
	head, found, err := e.docs().Load(ctx, t.p.Collection(), t.id, 0, t.p.newState())
	return found && (head.Stream == "" || head.Stream == stream), err
}

// routedElsewhere says why event ev, parked or held against document doc
// of p, is not replayed there: its router names another document now (it
// was put against doc, the document its stream is tied to, while its
// payload did not decode; or the router was changed since); or its router
// declines it now where a rebuild would refuse it (see [Engine.declined]:
// an event of a type p handles, under a strategy that gates every
// revision, in a stream p does not tie whose earlier events feed a
// document): applied to doc, the replay would hide what the rebuild stops
// at, such as an upcaster that drops what the router reads. nil when the
// router names doc, fails (an event that cannot name its document, such as
// one without it in its metadata, goes to its stream's document: the
// record names it), or declines it where a rebuild leaves it alone (the
// record's document gets it, as before). An error that wraps errTieRead
// (the stream could not be read) is no refusal: try again.
func (e *Engine) routedElsewhere(ctx context.Context, p Definition, ev Event, doc string) error {
	id, ok, err := p.Route(ev)
	switch {
	case err != nil || id == doc && ok:
		return nil
	case !ok:
		if ties(p, ev.StreamID) {
			return nil
		}
		if err := e.declined(ctx, p, ev); err != nil {
			return fmt.Errorf("not replayed, as a rebuild would not apply it: %w", err)
		}
		return nil
	}
	return fmt.Errorf("its router now sends it to document %q, not to %q, which it was recorded against: "+
		"rebuild the projection to fold it where it belongs", id, doc)
}

// refusal is the failure of a replay that routedElsewhere refused with
// err: permanent, unless the stream could not be read.
func refusal(err error) failure {
	if errors.Is(err, errTieRead) {
		return failure{err: err, wanted: -1, seen: -1, attempts: 1}
	}
	return permanent(err)
}
