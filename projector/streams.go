package projector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// StreamReader tells the engine what its event store still holds of a
// stream. A real node can present holes in a stream's revisions: events
// truncated by the stream's $maxCount, $maxAge or $tb (gone from $all too
// once the node scavenges), a stream deleted and written again (it goes on
// from its old revision), a tombstone. With a StreamReader ([WithStreamReader])
// the revision gate tells a predecessor that is late from one that is gone:
// when an event waits for a predecessor, the engine asks for the stream's
// first readable revision once, and a predecessor below it is a hole, which
// goes through the failure policy at once ([ErrRevisionsGone]) instead of
// being waited for until the retries run out.
type StreamReader interface {
	// FirstRevision returns the revision of the first event a read of stream
	// returns now: 0 for a stream that has all its events, more once earlier
	// ones were truncated or the stream was deleted and written again.
	// ErrStreamDeleted when it has none (deleted, tombstoned, truncated
	// entirely, or never written).
	FirstRevision(ctx context.Context, stream string) (uint64, error)
}

var (
	// ErrStreamDeleted: the stream has no events left to read.
	ErrStreamDeleted = errors.New("stream deleted")
	// ErrRevisionsGone: a document's stream no longer holds the events
	// between the document's revision and the event's (truncated, or
	// deleted). They cannot be applied: under [Block] the event fails for
	// good with this error, which names them; under [Skip] and [Park] the
	// event applies on the document as it is, and under [Park] the hole is
	// recorded. A rebuild folds the stream as it is now.
	ErrRevisionsGone = errors.New("events gone from their stream")
	// ErrRoutedAway: an event waits for earlier events of its stream that
	// its projection's router sends to another document, or to none. The
	// revision gate and [RevisionMap] need every event of a stream that
	// feeds a document routed to that document, so those events can never
	// come. With a [StreamHistory] ([WithStreamReader]) the engine finds
	// them on the event's first wait, by routing the stream's events
	// between the document and the event; then under [Block] the event
	// fails for good with this error, which names the stream, the events,
	// the documents and the rule; under [Skip] the document moves past
	// them, and under [Park] and [Hold] each is first parked against the
	// document. Without a StreamHistory they are waited for until the
	// retries run out.
	ErrRoutedAway = errors.New("earlier events of the stream are not routed to its document")
)

// WithStreamReader lets the gate ask the event store about holes in a
// stream (see [StreamReader]). Without it, a predecessor that is gone is
// waited for like a late one, and the event fails when the retries run out.
func WithStreamReader(r StreamReader) Option {
	return func(e *Engine) {
		if r == nil {
			e.readers.Store(nil) // none: a runner may lend its source's
			return
		}
		e.readers.Store(&streamReaders{streams: r})
	}
}

// hole is what the event store says of the events between a document and
// an event that waits for its predecessor.
type hole struct {
	// gone: the predecessor is no longer in the stream: the revisions from
	// (the document's next) to the event's predecessor cannot come.
	gone     bool
	from, to uint64
	// deleted: the stream has nothing left to read.
	deleted bool
	// away: the revisions from to to are there, but routed to other
	// documents or to none (ErrRoutedAway), each with where it went.
	away []routedAway
	// stray: the event itself is the one routed away: its document never
	// had its stream, whose earlier events feed another document.
	stray bool
	// notOurs: the router declined every revision from to to, and the
	// projection has no handler for any of their types (events of another
	// concern, of types nobody registered, or dropped by their upcasters).
	// They are not the projection's: the document moves past them under
	// every policy, as it moves past an event of a type it does not handle,
	// and nothing is recorded.
	notOurs bool
}

// failsUnhandled reports whether p fails ev, an event of a type it has no
// handler for: one of a type nobody registered, in a projection that fails
// unknown types ([Projection.FailUnknownTypes]). No handler runs.
func failsUnhandled(p Definition, ev Event) bool {
	_, err := p.applyTo(p.newState(), ev)
	return err != nil
}

// routedAway is an event of a stream that its projection does not route to
// the document its stream feeds: to document to, or to none ("", with the
// router's error if it had one).
type routedAway struct {
	ev  Event
	to  string
	err error
}

