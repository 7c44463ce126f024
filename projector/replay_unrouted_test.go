package projector_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// cardsByPayload is one document per card, routed by the payload's CardID, under
// the revision gate.
func cardsByPayload() *projector.Projection[board] {
	p := projector.New[board]("cards", func(ev projector.Event) (string, bool) {
		switch pl := ev.Payload.(type) {
		case CardAdded:
			return pl.CardID, true
		case CardMoved:
			return pl.CardID, true
		case CardRenamed:
			return pl.CardID, true
		}
		return "", false
	})
	projector.On(p, func(s board, e CardAdded) (board, error) {
		return withCard(s, e.CardID, func(c *boardCard) { c.Title, c.Column = e.Title, "todo" }), nil
	})
	projector.On(p, func(s board, e CardRenamed) (board, error) {
		return withCard(s, e.CardID, func(c *boardCard) { c.Title = e.Title }), nil
	})
	projector.On(p, func(s board, e CardMoved) (board, error) {
		return withCard(s, e.CardID, func(c *boardCard) { c.Moves++ }), nil // order-insensitive
	})
	return p
}

// An upcaster that fails on an event whose router reads the payload: the
// event cannot be routed. Under park and hold it must cost only its
// document (others keep up), the later events of its stream must not be
// lost, and a replay after the fix must give the fold.
func TestPoison_a_failing_upcaster_of_an_event_routed_by_its_payload_costs_its_document_only(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Park, projector.Hold, projector.Skip} {
		for _, batched := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/batched=%v", pol, batched), func(t *testing.T) {
				ctx := context.Background()
				var broken atomic.Bool
				broken.Store(true)
				r := poisonRegistry(&broken)
				raw := rawLog(t, r, func(add func(string, ...any)) {
					add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"})
					add(cardStreams+"y", CardAdded{CardID: "y", Title: "y"})
					add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
					add(cardStreams+"y", CardMoved{CardID: "y", Column: "doing"})
					add(cardStreams+"z", CardRenamed{CardID: "z", Title: "z2"}, CardMoved{CardID: "z", Column: "done"})
					add(cardStreams+"y", CardRenamed{CardID: "y", Title: "y2"})
				})
				p := cardsByPayload()
				s := newStore(t)
				e := faultEngine(t, s, r, pol, raw, p)
				results := deliver(e, raw, batched)
				for i, rs := range results {
					t.Logf("event %d %s@%d %s: %+v", i, raw[i].StreamID, raw[i].StreamRevision, raw[i].Type, rs)
					for _, res := range rs {
						if res.Outcome == projector.Failed {
							t.Errorf("event %d: failed: %v", i, res.Err)
						}
					}
				}
				if pol == projector.Hold {
					// README: hold keeps the document before the failed
					// event; the engine knew the stream feeds z.
					for _, i := range []int{4, 5} {
						if rs := results[i]; len(rs) != 1 || rs[0].Outcome != projector.Held {
							t.Errorf("hold: z's later event %d: %+v, want it held behind the poison", i, rs)
						}
					}
				}
				broken.Store(false)
				dec := decodeAll(t, r, raw)
				docs := p.Documents(dec)
				if err := projectortest.CheckDocument(ctx, s, p, "y", docs["y"]); err != nil {
					t.Errorf("y: %v", err)
				}
				parked, _, _ := parkedRecords(t, s, "cards")
				if pol == projector.Skip {
					var noPoison []projector.Event
					for _, ev := range docs["z"] {
						if ev.Type != "CardMovedV1" {
							noPoison = append(noPoison, ev)
						}
					}
					want, _ := p.Fold(noPoison...)
					var got board
					projector.ReadDocument(ctx, s, p, "z", &got)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("z under skip:\n got %+v\nwant %+v", got, want)
					}
					return
				}
				var held []projector.ParkedEvent
				for _, pe := range parked {
					if pe.Held {
						held = append(held, pe)
						continue
					}
					res := e.Replay(ctx, pe)
					t.Logf("replay %s@%d: %+v", pe.StreamID, pe.StreamRevision, res)
					if res.Outcome != projector.Applied {
						t.Errorf("replay %s@%d: %+v", pe.StreamID, pe.StreamRevision, res)
					}
				}
				if len(held) > 0 {
					rep := e.ReplayHeld(ctx, "cards", held)
					if rep.Err != nil || len(rep.Left) != 0 {
						t.Errorf("ReplayHeld: %d applied, %d left: %v", len(rep.Applied), len(rep.Left), rep.Err)
					}
				}
				if err := projectortest.CheckDocument(ctx, s, p, "z", docs["z"]); err != nil {
					t.Errorf("z after the replay: %v", err)
				}
			})
		}
	}
}

