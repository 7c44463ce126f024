package projector_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// A stream's first routed event after events the projection neither
// routes nor handles has one outcome, whether the engine handles it alone
// or in a batch: with no stream reader, with the stream's start truncated,
// with the stream deleted.
func TestRevisionMap_a_first_routed_event_after_declined_ones_is_handled_alike_one_at_a_time_and_in_a_batch(t *testing.T) {
	quick := retry.Default()
	quick.InitialDelay, quick.MaxRetries = 5*time.Millisecond, 3
	for _, c := range []string{"no stream reader", "truncated start", "deleted stream"} {
		t.Run(c, func(t *testing.T) {
			reg := kanbanRegistry()
			projector.Register[CardDrafted](reg, "CardDrafted")
			log := projectortest.NewLog(reg)
			evs := log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
			evs = append(evs, log.MustAppend(t, cardStreams+"z", CardDrafted{CardID: "z"}, CardAdded{CardID: "z", BoardID: "b1", Title: "zed"})...)
			outcome := func(batch bool) (projector.Outcome, error) {
				s := newStore(t)
				opts := []projector.Option{projector.WithRetry(quick), projector.WithFailurePolicy(projector.Park), projector.WithParker(s)}
				switch c {
				case "truncated start":
					r := &firstRevisions{}
					r.set(cardStreams+"z", 1)
					opts = append(opts, projector.WithStreamReader(r))
				case "deleted stream":
					r := &firstRevisions{}
					r.set(cardStreams+"z", -1)
					opts = append(opts, projector.WithStreamReader(r))
				}
				e, err := projector.NewEngine(s, reg, []projector.Definition{boardsTying()}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if batch {
					out := e.HandleBatch(context.Background(), evs)
					return out[2][0].Outcome, out[2][0].Err
				}
				var last []projector.Result
				for _, ev := range evs {
					last, _ = e.Handle(context.Background(), ev)
				}
				return last[0].Outcome, last[0].Err
			}
			one, oneErr := outcome(false)
			many, manyErr := outcome(true)
			if one != many {
				t.Errorf("CardAdded@1: one at a time %v (%v); in a batch %v (%v)", one, oneErr, many, manyErr)
			}
		})
	}
}

// A card added to board b0, then twice to b1: its second event is a stray
// (b1 never had the stream) and is parked; its third, routed to b1 too,
// is a stray as well, not an event waiting for the second, which was
// refused: it is parked, and nothing stalls.
func TestRevisionMap_a_stream_routed_away_twice_to_the_same_document_is_parked_not_stuck(t *testing.T) {
	for _, batch := range []bool{false, true} {
		for _, tied := range []bool{true, false} {
			t.Run(fmt.Sprint("batch=", batch, ",tied=", tied), func(t *testing.T) {
				p := boardsTying()
				if tied {
					p = boards()
				}
				log := projectortest.NewLog(kanbanRegistry())
				evs := log.MustAppend(t, boardStreams+"b0", BoardOpened{BoardID: "b0", Name: "zero"})
				evs = append(evs, log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})...)
				evs = append(evs, log.MustAppend(t, cardStreams+"c", CardAdded{CardID: "c", BoardID: "b0", Title: "t"},
					CardAdded{CardID: "c", BoardID: "b1", Title: "again"}, CardAdded{CardID: "c", BoardID: "b1", Title: "again"})...)
				quick := retry.Default()
				quick.InitialDelay, quick.MaxRetries = 5*time.Millisecond, 3
				s := newStore(t)
				e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{p}, projector.WithRetry(quick),
					projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
				if err != nil {
					t.Fatal(err)
				}
				var out [][]projector.Result
				if batch {
					out = e.HandleBatch(context.Background(), evs)
				} else {
					for _, ev := range evs {
						rs, _ := e.Handle(context.Background(), ev)
						out = append(out, rs)
					}
				}
				for i, rs := range out {
					for _, r := range rs {
						if r.Outcome == projector.Failed {
							t.Errorf("%s@%d: %v %.200v", evs[i].StreamID, evs[i].StreamRevision, r.Outcome, r.Err)
						}
					}
				}
			})
		}
	}
}

// failingSummary: one document "all" fed by every card stream under
// RevisionMap, whose CardMoved handler changes the state's map in place and
// fails on column "bad".
func failingSummary() *projector.Projection[board] {
	p := projector.New[board]("failing_summary", func(ev projector.Event) (string, bool) {
		switch ev.Payload.(type) {
		case CardAdded, CardMoved:
			return "all", true
		}
		return "", false
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(s board, e CardAdded) (board, error) {
		if s.Cards == nil {
			s.Cards = map[string]boardCard{}
		}
		s.Cards[e.CardID] = boardCard{Title: e.Title, Column: "todo"}
		return s, nil
	})
	projector.On(p, func(s board, e CardMoved) (board, error) {
		if e.Column == "bad" {
			return s, errors.New("bad column")
		}
		c := s.Cards[e.CardID]
		c.Column, c.Moves = e.Column, c.Moves+1
		s.Cards[e.CardID] = c
		return s, nil
	})
	return p
}

// One event whose step fails, late in a document's events of a batch,
// costs the document a split (the events before it folded, on the document
// read again), not a write an event before it (102 before the split).
func TestHandleBatch_a_failing_step_late_in_a_document_costs_it_a_split(t *testing.T) {
	base := newStore(t)
	store := &puttingStore{Store: base}
	log := projectortest.NewLog(kanbanRegistry())
	payloads := []any{CardAdded{CardID: "z", BoardID: "b", Title: "t"}}
	for range 100 {
		payloads = append(payloads, CardMoved{CardID: "z", Column: "doing"})
	}
	payloads = append(payloads, CardMoved{CardID: "z", Column: "bad"}, CardMoved{CardID: "z", Column: "done"})
	evs := log.MustAppend(t, cardStreams+"z", payloads...)
	e, err := projector.NewEngine(store, kanbanRegistry(), []projector.Definition{failingSummary()}, projector.WithRetry(patient()),
		projector.WithFailurePolicy(projector.Park), projector.WithParker(base), projector.WithStreamReader(newStreams(evs...)))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := e.HandleBatch(context.Background(), evs)
	applied := 0
	for _, rs := range out {
		for _, r := range rs {
			if r.Outcome == projector.Applied {
				applied++
			}
		}
	}
	t.Logf("%d applied, %d one-document writes, %v", applied, store.puts.Load(), time.Since(start))
	if n := store.puts.Load(); n > 3 {
		t.Errorf("%d one-document writes for one failing event, want a split (a few at most)", n)
	}
	var got board
	if _, _, err := projector.ReadDocument(context.Background(), base, failingSummary(), "all", &got); err != nil || got.Cards["z"].Moves != 101 {
		t.Errorf("document %+v (%v), want 101 moves", got, err)
	}
}
