package projectortest_test

// Events as they evolve, under Prove: a ward occupancy fed by many patient
// streams (RevisionMap), whose events come in three shapes (v1 -> v2 -> v3
// through a raw-JSON step), under an old name, and with v1 notes dropped by
// their upcaster in the middle of streams; and an upcaster that is not a
// function of the stored event alone.

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

type upMovedV1 struct {
	To string `json:"to"`
}

type upMovedV2 struct {
	Ward string `json:"ward"`
	Bed  int    `json:"bed"`
}

type UpMoved struct {
	Ward string `json:"ward"`
	Bed  string `json:"bed"`
	Why  string `json:"why"`
}

type UpAdmitted struct {
	Ward string `json:"ward"`
}

type UpNoted struct {
	Text string `json:"text"`
}

type upWard struct {
	In    map[string]string `bson:"in"` // patient stream -> ward
	Moves int               `bson:"moves"`
	Notes int               `bson:"notes"`
}

func upRegistry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[UpAdmitted](r, "patient.admitted", projector.Renamed("PatientAdmitted"))
	projector.Register[UpMoved](r, "patient.moved.v3",
		projector.Upcast("patient.moved", func(v upMovedV1) (upMovedV2, error) { return upMovedV2{Ward: v.To}, nil }),
		projector.Upcast("patient.moved.v2", func(v upMovedV2) (json.RawMessage, error) {
			return json.Marshal(map[string]any{"ward": v.Ward, "bed": fmt.Sprint(v.Bed)})
		}),
		projector.Upcast("patient.moved.v2b", func(m json.RawMessage) (UpMoved, error) {
			var v UpMoved
			err := json.Unmarshal(m, &v)
			if v.Why == "" {
				v.Why = "unknown"
			}
			return v, err
		}))
	projector.Register[UpNoted](r, "patient.noted.v2", projector.Upcast("patient.noted", func(json.RawMessage) (UpNoted, error) {
		return UpNoted{}, projector.DropEvent // v1 notes were test data
	}))
	return r
}

// One hospital document, fed by every patient stream.
func upHospital() *projector.Projection[upWard] {
	p := projector.New[upWard]("up_hospital", func(ev projector.Event) (string, bool) { return "h", true }).Idempotency(projector.RevisionMap())
	set := func(s upWard, ev projector.Event, ward string) upWard {
		in := map[string]string{}
		for k, v := range s.In {
			in[k] = v
		}
		in[ev.StreamID] = ward
		s.In = in
		return s
	}
	projector.OnEvent(p, func(s upWard, e UpAdmitted, ev projector.Event) (upWard, error) { return set(s, ev, e.Ward), nil })
	projector.OnEvent(p, func(s upWard, e UpMoved, ev projector.Event) (upWard, error) {
		s = set(s, ev, e.Ward+"/"+e.Bed+"/"+e.Why)
		s.Moves++
		return s, nil
	})
	projector.On(p, func(s upWard, _ UpNoted) (upWard, error) { s.Notes++; return s, nil })
	return p
}

func TestProve_passes_chained_upcasters_renames_and_drops_in_a_document_fed_by_many_streams(t *testing.T) {
	streams := map[string][]any{}
	for i := range 12 {
		streams[fmt.Sprintf("patient-%d", i)] = []any{
			projector.Event{Type: "PatientAdmitted", Data: []byte(`{"ward": "a"}`)},
			projector.Event{Type: "patient.noted", Data: []byte(`{"t": 1}`)}, // dropped
			projector.Event{Type: "patient.moved", Data: []byte(`{"to": "b"}`)},
			projector.Event{Type: "patient.moved.v2", Data: []byte(`{"ward": "c", "bed": 7}`)},
			UpNoted{Text: "x"},
			projector.Event{Type: "patient.moved.v2b", Data: []byte(`{"ward": "d", "bed": "9"}`)},
			UpMoved{Ward: "e", Bed: "1", Why: "icu"},
		}
	}
	for _, d := range []projectortest.Delivery{{Shuffle: true, Seed: 1}, {Seed: 2, Workers: 1}, {Shuffle: true, Seed: 3, MaxTimes: 5}} {
		rep, err := rvProve(t, upRegistry(), upHospital(), streams, d)
		rvExpectPass(t, err)
		if err == nil && rep.Documents != 1 {
			t.Errorf("%v", rep)
		}
	}
}