// An event that does not decode stays parked until an upcaster that
// repairs or drops its stored form is deployed and replayed (README). The
// fix here drops it (DropEvent): the replay settles it (Applied or
// Duplicate), not fail it for ever, and the document stays the fold; also
// when it is its stream's last event, which no document moved past.
func TestReplay_after_an_upcaster_that_drops_the_event_settles_it(t *testing.T) {
	for _, tc := range []struct{ payloadRouter, last bool }{{true, false}, {false, false}, {true, true}} {
		payloadRouter := tc.payloadRouter
		t.Run(fmt.Sprintf("payloadRouter=%v/last=%v", payloadRouter, tc.last), func(t *testing.T) {
			ctx := context.Background()
			mode := atomic.Int32{} // 0 broken, 1 drops
			reg := func() *projector.Registry {
				r := projector.NewRegistry()
				projector.Register[CardAdded](r, "CardAdded")
				projector.Register[CardRenamed](r, "CardRenamed")
				projector.Register[CardMoved](r, "CardMoved", projector.Upcast("CardMovedV1", func(v cardMovedV1To) (CardMoved, error) {
					if mode.Load() == 0 {
						return CardMoved{}, errors.New("upcaster bug")
					}
					return CardMoved{}, projector.DropEvent
				}))
				return r
			}
			r := reg()
			raw := rawLog(t, r, func(add func(string, ...any)) {
				evs := []any{CardAdded{CardID: "z", Title: "z"}, projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "x"}`)}}
				if !tc.last {
					evs = append(evs, CardRenamed{CardID: "z", Title: "z2"})
				}
				add(cardStreams+"z", evs...)
			})
			p := cardsByPayload()
			if !payloadRouter {
				p = cardsByStream()
			}
			s := newStore(t)
			e := faultEngine(t, s, r, projector.Park, raw, p)
			for _, ev := range raw {
				if _, err := e.Handle(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
			parked, err := s.Parked(ctx, p.Name())
			if err != nil || len(parked) != 1 {
				t.Fatalf("parked %+v %v", parked, err)
			}
			mode.Store(1)
			res := e.Replay(ctx, parked[0])
			if res.Outcome != projector.Applied && res.Outcome != projector.Duplicate {
				t.Errorf("replay after the dropping upcaster: %v: %v", res.Outcome, res.Err)
			}
			if err := projectortest.CheckDocument(ctx, s, p, "z", p.Documents(decodeAll(t, r, raw))["z"]); err != nil {
				t.Error(err)
			}
		})
	}
}

// cardsByStream is cardsByPayload routed by stream name (no payload read).
func cardsByStream() *projector.Projection[board] {
	p := projector.New[board]("cards", projector.StreamSuffix(cardStreams))
	projector.On(p, func(s board, e CardAdded) (board, error) {
		s.Cards = map[string]boardCard{e.CardID: {Title: e.Title, Column: "todo"}}
		return s, nil
	})
	projector.On(p, func(s board, e CardRenamed) (board, error) {
		c := s.Cards[e.CardID]
		c.Title = e.Title
		s.Cards = map[string]boardCard{e.CardID: c}
		return s, nil
	})
	projector.On(p, func(s board, e CardMoved) (board, error) {
		c := s.Cards[e.CardID]
		c.Moves++
		s.Cards = map[string]boardCard{e.CardID: c}
		return s, nil
	})
	return p
}

// Hold when the stream's first event (its document's creation) fails to
// upcast: nothing of the stream is applied; ReplayHeld after the fix
// gives the fold. Stream router and payload router; batched and not.
func TestHold_a_failing_first_event_holds_its_whole_stream(t *testing.T) {
	for _, payloadRouter := range []bool{false, true} {
		for _, batched := range []bool{true, false} {
			t.Run(fmt.Sprintf("payloadRouter=%v/batched=%v", payloadRouter, batched), func(t *testing.T) {
				ctx := context.Background()
				var broken atomic.Bool
				broken.Store(true)
				r := brokenCardAdded(&broken)
				raw := rawLog(t, r, func(add func(string, ...any)) {
					add(cardStreams+"y", CardAdded{CardID: "y", Title: "y"})
					add(cardStreams+"z",
						projector.Event{Type: "CardAddedV1", Data: []byte(`{"CardID": "z", "Board": "b", "Title": "z"}`)},
						CardRenamed{CardID: "z", Title: "z2"}, CardMoved{CardID: "z", Column: "done"})
					add(cardStreams+"y", CardMoved{CardID: "y", Column: "done"})
				})
				p := cardsByPayload()
				if !payloadRouter {
					p = cardsByStream()
				}
				s := newStore(t)
				e := faultEngine(t, s, r, projector.Hold, raw, p)
				results := deliver(e, raw, batched)
				for i, rs := range results {
					t.Logf("event %d %s@%d: %+v", i, raw[i].StreamID, raw[i].StreamRevision, rs)
				}
				var zDoc board
				found, _, _ := projector.ReadDocument(ctx, s, p, "z", &zDoc)
				if found {
					t.Errorf("z written while its creation is held: %+v", zDoc)
				}
				broken.Store(false)
				dec := decodeAll(t, r, raw)
				docs := p.Documents(dec)
				if err := projectortest.CheckDocument(ctx, s, p, "y", docs["y"]); err != nil {
					t.Errorf("y: %v", err)
				}
				_, held, plain := parkedRecords(t, s, p.Name())
				for _, pe := range plain {
					if res := e.Replay(ctx, pe); res.Outcome != projector.Applied {
						t.Errorf("replay %s@%d: %+v", pe.StreamID, pe.StreamRevision, res)
					}
				}
				if len(held) > 0 {
					if rep := e.ReplayHeld(ctx, p.Name(), held); rep.Err != nil || len(rep.Left) != 0 {
						t.Errorf("ReplayHeld: %d applied, %d left: %v", len(rep.Applied), len(rep.Left), rep.Err)
					}
				}
				if err := projectortest.CheckDocument(ctx, s, p, "z", docs["z"]); err != nil {
					t.Errorf("z after the replay: %v", err)
				}
			})
		}
	}
}

// The same under RevisionMap (a board summary, not tied): a routed event
// in the middle of a card stream fails to upcast, is parked with no
// document; after the fix, its replay must apply it to b1.
func TestReplay_an_unrouted_parked_event_of_a_revision_map_applies_it(t *testing.T) {
	for _, tied := range []bool{false, true} {
		t.Run(fmt.Sprintf("tied=%v", tied), func(t *testing.T) {
			ctx := context.Background()
			var broken atomic.Bool
			broken.Store(true)
			r := brokenCardAdded(&broken)
			raw := rawLog(t, r, func(add func(string, ...any)) {
				add(boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
				add(cardStreams+"z",
					CardAdded{CardID: "z", BoardID: "b1", Title: "z"},
					projector.Event{Type: "CardAddedV1", Data: []byte(`{"CardID": "w", "Board": "b1", "Title": "w"}`)},
					CardAdded{CardID: "v", BoardID: "b1", Title: "v"})
			})
			p := boardsTying()
			if tied {
				p = boards()
			}
			s := newStore(t)
			e := faultEngine(t, s, r, projector.Park, raw, p)
			for _, ev := range raw {
				rs, err := e.Handle(ctx, ev)
				t.Logf("%s@%d: %+v %v", ev.StreamID, ev.StreamRevision, rs, err)
			}
			parked, err := s.Parked(ctx, p.Name())
			if err != nil || len(parked) != 1 {
				t.Fatalf("parked %+v %v", parked, err)
			}
			broken.Store(false)
			res := e.Replay(ctx, parked[0])
			t.Logf("replay (doc %q): %+v", parked[0].Document, res)
			var got board
			projector.ReadDocument(ctx, s, p, "b1", &got)
			if _, ok := got.Cards["w"]; !ok {
				t.Errorf("replay said %v, but card w is not on b1: %+v", res.Outcome, got)
			}
		})
	}
}

// The same without any upcaster: a router that panics on one event of a
// stream whose document is known. Parked, then the router is fixed and the
// event replayed: Replay says Applied, and the document has it.
func TestReplay_an_event_whose_router_panicked_applies_it(t *testing.T) {
	ctx := context.Background()
	var broken atomic.Bool
	broken.Store(true)
	p := projector.New[board]("cards", func(ev projector.Event) (string, bool) {
		switch pl := ev.Payload.(type) {
		case CardAdded:
			return pl.CardID, true
		case CardMoved:
			if broken.Load() && pl.Column == "poison" {
				panic("router bug")
			}
			return pl.CardID, true
		}
		return "", false
	})
	projector.On(p, func(s board, e CardAdded) (board, error) {
		s.Cards = map[string]boardCard{e.CardID: {Title: e.Title}}
		return s, nil
	})
	projector.On(p, func(s board, e CardMoved) (board, error) {
		c := s.Cards[e.CardID]
		c.Moves++
		s.Cards = map[string]boardCard{e.CardID: c}
		return s, nil
	})
	r := kanbanRegistry()
	raw := rawLog(t, r, func(add func(string, ...any)) {
		add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"},
			CardMoved{CardID: "z", Column: "poison"}, CardMoved{CardID: "z", Column: "done"})
	})
	s := newStore(t)
	e := faultEngine(t, s, r, projector.Park, raw, p)
	for _, ev := range raw {
		rs, _ := e.Handle(ctx, ev)
		t.Logf("%s@%d: %v", ev.StreamID, ev.StreamRevision, rs[0].Outcome)
	}
	parked, err := s.Parked(ctx, p.Name())
	if err != nil || len(parked) != 1 {
		t.Fatalf("parked %+v %v", parked, err)
	}
	broken.Store(false)
	res := e.Replay(ctx, parked[0])
	if err := projectortest.CheckDocument(ctx, s, p, "z", p.Documents(decodeAll(t, r, raw))["z"]); err != nil {
		t.Errorf("replay said %v; %v", res.Outcome, err)
	}
}

// Under HandledIDs an event parked with no document (its upcaster failed,
// and the router reads the payload) replays into the document its fixed
// upcaster routes it to while that document's window still reaches back
// to it. Once the document has handled more events than its window keeps,
// whether it got the event (delivered again after the fix) cannot be told:
// the replay is refused in one line that says so and names the remedy,
// and the document is left as it is.
func TestReplay_an_unrouted_parked_event_under_handled_ids_past_the_window_is_refused_with_the_remedy(t *testing.T) {
	for _, later := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d later events, window 3", later), func(t *testing.T) {
			ctx := context.Background()
			var broken atomic.Bool
			broken.Store(true)
			r := poisonRegistry(&broken)
			raw := rawLog(t, r, func(add func(string, ...any)) {
				add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"},
					projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
				for range later {
					add(cardStreams+"z", CardMoved{CardID: "z", Column: "doing"})
				}
			})
			p := cardsByPayload().Idempotency(projector.HandledIDs(3))
			s := newStore(t)
			e := faultEngine(t, s, r, projector.Park, raw, p)
			for _, rs := range deliver(e, raw, false) {
				for _, res := range rs {
					if res.Outcome == projector.Failed {
						t.Fatalf("delivery failed: %v", res.Err)
					}
				}
			}
			parked, err := s.Parked(ctx, p.Name())
			if err != nil || len(parked) != 1 || parked[0].Document != "" {
				t.Fatalf("parked %+v %v: want the poison, with no document", parked, err)
			}
			broken.Store(false)
			res := e.Replay(ctx, parked[0])
			var got board
			if _, _, err := projector.ReadDocument(ctx, s, p, "z", &got); err != nil {
				t.Fatal(err)
			}
			if later < 3 {
				if res.Outcome != projector.Applied || got.Cards["z"].Moves != later+1 {
					t.Fatalf("within the window: %v (%v), moves %d; want it applied, %d moves", res.Outcome, res.Err, got.Cards["z"].Moves, later+1)
				}
				return
			}
			if res.Outcome != projector.Failed || !errors.Is(res.Err, projector.ErrOutsideWindow) ||
				!strings.Contains(res.Err.Error(), "parked with no document") || !strings.Contains(res.Err.Error(), "a rebuild of the projection folds it exactly once") {
				t.Fatalf("past the window: %v (%v); want it refused, saying why and what to do", res.Outcome, res.Err)
			}
			if got.Cards["z"].Moves != later {
				t.Errorf("past the window: moves %d, want %d (the document left as it is)", got.Cards["z"].Moves, later)
			}
		})
	}
}
