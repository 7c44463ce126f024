package projector_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/projector"
)

// Three admissions to one ward written in one transaction by the legacy
// TCP API: they share their commit position in $all (100), their prepare
// positions apart (70, 80, 90). Under GlobalPosition each applies once,
// per event and batched, and a delivery again of any of them is a
// duplicate; so is one of an event at the ward's commit position with no
// prepare position told (a document written by an earlier version
// remembers none: it stands past every event of its commit position).
func TestGlobalPosition_applies_each_event_of_a_transaction_that_shares_a_commit_position(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			ctx := context.Background()
			var fixed atomic.Bool
			p := wards(projector.GlobalPosition(), &fixed)
			w1 := []byte(`{"ward": "w1"}`)
			at := func(stream string, typ string, position, prepare uint64) projector.Event {
				return wardEventAt(stream, typ, position, prepare, w1)
			}
			raw := []projector.Event{
				at("patient-1", "patient.admitted", 100, 70),
				at("patient-2", "patient.admitted", 100, 80),
				at("patient-3", "patient.admitted", 100, 90),
			}
			discharge := at("patient-1", "patient.discharged", 110, 110)
			discharge.StreamRevision = 1
			s := newStore(t)
			e := faultEngine(t, s, wardRegistry(), projector.Block, append(raw, discharge), p)
			read := func() ward {
				t.Helper()
				var w ward
				if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &w); err != nil {
					t.Fatal(err)
				}
				return w
			}
			deliver(e, raw, batched)
			if got, want := read(), (ward{Occupied: 3, Admissions: 3}); got != want {
				t.Fatalf("after the transaction's three admissions: w1 %+v, want %+v (an event of the transaction taken for a duplicate)", got, want)
			}
			for _, rs := range deliver(e, raw, batched) {
				for _, r := range rs {
					if r.Outcome != projector.Duplicate {
						t.Errorf("a delivery again of the transaction's event: %v (%v), want a duplicate", r.Outcome, r.Err)
					}
				}
			}
			deliver(e, []projector.Event{discharge}, batched)
			untold := raw[2]
			untold.Prepare = 0 // a source that does not tell it: at its commit position
			deliver(e, []projector.Event{raw[0], untold}, batched)
			if got, want := read(), (ward{Occupied: 2, Admissions: 3}); got != want {
				t.Errorf("after the discharge and deliveries again: w1 %+v, want %+v", got, want)
			}
		})
	}
}

// An event of such a transaction parked with no document (its router
// could not route it) keeps its prepare position in its record: replayed
// once the router is fixed, into a ward that has applied a later event of
// the same transaction, it is refused as one the ward is past (its
// position cannot tell whether the ward got it since), not applied as if
// it stood after that event.
func TestGlobalPosition_a_parked_event_of_a_transaction_replays_by_its_prepare_position(t *testing.T) {
	ctx := context.Background()
	var fixed atomic.Bool
	p := wards(projector.GlobalPosition(), &fixed)
	ev := func(stream string, meta []byte, prepare uint64) projector.Event {
		return wardEventAt(stream, "patient.admitted", 100, prepare, meta)
	}
	raw := []projector.Event{ev("patient-1", []byte(`{"ward": "w1"}`), 70), ev("patient-2", nil, 80), ev("patient-3", []byte(`{"ward": "w1"}`), 90)}
	s := newStore(t)
	e := faultEngine(t, s, wardRegistry(), projector.Park, raw, p)
	deliver(e, raw, false)
	parked, err := s.Parked(ctx, p.Name())
	if err != nil || len(parked) != 1 || parked[0].Prepare != 80 || parked[0].Position != 100 {
		t.Fatalf("records %+v (%v); want patient-2's admission at 100/80", parked, err)
	}
	fixed.Store(true)
	res := e.Replay(ctx, parked[0])
	var w ward
	if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &w); err != nil || res.Outcome != projector.Failed || w != (ward{Occupied: 2, Admissions: 2}) {
		t.Errorf("replay into a ward at 100/90: %v (%v), w1 %+v (%v); want refused, w1 as it was", res.Outcome, res.Err, w, err)
	}
}

// wardEventAt is a ward log's event of stream, undecoded, at commit
// position position and prepare position prepare (the events of a legacy
// TCP transaction share the first), its id from the second.
func wardEventAt(stream, typ string, position, prepare uint64, meta []byte) projector.Event {
	return projector.Event{ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", prepare), StreamID: stream,
		Position: position, Prepare: prepare, Type: typ, Data: []byte(`{}`), Metadata: meta, Created: t0}
}
