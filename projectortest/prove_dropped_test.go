package projectortest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

type WardAdmitted struct {
	Ward string `json:"ward"`
}

type WardNoted struct {
	Ward string `json:"ward"`
	Text string `json:"text"`
}

type wardCount struct {
	Patients int `bson:"patients"`
	Notes    int `bson:"notes"`
}

// A projection whose router reads the ward from the payload, over a log
// whose old "noted" events are dropped by their upcaster (the engine shows
// them to no projection): HandledTypes lists "noted" (an older form of
// WardNoted), and none of those events is routed, yet nothing is lost, and
// Prove, which counts events by the type they decode to, passes it.
func TestProve_passes_a_projection_whose_router_declines_events_their_upcaster_dropped(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[WardAdmitted](reg, "admitted")
	projector.Register[WardNoted](reg, "noted.v2", projector.Upcast("noted", func(json.RawMessage) (WardNoted, error) {
		return WardNoted{}, projector.DropEvent
	}))
	p := projector.New[wardCount]("wards", func(ev projector.Event) (string, bool) {
		switch e := ev.Payload.(type) {
		case WardAdmitted:
			return e.Ward, true
		case WardNoted:
			return e.Ward, true
		}
		return "", false
	}).Idempotency(projector.HandledIDs(100))
	projector.On(p, func(s wardCount, _ WardAdmitted) (wardCount, error) { s.Patients++; return s, nil })
	projector.On(p, func(s wardCount, _ WardNoted) (wardCount, error) { s.Notes++; return s, nil })

	streams := map[string][]any{}
	for i := range 4 {
		streams[fmt.Sprintf("patient-%d", i)] = []any{
			projector.Event{Type: "noted", Data: []byte(`{"t": 1}`)}, // dropped
			WardAdmitted{Ward: "w1"},
			WardNoted{Ward: "w1", Text: "ok"},
		}
	}
	_, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), reg, p, streams,
		projectortest.Delivery{Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatalf("Prove refused a correct projection: %v", err)
	}
}
