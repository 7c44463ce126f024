package projector

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/revgate/projector/retry"
)

// tieKey is a stream as a projection that ties it sees it.
type tieKey struct{ projection, stream string }

// tie is what the engine knows of a tied stream: the document of its first
// routed event, at revision at; or, with no document, that none of its
// events before revision scanned routes; or, undecoded, that its event at
// revision at, of a type the projection handles, does not decode and its
// router cannot tell where it goes without its payload, so that the
// stream's document is not known until it decodes.
type tie struct {
	doc         string
	at, scanned uint64
	undecoded   bool
	// gone: the stream could not be read, deleted since (see noteRouted).
	gone bool
	// moved: a later event of the stream was routed to another document
	// (said once: see noteRouted).
	moved bool
}

// pending reports whether the document of the stream's events after
// revision rev is unknown: an earlier event that does not decode, or that
// its router failed on, may name it.
func (t tie) pending(rev uint64) bool { return t.doc == "" && t.undecoded && t.at < rev }

// lost reports whether the stream was found deleted with none of its
// routed events seen: the document its events feed cannot be told.
func (t tie) lost() bool { return t.gone && t.doc == "" }

// pendingError is the error of an event its router declined, in a stream
// whose document is unknown (pending): it fails, under its projection's
// failure policy, rather than being left alone while the event that may
// name its document waits (parked or held) for a fix. Replayed after that
// event, in log order, it goes where the stream goes.
func (t tie) pendingError() error {
	return fmt.Errorf("%w: its router declined it, and the stream's event at revision %d, which does not decode or cannot be routed, may name the document "+
		"it feeds: it fails with that event (parked or held, replay them in order once it is fixed)", ErrUnroutable, t.at)
}

// errTieRead: the stream of a tied event could not be read. It is not the
// event's fault: the event fails as a store error does (retried, never
// skipped or parked).
var errTieRead = errors.New("reading the stream its event is tied by")

// route returns the document ev feeds in projection p: its router's
// answer; for an event of a stream p ties ([Projection.TieStreams]) that the
// router declines, the document of the stream's first event before it that
// the router routes. An event the router declines in a stream that it does
// not tie but that feeds a document, under a strategy that gates every
// revision, cannot be routed (see declined).
func (e *Engine) route(ctx context.Context, p Definition, ev Event) (id string, ok bool, err error) {
	id, ok, err = p.Route(ev)
	switch {
	case err != nil:
		return id, ok, err
	case ok:
		if ties(p, ev.StreamID) {
			e.noteRouted(p, ev, id)
		}
		return id, ok, err
	case ties(p, ev.StreamID):
		return e.tieOf(ctx, p, ev)
	}
	return "", false, e.declined(ctx, p, ev)
}

// Documents returns the events of each document of p among events (decoded,
// in log order), as the engine routes them: by p's router, and, in a stream
// p ties ([Projection.TieStreams]), an event the router declines to the
// document of the stream's first event before it that the router routes.
// An event the router cannot route is in none, and so, under a strategy
// that gates every revision of a stream (RevisionMap, the revision gate),
// is an event routed to another document than its stream's earlier ones
// (the engine refuses it: [ErrRoutedAway]). Each document's events are
// those whose fold it must hold: what projectortest.CheckDocument takes
// for a document fed by several streams.
func (p *Projection[S]) Documents(events []Event) map[string][]Event {
	byDoc := map[string][]Event{}
	tie := map[string]string{}   // stream -> the document of its first routed event
	first := map[string]string{} // the same, of every stream
	everyRevision := p.Strategy().k.everyRevision()
	for _, ev := range events {
		id, ok, err := p.Route(ev)
		switch {
		case err != nil:
			continue
		case ok && everyRevision && first[ev.StreamID] != "" && first[ev.StreamID] != id:
			continue // routed away from its stream's document
		case ok:
			if _, seen := first[ev.StreamID]; !seen {
				first[ev.StreamID] = id
			}
			if _, seen := tie[ev.StreamID]; !seen && ties(p, ev.StreamID) {
				tie[ev.StreamID] = id
			}
		default:
			if id, ok = tie[ev.StreamID]; !ok {
				continue
			}
		}
		byDoc[id] = append(byDoc[id], ev)
	}
	return byDoc
}

// ties reports whether p ties stream.
func ties(p Definition, stream string) bool {
	for _, prefix := range p.tiedStreams() {
		if strings.HasPrefix(stream, prefix) {
			return true
		}
	}
	return false
}

