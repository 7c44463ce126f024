package projector_test

import (
	"slices"
	"testing"

	"github.com/revgate/projector/projector"
)

// Under VersionField a type whose name now looks like a version
// ("CardMoved.v1", the first version, which producers store as type
// "CardMoved" with schemaVersion 1) decodes the events stored as
// "CardMoved" (formOf looks "CardMoved.v1" up), so HandledTypes (what a
// type filter must read, app's Filter.covers) must name "CardMoved" too:
// a filter of "CardMoved.v1" alone is accepted and reads none of them.
func TestRegistry_HandledTypes_names_every_stored_name_Decode_takes_under_VersionField(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[Moved](r, "CardMoved.v1")
	ev, err := r.Decode(projector.Event{Type: "CardMoved", Metadata: []byte(`{"schemaVersion": 1}`), Data: []byte(`{"column": {"name": "Done"}}`)})
	if err != nil || ev.Payload == nil {
		t.Fatalf("CardMoved, schemaVersion 1: %#v, %v; want it decoded", ev.Payload, err)
	}
	got := projector.HandledTypes(r, laneProjection(r))
	for _, want := range []string{"CardMoved", "CardMoved.v1"} {
		if !slices.Contains(got, want) {
			t.Errorf("HandledTypes = %q, lacks %q, a stored name its events decode from", got, want)
		}
	}
}
