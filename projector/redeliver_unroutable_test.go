package projector_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// An unroutable event parked with no document is parked again against the
// document that moves past it (parkHole), or held there, so that its replay
// applies it there. Delivered again (at least once: a restart from a
// checkpoint before it), it is parked with no document once more, which
// knows less: the record keeps its document, and the replay applies it.
func TestPark_a_redelivered_unroutable_event_keeps_the_document_that_moved_past_it(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Park, projector.Hold} {
		t.Run(fmt.Sprint(pol), func(t *testing.T) {
			ctx := context.Background()
			var broken atomic.Bool
			broken.Store(true)
			r := poisonRegistry(&broken)
			raw := rawLog(t, r, func(add func(string, ...any)) {
				add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"},
					projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)},
					CardRenamed{CardID: "z", Title: "z2"})
			})
			p := cardsByPayload()
			s := newStore(t)
			e := faultEngine(t, s, r, pol, raw, p)
			// Delivered, then the poison delivered again (a restart from a
			// checkpoint before it), and the event after it again.
			for i, ev := range append(append([]projector.Event{}, raw...), raw[1], raw[2]) {
				rs, err := e.Handle(ctx, ev)
				t.Logf("delivery %d %s@%d: %+v %v", i, ev.StreamID, ev.StreamRevision, rs, err)
			}
			broken.Store(false)
			_, held, plain := parkedRecords(t, s, p.Name())
			replayHeld(t, e, s, p.Name(), held)
			replayPlain(t, e, plain)
			if err := projectortest.CheckDocument(ctx, s, p, "z", p.Documents(decodeAll(t, r, raw))["z"]); err != nil {
				t.Errorf("z after the replay: %v", err)
			}
		})
	}
}
