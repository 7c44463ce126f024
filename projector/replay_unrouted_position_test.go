package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/projector"
)

// A hospital: each patient's stream "patient-<id>" feeds the occupancy of
// the ward in the event's metadata ({"ward": "w1"}): a router that reads the
// metadata, which one admission desk left out for a while (the fix: route
// those to the desk's ward, "w1").
type PatientAdmitted struct {
	Bed string `json:"bed"`
}

type PatientDischarged struct{}

type ward struct {
	Occupied   int `bson:"occupied"`
	Admissions int `bson:"admissions"`
}

func wardRegistry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[PatientAdmitted](r, "patient.admitted")
	projector.Register[PatientDischarged](r, "patient.discharged")
	return r
}

func wards(strategy projector.Strategy, fixed *atomic.Bool) *projector.Projection[ward] {
	p := projector.NewRouted[ward]("wards", func(ev projector.Event) (string, bool, error) {
		var m struct {
			Ward string `json:"ward"`
		}
		_ = json.Unmarshal(ev.Metadata, &m)
		if m.Ward == "" {
			if fixed.Load() {
				return "w1", true, nil
			}
			return "", false, errors.New("no ward in the event's metadata")
		}
		return m.Ward, true, nil
	}).Idempotency(strategy)
	projector.On(p, func(w ward, _ PatientAdmitted) (ward, error) {
		w.Occupied++
		w.Admissions++
		return w, nil
	})
	projector.On(p, func(w ward, _ PatientDischarged) (ward, error) {
		w.Occupied--
		return w, nil
	})
	return p
}

// An event its router cannot route (an error), parked with no document,
// replayed once the router is fixed, under each strategy of a document fed
// by many streams, per event and batched: applied exactly once. Under
// GlobalPosition the ward has moved past the event's position, which its
// check took for a duplicate: the replay said Applied and applied nothing,
// and replay-parked marked the record replayed. The position cannot tell
// whether the ward has the event (delivered again since) or not: the

// wardEvent appends to raw, a ward log as the event store delivers it
// (undecoded, positions 10, 20, ...), an event of stream at revision rev.
func wardEvent(raw *[]projector.Event, stream string, rev uint64, typ, data string, meta []byte) {
	pos := uint64(len(*raw)+1) * 10
	*raw = append(*raw, projector.Event{ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", pos), StreamID: stream, StreamRevision: rev,
		Position: pos, Type: typ, Data: []byte(data), Metadata: meta, Created: t0})
}

// replay fails, leaves the ward as it is, and says to rebuild.
func TestEngine_Replay_of_an_unrouted_event_after_the_router_fix_applies_it_once(t *testing.T) {
	strategies := map[string]projector.Strategy{
		"GlobalPosition": projector.GlobalPosition(),
		"HandledIDs":     projector.HandledIDs(100),
		"RevisionMap":    projector.RevisionMap(),
	}
	for _, name := range []string{"GlobalPosition", "HandledIDs", "RevisionMap"} {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batched=%v", name, batched), func(t *testing.T) {
				ctx := context.Background()
				var fixed atomic.Bool
				p := wards(strategies[name], &fixed)
				w1 := []byte(`{"ward": "w1"}`)
				var raw []projector.Event
				add := func(stream string, rev uint64, typ string, meta []byte) {
					wardEvent(&raw, stream, rev, typ, `{}`, meta)
				}
				add("patient-1", 0, "patient.admitted", w1)
				add("patient-2", 0, "patient.admitted", nil) // the desk without the ward
				add("patient-3", 0, "patient.admitted", w1)
				add("patient-1", 1, "patient.discharged", w1)
				add("patient-4", 0, "patient.admitted", w1)
				s := newStore(t)
				e := faultEngine(t, s, wardRegistry(), projector.Park, raw, p)
				deliver(e, raw, batched)
				parked, err := s.Parked(ctx, p.Name())
				if err != nil || len(parked) != 1 || parked[0].Document != "" {
					t.Fatalf("%d records (%v), want patient-2's admission, with no document", len(parked), err)
				}
				fixed.Store(true)
				if name == "GlobalPosition" {
					var before, after ward
					_, _, _ = projector.ReadDocument(ctx, s, p, "w1", &before)
					res := e.Replay(ctx, parked[0])
					if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &after); err != nil || res.Outcome != projector.Failed ||
						!strings.Contains(fmt.Sprint(res.Err), "a rebuild of the projection folds it exactly once") || after != before {
						t.Errorf("replay: %v %v, w1 %+v (was %+v, %v); want failed, saying to rebuild, w1 as it was", res.Outcome, res.Err, after, before, err)
					}
					return
				}
				want := ward{Occupied: 3, Admissions: 4} // the fold of the five events, all in w1
				res := e.Replay(ctx, parked[0])
				var after ward
				if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &after); err != nil || res.Outcome != projector.Applied || after != want {
					t.Fatalf("replay: %v %v, w1 = %+v (%v); want applied, %+v", res.Outcome, res.Err, after, err, want)
				}
				res = e.Replay(ctx, parked[0]) // replay-parked run again before marking it
				var again ward
				if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &again); err != nil || res.Outcome == projector.Failed || again != want {
					t.Errorf("a second replay: %v %v, w1 = %+v (%v); want it unchanged", res.Outcome, res.Err, again, err)
				}
			})
		}
	}
}

