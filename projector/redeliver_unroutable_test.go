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
			log := projectortest.NewLog(r)
			raw := log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", Title: "z"},
				projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)},
				CardRenamed{CardID: "z", Title: "z2"})
			for i := range raw {
				raw[i].Payload = nil
			}
			p := cardsByPayload()
			s := newStore(t)
			soon := patient()
			soon.MaxElapsed = 2 * time.Second
			e, err := projector.NewEngine(s, r, []projector.Definition{p}, projector.WithRetry(soon),
				projector.WithFailurePolicy(pol), projector.WithParker(s), projector.WithStreamReader(newStreams(raw...)))
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			// Delivered, then the poison delivered again (a restart from a
			// checkpoint before it), and the event after it again.
			for i, ev := range append(append([]projector.Event{}, raw...), raw[1], raw[2]) {
				rs, err := e.Handle(ctx, ev)
				t.Logf("delivery %d %s@%d: %+v %v", i, ev.StreamID, ev.StreamRevision, rs, err)
			}
			broken.Store(false)
			parked, err := s.Parked(ctx, p.Name())
			if err != nil {
				t.Fatal(err)
			}
			var held []projector.ParkedEvent
			for _, pe := range parked {
				t.Logf("record %s@%d held=%v doc=%q", pe.StreamID, pe.StreamRevision, pe.Held, pe.Document)
				if pe.Held {
					held = append(held, pe)
				}
			}
			if len(held) > 0 {
				rep := e.ReplayHeld(ctx, p.Name(), held)
				t.Logf("ReplayHeld: %d applied, %d left: %v", len(rep.Applied), len(rep.Left), rep.Err)
				for _, pe := range rep.Applied {
					s.Replayed(ctx, pe, nil)
				}
			}
			for _, pe := range parked {
				if !pe.Held {
					res := e.Replay(ctx, pe)
					t.Logf("replay %s@%d doc=%q: %v %v", pe.StreamID, pe.StreamRevision, pe.Document, res.Outcome, res.Err)
				}
			}
			if err := projectortest.CheckDocument(ctx, s, p, "z", p.Documents(decodeAll(t, r, raw))["z"]); err != nil {
				t.Errorf("z after the replay: %v", err)
			}
		})
	}
}
