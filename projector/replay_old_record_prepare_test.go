package projector_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/projector"
)

// A record parked with no document by a version before prepare positions
// were kept (its event at commit 100, prepare 70, of a legacy TCP
// transaction; the record holds 100 only). Once the router is fixed, the
// event is delivered again (a runner that reads again from an older
// checkpoint) and applied under this version: the ward is at 100/70. Its
// replay then must not apply it a second time: the old code found the
// ward at the record's position (Applied, nothing applied); the new one
// takes the record for 100/100, past the ward, and applies it again.
func TestGlobalPosition_an_old_parked_record_without_prepare_is_not_applied_twice(t *testing.T) {
	ctx := context.Background()
	var fixed atomic.Bool
	p := wards(projector.GlobalPosition(), &fixed)
	ev := wardEventAt("patient-2", "patient.admitted", 100, 70, nil) // no ward in its metadata
	s := newStore(t)
	e := faultEngine(t, s, wardRegistry(), projector.Park, []projector.Event{ev}, p)
	fixed.Store(true)
	deliver(e, []projector.Event{ev}, false) // delivered again after the fix: applied to w1 at 100/70
	old := ev
	old.Prepare = 0 // as an earlier version recorded it
	res := e.Replay(ctx, projector.ParkedEvent{Event: old, Projection: p.Name(), Error: "no ward in the event's metadata",
		Attempts: 1, ParkedAt: time.Now().UTC(), Collection: p.Collection()})
	var w ward
	if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &w); err != nil {
		t.Fatal(err)
	}
	if w.Admissions != 1 {
		t.Errorf("replay of the old record: %v (%v); w1 %+v, want the admission once", res.Outcome, res.Err, w)
	}
}