// The same with a payload that does not decode, under a router that reads
// the payload (the ward is in the event): parked with no document; the fix
// is an upcaster from the name now that repairs the stored payload.
type Admitted2 struct {
	Ward string `json:"ward"`
	Bed  string `json:"bed"`
}

func wardRegistry2(fixed bool) *projector.Registry {
	r := projector.NewRegistry()
	if fixed {
		projector.Register[Admitted2](r, "patient.admitted", projector.Upcast("patient.admitted", func(m json.RawMessage) (json.RawMessage, error) {
			var v map[string]any
			if err := json.Unmarshal(m, &v); err != nil {
				return nil, err
			}
			if b, ok := v["bed"].(float64); ok { // the desk wrote the bed as a number
				v["bed"] = fmt.Sprint(b)
			}
			return json.Marshal(v)
		}))
	} else {
		projector.Register[Admitted2](r, "patient.admitted")
	}
	return r
}

func wards2(strategy projector.Strategy) *projector.Projection[ward] {
	p := projector.NewRouted[ward]("wards2", func(ev projector.Event) (string, bool, error) {
		a, ok := ev.Payload.(Admitted2)
		if !ok {
			return "", false, nil
		}
		if a.Ward == "" {
			return "", false, errors.New("no ward")
		}
		return a.Ward, true, nil
	}).Idempotency(strategy)
	projector.On(p, func(w ward, _ Admitted2) (ward, error) {
		w.Occupied++
		w.Admissions++
		return w, nil
	})
	return p
}

// Under GlobalPosition, an admission whose payload does not decode, under
// a router that reads the payload: parked with no document, and replayed
// once an upcaster repairs the stored payload: the ward moved past it, so
// the replay fails, saying to rebuild, and the ward stays as it was (it
// said applied, and applied nothing).
func TestEngine_Replay_of_an_undecodable_unrouted_event_under_GlobalPosition_says_to_rebuild(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			ctx := context.Background()
			var raw []projector.Event
			add := func(stream string, data string) { wardEvent(&raw, stream, 0, "patient.admitted", data, nil) }
			add("patient-1", `{"ward": "w1", "bed": "1"}`)
			add("patient-2", `{"ward": "w1", "bed": 2}`) // does not decode
			add("patient-3", `{"ward": "w1", "bed": "3"}`)
			p := wards2(projector.GlobalPosition())
			s := newStore(t)
			deliver(faultEngine(t, s, wardRegistry2(false), projector.Park, raw, p), raw, batched)
			parked, err := s.Parked(ctx, p.Name())
			if err != nil || len(parked) != 1 {
				t.Fatalf("%d records (%v), want patient-2's admission", len(parked), err)
			}
			res := faultEngine(t, s, wardRegistry2(true), projector.Park, raw, p).Replay(ctx, parked[0])
			var w ward
			if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &w); err != nil || res.Outcome != projector.Failed || w.Admissions != 2 ||
				!strings.Contains(fmt.Sprint(res.Err), "a rebuild of the projection folds it exactly once") {
				t.Errorf("replay: %v %v, w1 = %+v (%v); want failed, saying to rebuild, 2 admissions", res.Outcome, res.Err, w, err)
			}
		})
	}
}
