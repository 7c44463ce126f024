package projector_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

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
				raw := rawLog(t, r, func(add func(string, ...any)) {
					add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"})
					add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
					add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
					add(cardStreams+"z", CardRenamed{CardID: "z", Title: "z2"}, CardMoved{CardID: "z", Column: "done"})
				})
				p := cardsByPayload()
				s := newStore(t)
				e := faultEngine(t, s, r, projector.Hold, raw, p)
				for i, rs := range deliver(e, raw, batched) {
					t.Logf("event %d: %+v", i, rs)
				}
				broken.Store(false)
				_, held, plain := parkedRecords(t, s, p.Name())
				if heldFirst {
					replayHeld(t, e, s, p.Name(), held)
					replayPlain(t, e, plain)
				} else {
					replayPlain(t, e, plain)
					replayHeld(t, e, s, p.Name(), held)
				}
				docs := p.Documents(decodeAll(t, r, raw))
				if err := projectortest.CheckDocument(ctx, s, p, "z", docs["z"]); err != nil {
					t.Errorf("z after the replay: %v", err)
				}
			})
		}
	}
}
