package projector_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// cardMovedV1To is CardMoved as stored before: the column was "To".
type cardMovedV1To struct{ CardID, To string }

// poisonFault is where the poison comes from.
type poisonFault int

const (
	faultUpcaster poisonFault = iota // the upcaster of CardMovedV1 fails
	faultPanic                       // the CardRenamed handler panics
	faultError                       // the CardRenamed handler returns an error
)

func (f poisonFault) String() string { return [...]string{"upcaster", "panic", "error"}[f] }

func poisonRegistry(broken *atomic.Bool) *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[BoardOpened](r, "BoardOpened")
	projector.Register[CardAdded](r, "CardAdded")
	projector.Register[CardRenamed](r, "CardRenamed")
	projector.Register[CardMoved](r, "CardMoved", projector.Upcast("CardMovedV1", func(v cardMovedV1To) (CardMoved, error) {
		if broken.Load() && v.To == "poison" {
			return CardMoved{}, errors.New("upcaster bug")
		}
		return CardMoved{CardID: v.CardID, Column: v.To}, nil
	}))
	projector.Register[CardArchived](r, "CardArchived")
	return r
}

// brokenCardAdded is the kanban registry whose upcaster of CardAddedV1
// fails while broken.
func brokenCardAdded(broken *atomic.Bool) *projector.Registry {
	return kanbanRegistryUpcasting(func(v cardAddedV1) (CardAdded, error) {
		if broken.Load() {
			return CardAdded{}, errors.New("upcaster bug")
		}
		return CardAdded{CardID: v.CardID, BoardID: v.Board, Title: v.Title}, nil
	})
}

// withCard is s with f applied to its card id, on a copy of its cards: a
// handler that fails after it leaves the state it was given as it was.
func withCard(s board, id string, f func(*boardCard)) board {
	cards := make(map[string]boardCard, len(s.Cards)+1)
	for k, v := range s.Cards {
		cards[k] = v
	}
	c := cards[id]
	f(&c)
	cards[id] = c
	s.Cards = cards
	return s
}

// poisonBoards is the tied board summary with a bug (while broken) on a
// card renamed "poison".
func poisonBoards(broken *atomic.Bool, fault poisonFault) *projector.Projection[board] {
	p := projector.New[board]("kanban_boards", func(ev projector.Event) (string, bool) {
		switch pl := ev.Payload.(type) {
		case BoardOpened:
			return pl.BoardID, true
		case CardAdded:
			return pl.BoardID, true
		}
		return "", false
	}).Idempotency(projector.RevisionMap()).TieStreams(cardStreams)
	projector.On(p, func(s board, e BoardOpened) (board, error) { s.Name = e.Name; return s, nil })
	projector.On(p, func(s board, e CardAdded) (board, error) {
		return withCard(s, e.CardID, func(c *boardCard) { c.Title, c.Column = e.Title, "todo" }), nil
	})
	projector.On(p, func(s board, e CardRenamed) (board, error) {
		if broken.Load() && e.Title == "poison" {
			if fault == faultPanic {
				panic("handler bug")
			}
			if fault == faultError {
				return s, errors.New("handler bug")
			}
		}
		return withCard(s, e.CardID, func(c *boardCard) { c.Title = e.Title }), nil
	})
	projector.On(p, func(s board, e CardMoved) (board, error) {
		return withCard(s, e.CardID, func(c *boardCard) { c.Column = e.Column; c.Moves++ }), nil
	})
	projector.On(p, func(s board, e CardArchived) (board, error) {
		return withCard(s, e.CardID, func(c *boardCard) { c.Archived = true }), nil
	})
	return p
}

