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
// ([Engine.refold]) rather than applying ev to it as it is: when events
// after ev have been applied since it was parked, so that applying it last
// would put its effect out of its order, and the engine can read streams.
func (e *Engine) refolds(t target, ev Event, head driver.Head) bool {
	return e.history != nil && ev.StreamRevision < head.Revision && !head.Deleted &&
		t.p.deletionPolicy() != RemoveDocument
}

// refold folds document t anew, as the projection is built now, from the
// events of stream up to revision upTo (the document's), read from the
// event store: the replay of parked event ev then gives the state a
// delivery in order would have, for any read model, not only those whose
// steps commute. The events the router declines or sends to another
// document are passed over, as the gate passes them. An event other than
// ev that fails (it does not decode, its step fails, a second creation) is
// left out, as the failure policy left it out when it came, and parked (its
// record is kept if it has one): the fold is done again without it, from
// the zero state, since a failed step may have changed the state in place.
// ev failing fails the replay. A stream that does not begin at revision 0
// is errNoRefold.
func (e *Engine) refold(ctx context.Context, t target, stream string, upTo uint64, ev Event) (any, error) {
	left := map[uint64]bool{}
	for {
		var state any
		var found, read, truncated bool
		var failed *Event
		var cause error
		err := e.history.ReadStream(ctx, stream, 0, func(raw Event) error {
			first := !read
			read = true
			switch {
			case first && raw.StreamRevision != 0:
				truncated = true
				return ErrStopRead
			case raw.StreamRevision > upTo:
				return ErrStopRead
			case left[raw.StreamRevision]:
				return nil
			}
			next, applied, err := e.refoldStep(t, raw, state, found)
			if err != nil {
				failed, cause = &raw, err
				return ErrStopRead
			}
			if applied {
				state, found = next, true
			}
			return nil
		})
		switch {
		case err != nil:
			return nil, err
		case truncated || !read:
			return nil, errNoRefold
		case failed == nil:
			if state == nil {
				state = t.p.newState()
			}
			return state, nil
		case failed.StreamRevision == ev.StreamRevision:
			return nil, retry.Permanent(cause)
		}
		left[failed.StreamRevision] = true
		e.leaveOut(ctx, t, *failed, cause)
	}
}

// refoldStep applies raw, an event of t's stream as read, to state (found:
// an event made it), and reports whether it did; an error is a failure of
// the event. An event whose payload does not decode is the document's (it
// is in its stream): it fails if the projection handles its type, and is
// passed over if not, as when it came.
func (e *Engine) refoldStep(t target, raw Event, state any, found bool) (any, bool, error) {
	dec, undecoded := e.registry.Decode(raw)
	if undecoded == nil {
		id, ok, err := t.p.Route(dec)
		switch {
		case err != nil:
			return nil, false, err
		case !ok || id != t.id:
			return nil, false, nil // declined, or another document's: passed over, as by the gate
		case t.p.startsDocument(dec) && found:
			return nil, false, fmt.Errorf("%w: a second creation of document %q, at revision %d", ErrAlreadyCreated, t.id, dec.StreamRevision)
		case t.p.startsDocument(dec):
			state = nil
		}
	}
	next, err := t.p.applyTo(state, dec)
	if err != nil || undecoded != nil {
		return nil, false, err
	}
	return next, true, nil
}

// leaveOut parks an event of t's stream that fails in a fold of the
// document anew (refold), which leaves it out as the failure policy did
// when it came.
func (e *Engine) leaveOut(ctx context.Context, t target, raw Event, cause error) {
	recorded := false
	if e.parker != nil {
		recorded, _ = e.parker.Park(ctx, parkedOf(t, raw, cause, 1))
	}
	if e.logger != nil {
		e.logger.Warn("replay: an event of the document fails as it is folded anew from its stream, and is left out",
			"projection", t.p.Name(), "document", t.id, "stream", raw.StreamID, "revision", raw.StreamRevision,
			"type", raw.Type, "parked", recorded, "err", cause)
	}
}
