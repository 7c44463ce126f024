package projector_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/projector"
)

// A transaction written by the legacy TCP API with more events for one
// document than its HandledIDs window holds: they share their commit
// position (100), their prepare positions apart. Each is delivered once,
// in log order: none is older than the window, and each applies (the
// window's start is ordered by commit, then prepare position; by commit
// position alone, every event of the transaction after the first to leave
// the window was refused as older than it). The first, delivered again
// once it has left, is.
func TestHandledIDs_applies_each_event_of_a_transaction_larger_than_its_window(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			ctx := context.Background()
			var fixed atomic.Bool
			p := wards(projector.HandledIDs(2), &fixed)
			w1 := []byte(`{"ward": "w1"}`)
			var raw []projector.Event
			for i, prepare := range []uint64{60, 70, 80, 90} {
				raw = append(raw, wardEventAt(fmt.Sprintf("patient-%d", i), "patient.admitted", 100, prepare, w1))
			}
			s := newStore(t)
			e := faultEngine(t, s, wardRegistry(), projector.Block, raw, p)
			for _, rs := range deliver(e, raw, batched) {
				for _, r := range rs {
					if r.Outcome != projector.Applied {
						t.Errorf("an event of the transaction, delivered once in log order: %v (%v), want applied", r.Outcome, r.Err)
					}
				}
			}
			var w ward
			if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &w); err != nil {
				t.Fatal(err)
			}
			if want := (ward{Occupied: 4, Admissions: 4}); w != want {
				t.Errorf("w1 %+v, want %+v", w, want)
			}
			// The transaction's first event, delivered again once it has left
			// the window, is older than it: refused, not applied twice.
			for _, rs := range deliver(e, raw[:1], batched) {
				for _, r := range rs {
					if !errors.Is(r.Err, projector.ErrOutsideWindow) {
						t.Errorf("the first event again, out of the window: %v (%v), want ErrOutsideWindow", r.Outcome, r.Err)
					}
				}
			}
			if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &w); err != nil || w != (ward{Occupied: 4, Admissions: 4}) {
				t.Errorf("after the first event again: w1 %+v (%v), want it unchanged", w, err)
			}
		})
	}
}