// poisonKanban is two boards; b1 is poisoned at card c1's revision 1 (its
// events after that, of c1, c2 and the board's own stream, interleave),
// b2 is clean. It returns the events undecoded, as delivered.
func poisonKanban(t *testing.T, r *projector.Registry, fault poisonFault) []projector.Event {
	t.Helper()
	var poison any = CardRenamed{CardID: "c1", Title: "poison"}
	if fault == faultUpcaster {
		poison = projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "c1", "To": "poison"}`)}
	}
	return rawLog(t, r, func(add func(string, ...any)) {
		add(boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
		add(boardStreams+"b2", BoardOpened{BoardID: "b2", Name: "two"})
		add(cardStreams+"c1", CardAdded{CardID: "c1", BoardID: "b1", Title: "c1"})
		add(cardStreams+"c3", CardAdded{CardID: "c3", BoardID: "b2", Title: "c3"})
		add(cardStreams+"c1", poison)
		add(cardStreams+"c2", CardAdded{CardID: "c2", BoardID: "b1", Title: "c2"})
		add(cardStreams+"c3", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "c3", "To": "doing"}`)})
		add(cardStreams+"c2", CardMoved{CardID: "c2", Column: "doing"})
		add(cardStreams+"c1", CardRenamed{CardID: "c1", Title: "c1 again"})
		add(boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one renamed"})
		add(cardStreams+"c1", CardMoved{CardID: "c1", Column: "done"})
		add(cardStreams+"c3", CardArchived{CardID: "c3"})
		add(cardStreams+"c2", CardArchived{CardID: "c2"})
	})
}

func decodeAll(t *testing.T, r *projector.Registry, evs []projector.Event) []projector.Event {
	t.Helper()
	out := make([]projector.Event, len(evs))
	for i, ev := range evs {
		d, err := r.Decode(ev)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = d
	}
	return out
}

// Hold of a multi-stream document: the poison and every later event of b1,
// from all its streams, are held in order; b2 keeps up; ReplayHeld after
// the fix gives the fold. Batch and per-event paths, three fault kinds.
func TestHold_a_multistream_document_holds_all_its_streams_and_replay_gives_the_fold(t *testing.T) {
	for _, fault := range []poisonFault{faultUpcaster, faultPanic, faultError} {
		for _, batched := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/batched=%v", fault, batched), func(t *testing.T) {
				ctx := context.Background()
				var broken atomic.Bool
				broken.Store(true)
				r := poisonRegistry(&broken)
				p := poisonBoards(&broken, fault)
				raw := poisonKanban(t, r, fault)
				s := newStore(t)
				e := faultEngine(t, s, r, projector.Hold, raw, p)
				results := deliver(e, raw, batched)
				for i, rs := range results {
					for _, res := range rs {
						if res.Outcome == projector.Failed {
							t.Errorf("event %d (%s@%d): failed: %v", i, raw[i].StreamID, raw[i].StreamRevision, res.Err)
						}
					}
					t.Logf("event %d %s@%d %s: %+v", i, raw[i].StreamID, raw[i].StreamRevision, raw[i].Type, rs)
				}
				// b2: the fold of its events.
				broken.Store(false)
				fixedR := poisonRegistry(&broken)
				docs := p.Documents(decodeAll(t, fixedR, raw))
				if err := projectortest.CheckDocument(ctx, s, p, "b2", docs["b2"]); err != nil {
					t.Errorf("b2: %v", err)
				}
				broken.Store(true)
				parked, held, _ := parkedRecords(t, s, "kanban_boards")
				var got []string
				for _, pe := range parked {
					got = append(got, fmt.Sprintf("%s@%d held=%v doc=%s", pe.StreamID, pe.StreamRevision, pe.Held, pe.Document))
				}
				// b1's events from the poison (position 5) on: 6 events.
				var want []string
				for _, ev := range raw[4:] {
					if ev.StreamID == cardStreams+"c3" {
						continue
					}
					want = append(want, fmt.Sprintf("%s@%d held=true doc=b1", ev.StreamID, ev.StreamRevision))
				}
				if len(got) != len(want) {
					t.Errorf("records:\n got %v\nwant (any order) %v", got, want)
				}
				// The held document: before the poison.
				var b1 board
				projector.ReadDocument(ctx, s, p, "b1", &b1)
				t.Logf("b1 while held: %+v", b1)
				broken.Store(false)
				rep := e.ReplayHeld(ctx, "kanban_boards", held)
				if rep.Err != nil || len(rep.Left) != 0 {
					t.Fatalf("replay: %d applied, %d left: %v", len(rep.Applied), len(rep.Left), rep.Err)
				}
				want1, err := p.Fold(docs["b1"]...)
				if err != nil {
					t.Fatal(err)
				}
				var after board
				projector.ReadDocument(ctx, s, p, "b1", &after)
				if !reflect.DeepEqual(after, want1) {
					t.Errorf("b1 after replay:\n got %+v\nwant %+v", after, want1)
				}
			})
		}
	}
}