// matters reports whether a keeps the document of p it was not routed to
// from its later events: routed to another document, not routable, or of
// a type p handles (or fails). An event the router declined, of a type p
// has no handler for, is not p's: a document passes over it.
func (a routedAway) matters(p Definition) bool {
	return a.to != "" || a.err != nil || handlesType(p, a.ev.Payload) || failsUnhandled(p, a.ev)
}

// unroutable reports whether a is an event its router could not route
// (parked when it came, with no document).
func (a routedAway) unroutable() bool { return a.to == "" && a.err != nil }

func (a routedAway) String() string {
	what := fmt.Sprintf("revision %d (%s, id %s)", a.ev.StreamRevision, a.ev.Type, a.ev.ID)
	switch {
	case a.err != nil:
		return fmt.Sprintf("%s is routed to no document: %v", what, a.err)
	case a.to == "":
		return what + " is routed to no document (its router declined it)"
	}
	return fmt.Sprintf("%s is routed to document %q", what, a.to)
}

// unregistered reports whether a's router declined it because the registry
// does not know its type (it has no payload to route by), in p, which
// fails unknown types: routing it is not the fix.
func (a routedAway) unregistered(p Definition) bool {
	return a.to == "" && a.err == nil && a.ev.Payload == nil && failsUnhandled(p, a.ev)
}

// in is a.String() as p sees it: one of a type nobody registered says so.
func (a routedAway) in(p Definition) string {
	if !a.unregistered(p) {
		return a.String()
	}
	return fmt.Sprintf("revision %d (%s, id %s) is of a type nobody registered, which the projection fails (FailUnknownTypes)",
		a.ev.StreamRevision, a.ev.Type, a.ev.ID)
}

// movingTie is the cure of a tied stream whose events the router sends to
// more than one document.
const movingTie = "the tied stream moves between documents, and a tie does not move: the events its router declines go to the document " +
	"of its first routed event under any strategy; let each event of a stream that moves name its document " +
	"(the write side can put the current one in the metadata, and the router read it there: RoutesByEnvelope) under a strategy " +
	"that tracks events, not streams (HandledIDs): under RevisionMap a stream feeds one document"

// err is the hole as the error of the event that found it, in document t.
func (h hole) err(t target, stream string, rev uint64) error {
	if len(h.away) > 0 {
		parts, declined := awayParts(t.p, h.away)
		fix := "route them all to one document (a router that answers otherwise for one event is a bug); or, where a stream is meant to feed " +
			"several documents, choose a strategy that needs no order, such as HandledIDs"
		if moves := ties(t.p, stream) && slices.ContainsFunc(h.away, func(a routedAway) bool { return a.to != "" }); moves {
			// Another strategy would not place the declined events of a
			// stream that moves either: a tie does not move.
			fix = movingTie
		}
		if h.stray {
			return fmt.Errorf("%w: in projection %s, revision %d of stream %q is routed to document %q, but of its earlier events %s: "+
				"a document fed by a stream needs every event of it routed to it (%s)%s",
				ErrRoutedAway, t.p.Name(), rev, stream, t.id, strings.Join(parts, "; "), fix, declined)
		}
		if fix != movingTie {
			fix = fmt.Sprintf("route them to %q, or choose a strategy that needs no order, such as HandledIDs", t.id)
		}
		if unknown := slices.ContainsFunc(h.away, func(a routedAway) bool { return a.unregistered(t.p) }); unknown &&
			!slices.ContainsFunc(h.away, func(a routedAway) bool { return a.matters(t.p) && !a.unregistered(t.p) }) {
			fix = "register the type, or an upcaster that drops its events (DropEvent): without a payload its router names no document"
		} else if unknown {
			fix = "register the types nobody registered, or an upcaster that drops their events (DropEvent); " + fix + " for the others"
		}
		return fmt.Errorf("%w: in projection %s, %s of stream %q, and revision %d feeds document %q: "+
			"a document fed by a stream needs every event of it routed to it, so they cannot come (%s)%s",
			ErrRoutedAway, t.p.Name(), strings.Join(parts, "; "), stream, rev, t.id, fix, declined)
	}
	why := "truncated by the stream's $maxCount, $maxAge or $tb, or deleted"
	if h.deleted {
		why = "the stream is deleted"
	}
	if h.from == h.to {
		return fmt.Errorf("%w: revision %d of stream %q (%s)", ErrRevisionsGone, h.from, stream, why)
	}
	return fmt.Errorf("%w: revisions %d to %d of stream %q (%s)", ErrRevisionsGone, h.from, h.to, stream, why)
}