// tieOf returns the document of the first event of ev's stream, before ev,
// that p's router routes (streamDocument). Only the events before ev count,
// so the answer is the same whenever ev is handled: live, after a restart,
// in a rebuild. When none routes, ev stays declined, as in a stream that is
// not tied: a stream none of whose events the router routes is not the
// projection's, and a document that a later event of the stream is routed
// to finds ev missing there, when it has a handler for ev's type
// ([ErrRoutedAway]); when the stream cannot be read, the error wraps
// errTieRead; when it is deleted, none of its routed events seen by this
// engine, an event of it but its first fails (errTieGone), unless the
// events before it were seen declined (noteDeclined).
func (e *Engine) tieOf(ctx context.Context, p Definition, ev Event) (string, bool, error) {
	known, err := e.streamDocument(ctx, p, ev)
	if err != nil {
		return "", true, err
	}
	if known.pending(ev.StreamRevision) && (handlesType(p, ev.Payload) || e.keeperOf(p).everyRevision()) {
		// Under a strategy that gates every revision (RevisionMap), the
		// document needs the stream's events it does not handle too: a
		// replay in order applies them, where left alone here its replay
		// of the next one would wait for their revision for ever.
		return "", true, known.pendingError()
	}
	if known.lost() && ev.StreamRevision > known.scanned && (handlesType(p, ev.Payload) || e.keeperOf(p).everyRevision()) {
		// Deleted before this process saw its routed event (one routed
		// before a restart): which document its earlier events feed
		// cannot be read, and left alone the event would be lost without
		// a word. It fails under the policy, as its replay does.
		return "", true, errTieGone
	}
	if known.doc == "" || known.at > ev.StreamRevision {
		return "", false, nil
	}
	return known.doc, true, nil
}

// errTieGone is the failure of an event its router declines in a stream
// the projection ties, deleted since, before the engine saw which
// document its earlier events feed.
var errTieGone = fmt.Errorf("%w: its router declines it, and its stream, which the projection ties, "+
	"is deleted: the document its earlier events feed cannot be told (a rebuild folds it there)", ErrUnroutable)

// declined says why an event p's router declined cannot be left alone:
// its projection handles its type, gates every revision of a stream
// (RevisionMap, the revision gate), and an earlier event of its stream
// feeds a document. That document would never get it: a later event of the
// stream routed there finds it missing (a hole), and when none comes (the
// stream's last event: a cancellation, a closing) it is lost without a
// word. So it fails under the failure policy, as an event its router
// cannot route, naming the document and the cure (TieStreams). nil when
// the event is the projection's to leave alone, or the engine reads no
// streams.
func (e *Engine) declined(ctx context.Context, p Definition, ev Event) error {
	if e.streamHistory() == nil || !e.keeperOf(p).everyRevision() || !handlesType(p, ev.Payload) {
		return nil
	}
	known, _ := e.ties.Peek(tieKey{p.Name(), ev.StreamID})
	if ev.StreamRevision > 0 {
		var err error
		if known, err = e.streamDocument(ctx, p, ev); err != nil {
			return err
		}
	}
	if known.pending(ev.StreamRevision) {
		return known.pendingError()
	}
	if known.doc == "" || known.at >= ev.StreamRevision {
		// None of the stream's events up to this one routes: the next
		// declined one needs no read for them.
		e.declinedThrough(tieKey{p.Name(), ev.StreamID}, known, ev.StreamRevision)
		return nil
	}
	return fmt.Errorf("%w: its router declined it, but the stream's event at revision %d feeds document %q, which would miss it "+
		"(tie the stream with Projection.TieStreams, so that the events the router declines go to that document, or route it)",
		ErrUnroutable, known.at, known.doc)
}

// noteDeclined notes that p's router declined ev, decoded, of a stream p
// ties, and that none of the stream's events before it routes (tieOf read
// them, or ev is the stream's first): the next declined one needs no read
// for them, and finds none to read when the stream is deleted since, its
// events still in $all (a catch-up, a rebuild). Not for an event that does
// not decode: a fix of it may name the stream's document.
func (e *Engine) noteDeclined(p Definition, ev Event) {
	if !ties(p, ev.StreamID) {
		return
	}
	k := tieKey{p.Name(), ev.StreamID}
	known, _ := e.ties.Peek(k)
	e.declinedThrough(k, known, ev.StreamRevision)
}

// declinedThrough notes, of the stream of k as known, that its event at
// rev is declined and none before it routes (scanned is rev): scanned moves
// past it. Nothing is noted of a stream whose document is known, or waits
// on an event that does not decode.
func (e *Engine) declinedThrough(k tieKey, known tie, rev uint64) {
	if known.doc == "" && !known.undecoded && known.scanned == rev {
		known.scanned = rev + 1
		e.ties.Add(k, known)
	}
}

// forgetUndecodedTie forgets what the engine knows of stream in p when it
// is an event that did not decode: a replay, once the fix is deployed, may
// have applied it, and the stream's later events are then routed by it.
func (e *Engine) forgetUndecodedTie(p Definition, stream string) {
	k := tieKey{p.Name(), stream}
	if known, ok := e.ties.Peek(k); ok && known.undecoded {
		e.ties.Remove(k)
	}
}