// Skip and park of a multi-stream document: b1 moves past the poison only
// (the fold of its other events), b2 keeps up, under park the record names
// b1 and the error; a replay after the fix applies it.
func TestSkipPark_a_multistream_document_moves_past_the_poison_only(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Skip, projector.Park} {
		for _, fault := range []poisonFault{faultUpcaster, faultPanic, faultError} {
			for _, batched := range []bool{true, false} {
				t.Run(fmt.Sprintf("%v/%v/batched=%v", pol, fault, batched), func(t *testing.T) {
					ctx := context.Background()
					var broken atomic.Bool
					broken.Store(true)
					r := poisonRegistry(&broken)
					p := poisonBoards(&broken, fault)
					raw := poisonKanban(t, r, fault)
					s := newStore(t)
					e := faultEngine(t, s, r, pol, raw, p)
					results := deliver(e, raw, batched)
					for i, rs := range results {
						want := projector.Applied
						if i == 4 {
							want = map[projector.FailurePolicy]projector.Outcome{projector.Skip: projector.Skipped, projector.Park: projector.Parked}[pol]
						}
						if len(rs) != 1 || rs[0].Outcome != want {
							t.Errorf("event %d (%s@%d): %+v, want %v", i, raw[i].StreamID, raw[i].StreamRevision, rs, want)
						}
					}
					broken.Store(false)
					dec := decodeAll(t, poisonRegistry(&broken), raw)
					docs := p.Documents(append(append([]projector.Event{}, dec[:4]...), dec[5:]...))
					for _, id := range []string{"b1", "b2"} {
						if err := projectortest.CheckDocument(ctx, s, p, id, docs[id]); err != nil {
							t.Errorf("%s: %v", id, err)
						}
					}
					if pol != projector.Park {
						return
					}
					parked, err := s.Parked(ctx, "kanban_boards")
					if err != nil || len(parked) != 1 || parked[0].Document != "b1" || parked[0].StreamRevision != 1 {
						t.Fatalf("parked %+v (%v), want c1@1 against b1", parked, err)
					}
					if res := e.Replay(ctx, parked[0]); res.Outcome != projector.Applied {
						t.Errorf("replay: %+v", res)
					}
				})
			}
		}
	}
}

// A hold outlives the process: a new engine (a restart) keeps holding the
// document's later events, from every stream, batched or not.
func TestHold_a_multistream_document_stays_held_across_a_restart(t *testing.T) {
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			var broken atomic.Bool
			broken.Store(true)
			r := poisonRegistry(&broken)
			p := poisonBoards(&broken, faultUpcaster)
			raw := poisonKanban(t, r, faultUpcaster)
			s := newStore(t)
			deliver(faultEngine(t, s, r, projector.Hold, raw, p), raw[:5], batched) // up to the poison
			rest := deliver(faultEngine(t, s, r, projector.Hold, raw, p), raw[5:], batched)
			for i, rs := range rest {
				ev := raw[5+i]
				want := projector.Held
				if ev.StreamID == cardStreams+"c3" {
					want = projector.Applied
				}
				if len(rs) != 1 || rs[0].Outcome != want {
					t.Errorf("after the restart, %s@%d: %+v, want %v", ev.StreamID, ev.StreamRevision, rs, want)
				}
			}
		})
	}
}