// holeBefore asks the event store whether the revisions between a document
// (found at revision rev, or not found) and ev are gone. Without a
// [StreamReader], or for an event at revision 0, nothing is known to be
// gone.
func (e *Engine) holeBefore(ctx context.Context, t target, ev Event, found bool, rev uint64) (hole, error) {
	n := ev.StreamRevision
	if e.streamReader() == nil || n == 0 {
		return hole{}, nil
	}
	first, err := e.streamReader().FirstRevision(ctx, ev.StreamID)
	deleted := errors.Is(err, ErrStreamDeleted)
	switch {
	case deleted:
		first = math.MaxUint64
	case err != nil:
		return hole{}, fmt.Errorf("reading where stream %q starts: %w", ev.StreamID, err)
	}
	if n-1 >= first {
		// The predecessor is there to read: it is late, unless the router
		// sends it elsewhere.
		from := first
		if found {
			from = max(first, rev+1)
		}
		h, err := e.routedAwayBefore(ctx, t, ev, found, from)
		if found && first > rev+1 || !found && first > 0 {
			// The revisions before first are gone from the stream: whose
			// they were cannot be told, so the hole is no one's to pass
			// over without a word.
			h.notOurs = false
		}
		return h, err
	}
	from := uint64(0)
	if found {
		from = rev + 1
	}
	return hole{gone: true, from: from, to: n - 1, deleted: deleted}, nil
}

// awayParts says where each of away that matters to p went (see
// [routedAway.matters]): the first three and the last two, and how many
// between, so that a message stays short; declined says how many of the
// others (declined, of types p has no handler for) there were, which the
// document could pass over alone ("" when none).
func awayParts(p Definition, away []routedAway) (parts []string, declined string) {
	var matter []routedAway
	for _, a := range away {
		if a.matters(p) {
			matter = append(matter, a)
		}
	}
	if len(matter) == 0 {
		matter = away // none matters alone (the revisions before them are gone): each is named
	}
	for i, a := range matter {
		switch {
		case i < 3 || i >= len(matter)-2:
			parts = append(parts, a.in(p))
		case i == 3:
			parts = append(parts, fmt.Sprintf("%d more", len(matter)-5))
		}
	}
	if passed := len(away) - len(matter); passed > 0 {
		declined = fmt.Sprintf("; %d more of its events there the router declined, of types the projection has no handler for: those alone it could pass over", passed)
	}
	return parts, declined
}