// noteRouted notes that p's router routed ev, of a stream p ties, to
// document id, when it is the earliest of its stream the engine has seen:
// the stream may be deleted by the time a declined event of it asks
// (streamDocument), and a rebuild or a catch-up handles a stream's routed
// event before the declined ones that follow. They are kept apart from
// what reads of streams found, which they would otherwise push out.
//
// An event routed to another document than the earliest seen of its
// stream is said in the log, once a stream: a tie does not move, so the
// events the router declines after it still go to the first document (a
// meter moved to another substation would have its readings counted at
// the old one).
func (e *Engine) noteRouted(p Definition, ev Event, id string) {
	k := tieKey{p.Name(), ev.StreamID}
	if seen, ok := e.routedSeen.Peek(k); ok && seen.at <= ev.StreamRevision {
		if seen.doc != id && !seen.moved {
			seen.moved = true
			e.routedSeen.Add(k, seen)
			e.logger.Warn("an event of a tied stream is routed to another document than the stream's first routed event: a tie does not move, "+
				"so the events of the stream its router declines still go to the first document; if the stream moves between documents, "+
				"let each of its events name its document (the write side can put it in the metadata) instead of tying the stream, "+
				"under a strategy that tracks events, not streams (HandledIDs)",
				"projection", p.Name(), "stream", ev.StreamID, "revision", ev.StreamRevision, "routed to", id, "tied to", seen.doc, "at", seen.at)
		}
		return
	}
	e.routedSeen.Add(k, tie{doc: id, at: ev.StreamRevision})
}

// streamDocument returns what the engine knows of the document ev's stream
// feeds in p, by the stream's events before ev: the first one p's router
// routes, read from the event store under the engine's retry policy (once a
// process for a stream, while the engine remembers it).
func (e *Engine) streamDocument(ctx context.Context, p Definition, ev Event) (tie, error) {
	k := tieKey{p.Name(), ev.StreamID}
	known, _ := e.ties.Get(k)
	if known.doc == "" && !known.undecoded && known.scanned < ev.StreamRevision {
		found, err := retry.DoValue(ctx, e.policy, func(ctx context.Context) (tie, error) {
			return e.readTie(ctx, p, ev.StreamID, known.scanned, ev.StreamRevision)
		}, e.retryOptions()...)
		if err != nil {
			return tie{}, fmt.Errorf("%w %q: %w", errTieRead, ev.StreamID, err)
		}
		if seen, ok := e.routedSeen.Peek(k); ok && seen.at < ev.StreamRevision && (found.doc == "" && !found.undecoded || found.at > seen.at) {
			// The routed event seen is gone from the stream (deleted, and
			// written again or not; truncated): the read could not find
			// it, and it is the stream's first routed event, as in the log.
			found.doc, found.at, found.undecoded = seen.doc, seen.at, false
		}
		known = found
		e.ties.Add(k, known)
	}
	return known, nil
}

// readTie reads stream from revision from up to before, for the first
// event p's router routes (an event whose payload does not decode counts
// where the engine would route it without its payload; one whose document
// its router cannot tell without it, of a type p handles, ends the read
// undecoded).
func (e *Engine) readTie(ctx context.Context, p Definition, stream string, from, before uint64) (tie, error) {
	found := tie{scanned: from}
	err := e.readStream(ctx, stream, from, func(ev Event) error {
		if ev.StreamRevision >= before {
			return ErrStopRead
		}
		switch to, ok, undecoded := e.routeInStream(p, ev); {
		case ok:
			found = tie{doc: to, at: ev.StreamRevision}
			return ErrStopRead
		case undecoded:
			found = tie{at: ev.StreamRevision, scanned: ev.StreamRevision, undecoded: true}
			return ErrStopRead
		}
		found.scanned = ev.StreamRevision + 1
		return nil
	})
	if err != nil && !e.deleted(ctx, stream) {
		return tie{}, err
	}
	if err != nil {
		// Deleted since (tombstoned, or soft-deleted with nothing left):
		// none of its events can say where it goes, but those the engine
		// saw routed (streamDocument); what was known before the read (none
		// of the revisions before from routes) still holds.
		return tie{gone: true, scanned: from}, nil
	}
	if found.doc == "" && !found.undecoded {
		found.scanned = max(found.scanned, before)
	}
	return found, nil
}

// deleted reports whether stream has no events left to read (its read
// failed because it is gone, not because the event store did not answer).
func (e *Engine) deleted(ctx context.Context, stream string) bool {
	_, err := e.streamHistory().FirstRevision(ctx, stream)
	return errors.Is(err, ErrStreamDeleted)
}

// routeInStream routes ev, read from its stream, in p by its router alone,
// as the engine routes a delivered event: an event whose payload does not
// decode goes where the router sends it both without a payload and with the
// zero one. undecoded: the engine fails the event, and a fix of it may name
// the stream's document: its router fails on it (an empty id, a field it
// lacks), or it does not decode, p handles its type, and the router's
// answers differ, or it declines both and may read the payload.
func (e *Engine) routeInStream(p Definition, ev Event) (id string, ok, undecoded bool) {
	decoded, err := e.registry.Decode(ev)
	if err == nil {
		id, ok, err := p.Route(decoded)
		if err != nil {
			return "", false, true
		}
		return id, ok, false
	}
	zero := ev
	zero.Payload, _ = e.registry.zero(ev)
	id, ok, trusted, _ := routeUndecoded(p.Route, ev, zero)
	// "Not mine" of an event it cannot read is no answer from a router
	// that may read the payload, as on delivery (targetUndecoded).
	answered := trusted && (ok || byEnvelope(p))
	return id, ok && trusted, !answered && handlesType(p, zero.Payload)
}