// A wrong upcaster Prove should catch: v1 transfers lacked the ward they
// came from, and the upcaster fills it from the admission it saw earlier in
// the same process (a map by patient): right when a process decodes the
// whole log in order, wrong after a restart from a checkpoint (the map is
// empty: from ""). Not a pure function of the stored event.
type upTransferV1 struct {
	Patient string `json:"patient"`
	To      string `json:"to"`
}

type UpTransfer struct {
	Patient  string `json:"patient"`
	From, To string
}

type UpAdmit struct {
	Patient string `json:"patient"`
	Ward    string `json:"ward"`
}

type upOcc struct {
	Beds map[string]int `bson:"beds"`
}

func upMemoRegistry(seen map[string]string) *projector.Registry {
	r := projector.NewRegistry()
	var mu sync.Mutex
	projector.Register[UpAdmit](r, "admit.v2", projector.Upcast("admit", func(a UpAdmit) (UpAdmit, error) {
		mu.Lock()
		defer mu.Unlock()
		seen[a.Patient] = a.Ward // remembered for the transfers
		return a, nil
	}))
	projector.Register[UpTransfer](r, "transfer.v2", projector.Upcast("transfer", func(v upTransferV1) (UpTransfer, error) {
		mu.Lock()
		defer mu.Unlock()
		return UpTransfer{Patient: v.Patient, From: seen[v.Patient], To: v.To}, nil
	}))
	return r
}

func TestProve_fails_an_upcaster_that_keeps_state_between_events(t *testing.T) {
	p := projector.New[upOcc]("up_occupancy", func(ev projector.Event) (string, bool) { return "h", true }).Idempotency(projector.HandledIDs(1000))
	add := func(s upOcc, ward string, n int) upOcc {
		beds := map[string]int{}
		for k, v := range s.Beds {
			beds[k] = v
		}
		beds[ward] += n
		s.Beds = beds
		return s
	}
	projector.On(p, func(s upOcc, e UpAdmit) (upOcc, error) { return add(s, e.Ward, 1), nil })
	projector.On(p, func(s upOcc, e UpTransfer) (upOcc, error) { return add(add(s, e.From, -1), e.To, 1), nil })
	streams := map[string][]any{}
	for i := range 6 {
		id := fmt.Sprintf("p%d", i)
		streams["patient-"+id] = []any{
			projector.Event{Type: "admit", Data: fmt.Appendf(nil, `{"patient": %q, "ward": "er"}`, id)},
			projector.Event{Type: "transfer", Data: fmt.Appendf(nil, `{"patient": %q, "to": "icu"}`, id)},
		}
	}
	// What a process that restarts between the admissions and the
	// transfers decodes: the transfer from "".
	fresh := map[string]string{}
	ev, _ := upMemoRegistry(fresh).Decode(projector.Event{Type: "transfer", Data: []byte(`{"patient": "p0", "to": "icu"}`)})
	t.Logf("a transfer decoded after a restart: %+v", ev.Payload)

	_, err := rvProve(t, upMemoRegistry(map[string]string{}), p, streams, projectortest.Delivery{Shuffle: true, Seed: 4})
	if err == nil || !strings.Contains(err.Error(), "not a function of the stored event") {
		t.Errorf("Prove: %v; want it failed, naming an upcaster that is not a function of the stored event (a transfer decoded after a restart comes from ward %q)",
			err, ev.Payload.(UpTransfer).From)
	}
}