// Hold in a tied stream: an event that does not decode is held against
// the stream's tied document b1; once fixed its router names b2. ReplayHeld
// must not apply it to b1 (it would fold another board's card into b1): it
// refuses, saying to rebuild, as Replay does for a parked one.
func TestReplayHeld_refuses_an_event_the_fixed_upcaster_routes_elsewhere(t *testing.T) {
	ctx := context.Background()
	var broken atomic.Bool
	broken.Store(true)
	r := brokenCardAdded(&broken)
	raw := rawLog(t, r, func(add func(string, ...any)) {
		add(boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
		add(boardStreams+"b2", BoardOpened{BoardID: "b2", Name: "two"})
		add(cardStreams+"z", CardAdded{CardID: "z", BoardID: "b1", Title: "z"},
			projector.Event{Type: "CardAddedV1", Data: []byte(`{"CardID": "y", "Board": "b2", "Title": "y"}`)},
			CardMoved{CardID: "z", Column: "done"})
	})
	p := boards()
	s := newStore(t)
	e := faultEngine(t, s, r, projector.Hold, raw, p)
	for i, rs := range deliver(e, raw, false) {
		t.Logf("%s@%d: %+v", raw[i].StreamID, raw[i].StreamRevision, rs)
	}
	parked, _, _ := parkedRecords(t, s, p.Name())
	broken.Store(false)
	rep := e.ReplayHeld(ctx, p.Name(), parked)
	t.Logf("replay: %d applied, %d left, %v", len(rep.Applied), len(rep.Left), rep.Err)
	var b1 board
	projector.ReadDocument(ctx, s, p, "b1", &b1)
	if _, ok := b1.Cards["y"]; ok {
		t.Errorf("card y, whose event now routes to b2, was folded into b1: %+v (replay err %v)", b1, rep.Err)
	}
}

// The batch version of TestTieStreams_a_declined_event_after_an_undecodable_first_event_waits_for_it,
// with other documents' events in the batch.
func TestTieStreams_a_replay_in_the_same_engine_routes_the_events_behind_an_undecodable_first_one(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Park, projector.Hold, projector.Skip} {
		t.Run(pol.String(), func(t *testing.T) {
			ctx := context.Background()
			var broken atomic.Bool
			broken.Store(true)
			r := brokenCardAdded(&broken)
			raw := rawLog(t, r, func(add func(string, ...any)) {
				add(boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
				add(boardStreams+"b2", BoardOpened{BoardID: "b2", Name: "two"})
				add(cardStreams+"z", projector.Event{Type: "CardAddedV1", Data: []byte(`{"CardID": "z", "Board": "b1", "Title": "t"}`)})
				add(cardStreams+"x", CardAdded{CardID: "x", BoardID: "b1", Title: "x"})
				add(cardStreams+"z", CardMoved{CardID: "z", Column: "done"})
				add(cardStreams+"w", CardAdded{CardID: "w", BoardID: "b2", Title: "w"})
				add(cardStreams+"x", CardMoved{CardID: "x", Column: "doing"})
				add(cardStreams+"z", CardArchived{CardID: "z"})
				add(cardStreams+"w", CardMoved{CardID: "w", Column: "doing"})
			})
			p := boards()
			s := newStore(t)
			e := faultEngine(t, s, r, pol, raw, p)
			res := e.HandleBatch(ctx, raw)
			for i, rs := range res {
				t.Logf("%s@%d: %+v", raw[i].StreamID, raw[i].StreamRevision, rs)
				if raw[i].StreamID == cardStreams+"z" {
					if len(rs) != 1 || rs[0].Outcome == projector.Applied || rs[0].Outcome == projector.Failed {
						t.Errorf("%s@%d: %+v; want it failed under the policy", raw[i].StreamID, raw[i].StreamRevision, rs)
					}
				} else if len(rs) != 1 || rs[0].Outcome != projector.Applied {
					t.Errorf("%s@%d: %+v; want applied", raw[i].StreamID, raw[i].StreamRevision, rs)
				}
			}
			broken.Store(false)
			dec := decodeAll(t, r, raw)
			var notZ []projector.Event
			for _, ev := range dec {
				if ev.StreamID != cardStreams+"z" {
					notZ = append(notZ, ev)
				}
			}
			docs := p.Documents(notZ)
			for _, id := range []string{"b1", "b2"} {
				if err := projectortest.CheckDocument(ctx, s, p, id, docs[id]); err != nil {
					t.Errorf("%s before the replay: %v", id, err)
				}
			}
			if pol == projector.Skip {
				return
			}
			parked, err := s.Parked(ctx, p.Name())
			if err != nil || len(parked) != 3 {
				t.Fatalf("parked %d (%v), want z's 3 events", len(parked), err)
			}
			// Replayed by the engine that parked them: it routes the
			// stream's later events by its first once that one applies.
			for _, pe := range parked {
				t.Logf("record %s@%d doc=%q", pe.StreamID, pe.StreamRevision, pe.Document)
				if r := e.Replay(ctx, pe); r.Outcome != projector.Applied {
					t.Errorf("replay %s@%d: %+v", pe.StreamID, pe.StreamRevision, r)
				}
			}
			var got board
			projector.ReadDocument(ctx, s, p, "b1", &got)
			if got.Cards["z"] != (boardCard{Title: "t", Column: "done", Moves: 1, Archived: true}) {
				t.Errorf("b1 after the replay: %+v", got)
			}
		})
	}
}
