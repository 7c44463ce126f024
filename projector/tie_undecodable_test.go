package projector_test

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// An undecodable event of a handled type at the start of a tied stream
// (before any routed event): the router reads the payload, so it cannot be
// routed. It must not go to a document named "".
func TestTieStreams_an_undecodable_first_event_of_a_tied_stream_gets_no_document_of_empty_id(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Block, projector.Skip, projector.Park} {
		s := newStore(t)
		log := projectortest.NewLog(kanbanRegistry())
		card := log.MustAppend(t, cardStreams+"z", projector.Event{Type: "CardAdded", Data: []byte(`{"CardID": "z", "BoardID": `)})
		e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(retry.Default()),
			projector.WithFailurePolicy(pol), projector.WithParker(s), projector.WithStreamReader(newStreams(card...)))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		rs, err := e.Handle(ctx, card[0])
		t.Logf("policy %v: %+v %v", pol, rs, err)
		for _, r := range rs {
			if r.Document == "" && r.Outcome != projector.Failed && r.Outcome != projector.Parked && r.Outcome != projector.Skipped {
				t.Errorf("policy %v: result for empty document: %+v", pol, r)
			}
		}
		var got board
		if found, _, err := projector.ReadDocument(ctx, s, boards(), "", &got); err != nil || found {
			t.Errorf("policy %v: a document with id \"\" was written: %+v (%v)", pol, got, err)
		}
		parked, _ := s.Parked(ctx, "kanban_boards")
		t.Logf("parked: %+v", parked)
	}
}

// cardAddedV1 is the stored form of CardAdded before its board was named
// BoardID.
type cardAddedV1 struct{ CardID, Board, Title string }

// kanbanRegistryUpcasting is kanbanRegistry with CardAdded also stored as
// "CardAddedV1", upcast by up.
func kanbanRegistryUpcasting(up func(cardAddedV1) (CardAdded, error)) *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[BoardOpened](r, "BoardOpened")
	projector.Register[CardAdded](r, "CardAdded", projector.Upcast("CardAddedV1", up))
	projector.Register[CardRenamed](r, "CardRenamed")
	projector.Register[CardMoved](r, "CardMoved")
	projector.Register[CardArchived](r, "CardArchived")
	return r
}

// The first event of a tied stream does not decode (its upcaster fails),
// and its router reads the payload, so the stream's document is unknown. A
// later event the router declines must not be left alone as an event of a
// stream that is not the projection's: it fails too, and a replay in log
// order after the fix brings the document both. So too with a router that
// declines an event naming no board (as it declines the zero payload): its
// "not mine" of an event it cannot read is no answer.
func TestTieStreams_a_declined_event_after_an_undecodable_first_event_waits_for_it(t *testing.T) {
	for name, boards := range map[string]func() *projector.Projection[board]{"routes the empty id": boards, "declines the empty id": boardsDecliningEmpty} {
		t.Run(name, func(t *testing.T) { declinedAfterUndecodable(t, boards) })
	}
}

