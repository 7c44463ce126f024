package projector_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// Hold, with two events of z's stream that cannot be routed (a failing
// upcaster of an event routed by its payload) in one hole: after the fix,
// a replay in the app's order (held documents first, then the plain
// records) must give the fold.
func TestHold_at_a_hole_of_two_unroutable_events_holds_both_in_order(t *testing.T) {
	for _, batched := range []bool{false, true} {
		for _, heldFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("batched=%v/heldFirst=%v", batched, heldFirst), func(t *testing.T) {
				ctx := context.Background()
				var broken atomic.Bool
				broken.Store(true)
				r := poisonRegistry(&broken)
				log := projectortest.NewLog(r)
				var raw []projector.Event
				add := func(stream string, p ...any) { raw = append(raw, log.MustAppend(t, stream, p...)...) }
				add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"})
				add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
				add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
				add(cardStreams+"z", CardRenamed{CardID: "z", Title: "z2"}, CardMoved{CardID: "z", Column: "done"})
				for i := range raw {
					raw[i].Payload = nil
				}
				p := cardsByPayload()
				s := newStore(t)
				soon := patient()
				soon.MaxElapsed = 2 * time.Second
				e, err := projector.NewEngine(s, r, []projector.Definition{p}, projector.WithRetry(soon),
					projector.WithFailurePolicy(projector.Hold), projector.WithParker(s), projector.WithStreamReader(newStreams(raw...)))
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Prepare(ctx); err != nil {
					t.Fatal(err)
				}
				if batched {
					for i, rs := range e.HandleBatch(ctx, raw) {
						t.Logf("event %d: %+v", i, rs)
					}
				} else {
					for i, ev := range raw {
						rs, err := e.Handle(ctx, ev)
						t.Logf("event %d: %+v %v", i, rs, err)
					}
				}
				broken.Store(false)
				parked, err := s.Parked(ctx, p.Name())
				if err != nil {
					t.Fatal(err)
				}
				var held, plain []projector.ParkedEvent
				for _, pe := range parked {
					t.Logf("record %s@%d held=%v doc=%q err=%s", pe.StreamID, pe.StreamRevision, pe.Held, pe.Document, pe.Error)
					if pe.Held {
						held = append(held, pe)
					} else {
						plain = append(plain, pe)
					}
				}
				replayHeld := func() {
					if len(held) > 0 {
						rep := e.ReplayHeld(ctx, p.Name(), held)
						t.Logf("ReplayHeld: %d applied, %d left: %v", len(rep.Applied), len(rep.Left), rep.Err)
						for _, pe := range rep.Applied {
							if err := s.Replayed(ctx, pe, nil); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				replayPlain := func() {
					for _, pe := range plain {
						res := e.Replay(ctx, pe)
						t.Logf("replay %s@%d doc=%q: %v %v", pe.StreamID, pe.StreamRevision, pe.Document, res.Outcome, res.Err)
					}
				}
				if heldFirst {
					replayHeld()
					replayPlain()
				} else {
					replayPlain()
					replayHeld()
				}
				docs := p.Documents(decodeAll(t, r, raw))
				if err := projectortest.CheckDocument(ctx, s, p, "z", docs["z"]); err != nil {
					t.Errorf("z after the replay: %v", err)
				}
			})
		}
	}
}