// routedAwayBefore reads the events of ev's stream from revision from to
// ev's, when the engine has a [StreamHistory], and routes each in t's
// projection: when none is routed to t's document, they are a hole that
// cannot come (ErrRoutedAway). When one is, it is late: a document waits
// for it, and it finds the events routed away before it when it comes. When
// t's document never had the stream (not found) and its earlier events
// feed another document, ev is the one routed away (stray).
func (e *Engine) routedAwayBefore(ctx context.Context, t target, ev Event, found bool, from uint64) (hole, error) {
	if e.streamHistory() == nil || from >= ev.StreamRevision {
		return hole{}, nil
	}
	var away []routedAway
	late := false
	var routeErr error
	err := e.readStream(ctx, ev.StreamID, from, func(pred Event) error {
		if pred.StreamRevision >= ev.StreamRevision {
			return ErrStopRead
		}
		a := e.routeIn(ctx, t.p, pred)
		switch {
		case errors.Is(a.err, errTieRead):
			routeErr = a.err
			return ErrStopRead
		case a.err == nil && a.to == t.id && !found && slices.ContainsFunc(away, func(x routedAway) bool { return x.to != "" }):
			// Routed here after an earlier event of the stream went to
			// another document: refused as a stray when it came, as ev
			// is; it is not late.
		case a.err == nil && a.to == t.id:
			late = true
			return ErrStopRead
		}
		away = append(away, a)
		return nil
	})
	switch {
	case err != nil:
		return hole{}, fmt.Errorf("reading stream %q from revision %d: %w", ev.StreamID, from, err)
	case routeErr != nil:
		return hole{}, routeErr
	case late || len(away) == 0 || away[len(away)-1].ev.StreamRevision != ev.StreamRevision-1:
		return hole{}, nil // late (or not all read: the stream moved)
	}
	h := hole{gone: true, from: away[0].ev.StreamRevision, to: ev.StreamRevision - 1, away: away}
	h.stray = !found && slices.ContainsFunc(away, func(a routedAway) bool { return a.to != "" })
	h.notOurs = !slices.ContainsFunc(away, func(a routedAway) bool { return a.matters(t.p) })
	return h, nil
}

// readStream reads stream from revision from, as [StreamHistory.ReadStream]
// does, but calls each no more once it has returned: a read given up on
// (its context done, or its server hung) may go on calling back, and each
// may then keep what it found in plain variables.
func (e *Engine) readStream(ctx context.Context, stream string, from uint64, each func(Event) error) error {
	var mu sync.Mutex
	done := false
	err := e.streamHistory().ReadStream(ctx, stream, from, func(ev Event) error {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return ErrStopRead
		}
		return each(ev)
	})
	mu.Lock()
	done = true
	mu.Unlock()
	return err
}

// refuseStray is what becomes of a stray event (see hole): refused by the
// policy in its document, nothing written; under [Hold] parked and passed
// over, since it holds no document (the document never had its stream).
func (e *Engine) refuseStray(ctx context.Context, t target, ev Event, why error, attempts int) (step, error) {
	if e.policyOf(t.p) == Hold {
		if err := e.park(ctx, t, ev, why, attempts); err != nil {
			return step{}, err
		}
		return step{outcome: Applied, skipped: why}, nil
	}
	return e.refused(ctx, t, ev, why, attempts)
}

// routeIn routes ev, as delivered, in projection p, as Handle would.
func (e *Engine) routeIn(ctx context.Context, p Definition, ev Event) routedAway {
	decoded, targets, unroutable, undecodable := e.routed(ctx, ev)
	a := routedAway{ev: decoded}
	for _, t := range targets {
		if t.p == p {
			a.to = t.id
		}
	}
	for _, u := range unroutable {
		if u.p == p {
			a.err = unroutableCause(u.err, undecodable)
		}
	}
	return a
}

// startsOver reports whether a document at revision rev belongs to a stream
// that was deleted (or truncated past it) and written again: its stream no
// longer holds its events, so a creation event starts it over instead of
// being a second creation.
func (e *Engine) startsOver(ctx context.Context, stream string, rev uint64) (bool, error) {
	if e.streamReader() == nil {
		return false, nil
	}
	first, err := e.streamReader().FirstRevision(ctx, stream)
	switch {
	case errors.Is(err, ErrStreamDeleted):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading where stream %q starts: %w", stream, err)
	}
	return rev < first, nil
}

// streamReaders are the engine's readers of streams: set by
// [WithStreamReader], or lent by the first runner of an engine that has
// none (Runner.lendStreams), while other goroutines may handle events.
type streamReaders struct {
	streams StreamReader  // nil: holes are not known
	history StreamHistory // nil: batches fold only their own events
}

// streamReader is the engine's reader of streams, nil for none.
func (e *Engine) streamReader() StreamReader {
	if r := e.readers.Load(); r != nil {
		return r.streams
	}
	return nil
}

// streamHistory is the engine's reader of streams' events, nil for none.
func (e *Engine) streamHistory() StreamHistory {
	if r := e.readers.Load(); r != nil {
		return r.history
	}
	return nil
}