func declinedAfterUndecodable(t *testing.T, boards func() *projector.Projection[board]) {
	broken := func(cardAddedV1) (CardAdded, error) { return CardAdded{}, errors.New("the upcaster is wrong") }
	fixed := func(v cardAddedV1) (CardAdded, error) {
		return CardAdded{CardID: v.CardID, BoardID: v.Board, Title: v.Title}, nil
	}
	for _, pol := range []projector.FailurePolicy{projector.Park, projector.Hold, projector.Block} {
		s := newStore(t)
		log := projectortest.NewLog(kanbanRegistry())
		evs := log.MustAppend(t, cardStreams+"z",
			projector.Event{Type: "CardAddedV1", Data: []byte(`{"CardID": "z", "Board": "b1", "Title": "t"}`)},
			projector.Event{Type: "CardMoved", Data: []byte(`{"CardID": "z", "Column": "done"}`)},
			projector.Event{Type: "CardArchived", Data: []byte(`{"CardID": "z"}`)})
		engine := func(up func(cardAddedV1) (CardAdded, error)) *projector.Engine {
			e, err := projector.NewEngine(s, kanbanRegistryUpcasting(up), []projector.Definition{boards()}, projector.WithRetry(retry.Default()),
				projector.WithFailurePolicy(pol), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		ctx := context.Background()
		e := engine(broken)
		for i, ev := range evs {
			rs, err := e.Handle(ctx, ev)
			if pol == projector.Block {
				if err == nil {
					t.Errorf("block: event %d was not refused: %+v", i, rs)
				}
				break
			}
			if err != nil || len(rs) != 1 || rs[0].Outcome != projector.Parked {
				t.Errorf("%v: event %d: %+v, %v; want it parked", pol, i, rs, err)
			}
		}
		if pol == projector.Block {
			continue
		}
		// Untied, the declined events fail as well, whichever document
		// the first one names once it decodes.
		untied, err := projector.NewEngine(newStore(t), kanbanRegistryUpcasting(broken), []projector.Definition{boardsTying()}, projector.WithRetry(retry.Default()),
			projector.WithFailurePolicy(pol), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range evs {
			if rs, err := untied.Handle(ctx, ev); err != nil || len(rs) != 1 || rs[0].Outcome == projector.Applied {
				t.Errorf("%v, untied: event %d: %+v, %v; want it failed", pol, i, rs, err)
			}
		}
		parked, err := s.Parked(ctx, "kanban_boards")
		if err != nil || len(parked) != len(evs) {
			t.Fatalf("%v: parked %+v, %v; want the stream's %d events", pol, parked, err, len(evs))
		}
		e = engine(fixed)
		for _, pe := range parked {
			if r := e.Replay(ctx, pe); r.Outcome != projector.Applied {
				t.Errorf("%v: replay of %d@%s: %+v", pol, pe.Event.StreamRevision, pe.Event.StreamID, r)
			}
		}
		var got board
		if found, _, err := projector.ReadDocument(ctx, s, boards(), "b1", &got); err != nil || !found ||
			!reflect.DeepEqual(got.Cards["z"], boardCard{Title: "t", Column: "done", Moves: 1, Archived: true}) {
			t.Errorf("%v: board b1 %+v (found %v, %v)", pol, got, found, err)
		}
	}
}

// The first event of a tied stream decodes, but its router cannot name its
// document from it (an empty board: a bug of the write side, or of an
// upcaster). The later events its router declines are not left alone, as
// events of a stream that is not the projection's: they fail with it, and
// a replay in log order after the fix (an upcaster that fills the board)
// brings the document all of them.
func TestTieStreams_a_declined_event_after_an_unroutable_first_event_waits_for_it(t *testing.T) {
	asIs := func(v cardAddedV1) (CardAdded, error) {
		return CardAdded{CardID: v.CardID, BoardID: v.Board, Title: v.Title}, nil
	}
	filled := func(v cardAddedV1) (CardAdded, error) {
		v.Board = cmp.Or(v.Board, "b1")
		return asIs(v)
	}
	for _, pol := range []projector.FailurePolicy{projector.Park, projector.Hold} {
		s := newStore(t)
		log := projectortest.NewLog(kanbanRegistry())
		evs := log.MustAppend(t, cardStreams+"y",
			projector.Event{Type: "CardAddedV1", Data: []byte(`{"CardID": "y", "Board": "", "Title": "t"}`)},
			projector.Event{Type: "CardMoved", Data: []byte(`{"CardID": "y", "Column": "done"}`)},
			projector.Event{Type: "CardArchived", Data: []byte(`{"CardID": "y"}`)})
		engine := func(up func(cardAddedV1) (CardAdded, error)) *projector.Engine {
			e, err := projector.NewEngine(s, kanbanRegistryUpcasting(up), []projector.Definition{boards()}, projector.WithRetry(retry.Default()),
				projector.WithFailurePolicy(pol), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		ctx := context.Background()
		e := engine(asIs)
		for i, ev := range evs {
			if rs, err := e.Handle(ctx, ev); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Parked {
				t.Errorf("%v: event %d: %+v, %v; want it parked", pol, i, rs, err)
			}
		}
		parked, err := s.Parked(ctx, "kanban_boards")
		if err != nil || len(parked) != len(evs) {
			t.Fatalf("%v: parked %+v, %v; want the stream's %d events", pol, parked, err, len(evs))
		}
		e = engine(filled)
		for _, pe := range parked {
			if r := e.Replay(ctx, pe); r.Outcome != projector.Applied {
				t.Errorf("%v: replay of %d@%s: %+v", pol, pe.Event.StreamRevision, pe.Event.StreamID, r)
			}
		}
		var got board
		if found, _, err := projector.ReadDocument(ctx, s, boards(), "b1", &got); err != nil || !found ||
			!reflect.DeepEqual(got.Cards["y"], boardCard{Title: "t", Column: "done", Moves: 1, Archived: true}) {
			t.Errorf("%v: board b1 %+v (found %v, %v)", pol, got, found, err)
		}
	}
}

// cardCommented is an event of card streams the board summary has no
// handler for.
type cardCommented struct{ CardID, Text string }

// The first event of a tied stream under RevisionMap does not decode, and
// the next one is of a type the projection does not handle: while the
// stream's document is unknown it is parked with the others, not left
// alone, since the document needs every revision of the stream. A replay
// in log order after the fix brings the document the whole stream; before,
// the replay of the event after it waited for its revision forever.
func TestTieStreams_an_unhandled_event_after_an_undecodable_first_event_is_replayed_in_order(t *testing.T) {
	broken := func(cardAddedV1) (CardAdded, error) { return CardAdded{}, errors.New("the upcaster is wrong") }
	fixed := func(v cardAddedV1) (CardAdded, error) {
		return CardAdded{CardID: v.CardID, BoardID: v.Board, Title: v.Title}, nil
	}
	withComments := func(up func(cardAddedV1) (CardAdded, error)) *projector.Registry {
		r := kanbanRegistryUpcasting(up)
		projector.Register[cardCommented](r, "CardCommented")
		return r
	}
	for _, pol := range []projector.FailurePolicy{projector.Park, projector.Hold} {
		s := newStore(t)
		log := projectortest.NewLog(withComments(fixed))
		evs := log.MustAppend(t, cardStreams+"x",
			projector.Event{Type: "CardAddedV1", Data: []byte(`{"CardID": "x", "Board": "b1", "Title": "t"}`)},
			projector.Event{Type: "CardCommented", Data: []byte(`{"CardID": "x", "Text": "hi"}`)},
			projector.Event{Type: "CardMoved", Data: []byte(`{"CardID": "x", "Column": "done"}`)})
		for i := range evs {
			evs[i].Payload = nil // delivered undecoded, as from a server
		}
		engine := func(up func(cardAddedV1) (CardAdded, error)) *projector.Engine {
			e, err := projector.NewEngine(s, withComments(up), []projector.Definition{boards()}, projector.WithRetry(retry.Default()),
				projector.WithFailurePolicy(pol), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		ctx := context.Background()
		e := engine(broken)
		for i, ev := range evs {
			if rs, err := e.Handle(ctx, ev); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Parked {
				t.Errorf("%v: event %d: %+v, %v; want it parked", pol, i, rs, err)
			}
		}
		parked, err := s.Parked(ctx, "kanban_boards")
		if err != nil || len(parked) != len(evs) {
			t.Fatalf("%v: parked %+v, %v; want the stream's %d events", pol, parked, err, len(evs))
		}
		e = engine(fixed)
		for _, pe := range parked {
			if r := e.Replay(ctx, pe); r.Outcome != projector.Applied {
				t.Errorf("%v: replay of %d@%s: %+v", pol, pe.Event.StreamRevision, pe.Event.StreamID, r)
			}
		}
		var got board
		if found, _, err := projector.ReadDocument(ctx, s, boards(), "b1", &got); err != nil || !found ||
			!reflect.DeepEqual(got.Cards["x"], boardCard{Title: "t", Column: "done", Moves: 1}) {
			t.Errorf("%v: board b1 %+v (found %v, %v)", pol, got, found, err)
		}
	}
}
