package projector

import (
	"context"
	"errors"
	"fmt"

	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// errNoRefold: the document cannot be folded anew from its stream (the
// stream does not begin at revision 0 any more: truncated, or deleted and
// written again), and a replay applies the parked event to it as it is.
var errNoRefold = errors.New("the stream does not start at revision 0")

// refolds reports whether a replay of parked event ev into the gated
// document t, at head, folds the document anew from its stream's events
// ([Engine.refold]) rather than applying ev to it as it is: whenever the
// engine reads streams and folds from them ([WithoutStreamFolds] keeps the
// positions of the events as delivered, which a stream's read does not
// give), for a document not marked deleted. Also for an event at the
// document's revision, with nothing after it: an earlier replay's fold
// anew may have applied it already (it no longer failed), and only a fold
// anew gives it once.
func (e *Engine) refolds(t target, head driver.Head) bool {
	return e.streamHistory() != nil && !e.noFolds && !head.Deleted && t.p.deletionPolicy() != RemoveDocument
}

// refold folds document t anew, as the projection is built now, from the
// events of stream up to revision upTo (the document's), read from the
// event store, with ev, the parked event replayed, in its place (as
// recorded: its position is the log's): the replay then gives the state a
// delivery in order would have, for any read model, not only those whose
// steps commute. ev applies to t whatever its router says now (its record
// names t: a hole's event, declined when it came, is recorded against the
// stream's document). Of the others, those the router declines (in a
// stream t's projection does not tie) or sends to another document are
// passed over, as the gate passes them. One that fails (it does not
// decode, its step fails, a second creation) is left out, as the failure
// policy left it out when it came, and parked ([Engine.foldAnew]). ev
// failing fails the replay. A stream that does not begin at revision 0 is
// errNoRefold.
func (e *Engine) refold(ctx context.Context, t target, stream string, upTo uint64, ev Event) (any, error) {
	var evs []Event
	truncated := false
	err := e.readStream(ctx, stream, 0, func(raw Event) error {
		switch {
		case len(evs) == 0 && raw.StreamRevision != 0:
			truncated = true
			return ErrStopRead
		case raw.StreamRevision > upTo:
			return ErrStopRead
		case raw.StreamRevision == ev.StreamRevision:
			raw = ev
		}
		evs = append(evs, raw)
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case truncated || len(evs) == 0:
		return nil, errNoRefold
	}
	return e.foldAnew(ctx, t, ev, evs)
}

// foldAnew folds document t anew from evs, its events in an order the
// projection's strategy keeps, ev (the event replayed) among them, each
// through refoldStep: one that fails is left out, parked
// ([Engine.leaveOut]), and the fold is done again without it, from the
// zero state, since a failed step may have changed the state in place. ev
// failing fails the replay.
func (e *Engine) foldAnew(ctx context.Context, t target, ev Event, evs []Event) (any, error) {
	left := map[string]bool{}
	for {
		var state any
		var failed *Event
		var cause error
		for _, raw := range evs {
			if left[raw.ID] {
				continue
			}
			next, applied, err := e.refoldStep(t, raw, state, raw.ID == ev.ID)
			if err != nil {
				failed, cause = &raw, err
				break
			}
			if applied {
				state = next
			}
		}
		switch {
		case failed == nil && state == nil:
			return t.p.newState(), nil
		case failed == nil:
			return state, nil
		case failed.ID == ev.ID:
			return nil, retry.Permanent(cause)
		}
		if err := e.leaveOut(ctx, t, *failed, cause); err != nil {
			return nil, err
		}
		left[failed.ID] = true
	}
}

// refoldStep applies raw, an event of t's stream, to state, and reports
// whether it did; an error is a failure of the event. replayed: raw is the
// event replayed, which applies to t whatever its router says. An event
// whose payload does not decode is t's (it is in its stream): it fails if
// the projection handles its type, and is passed over if not, as when it
// came. A creation over a state that holds nothing yet (events passed
// over before it) applies, as in the gate.
func (e *Engine) refoldStep(t target, raw Event, state any, replayed bool) (any, bool, error) {
	dec, undecoded := e.registry.Decode(raw)
	if undecoded == nil {
		id, ok, err := t.p.Route(dec)
		switch {
		case replayed:
		case err != nil:
			return nil, false, err
		case ok && id != t.id, !ok && !ties(t.p, raw.StreamID):
			return nil, false, nil // another document's, or declined: passed over, as by the gate
		}
		if t.p.startsDocument(dec) {
			if state != nil && !holdsNothing(t.p, state) {
				return nil, false, fmt.Errorf("%w: a second creation of document %q, at revision %d", ErrAlreadyCreated, t.id, dec.StreamRevision)
			}
			state = nil
		}
	}
	next, err := t.p.applyTo(state, dec)
	if err != nil || undecoded != nil {
		return nil, false, err
	}
	return next, true, nil
}

// parkedLister lists the parked events of a projection not replayed yet
// (mongostore.Store does).
type parkedLister interface {
	Parked(ctx context.Context, projection string) ([]ParkedEvent, error)
}

// leaveOut parks raw, an event of t's stream that fails in a fold of the
// document anew ([Engine.refold]), which leaves it out as the failure
// policy did when it came. A record kept from before (recorded false) must
// be one not replayed yet: one replayed since, whose effect the document
// had, now fails with this build, and the replay fails, saying so, rather
// than take the effect away with no record to show it. A failure to record
// it fails the replay too (it is tried again).
func (e *Engine) leaveOut(ctx context.Context, t target, raw Event, cause error) error {
	if e.parker == nil {
		return retry.Permanent(fmt.Errorf("revision %d of the stream fails with this build, and no parker records it: %w", raw.StreamRevision, cause))
	}
	recorded, err := e.parker.Park(ctx, parkedOf(t, raw, cause, 1))
	if err != nil {
		return fmt.Errorf("parking revision %d of the stream, which fails with this build: %w", raw.StreamRevision, err)
	}
	if !recorded {
		if l, ok := e.parker.(parkedLister); ok {
			parked, err := l.Parked(ctx, t.p.Name())
			if err != nil {
				return err
			}
			if !parkedStill(parked, raw.ID, t.p.Collection()) {
				return retry.Permanent(fmt.Errorf("revision %d of the stream (%s), replayed before, fails with this build: %w; "+
					"fix it and replay again, or rebuild the projection", raw.StreamRevision, raw.Type, cause))
			}
		}
	}
	e.logger.Warn("replay: an event of the document fails as it is folded anew from its stream, and is left out, parked",
		"projection", t.p.Name(), "document", t.id, "stream", raw.StreamID, "revision", raw.StreamRevision,
		"type", raw.Type, "err", cause)
	return nil
}

// parkedStill reports whether parked, records not replayed, holds event id
// for collection (a record from before builds were told apart counts).
func parkedStill(parked []ParkedEvent, id, collection string) bool {
	for _, pe := range parked {
		if pe.ID == id && (pe.Collection == collection || pe.Collection == "") {
			return true
		}
	}
	return false
}
