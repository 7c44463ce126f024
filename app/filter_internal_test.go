package app

import (
	"strings"
	"testing"

	"github.com/revgate/projector/projector"
)

type laneMovedV1 struct{ To string }
type laneMoved struct{ Column string }

// Under VersionField every version of an event type is stored under its
// name, its version in the metadata; and an event stored under the name
// "CardMoved.v1" itself (a log that had its versions in its type names
// before) decodes as that form too. A filter must read both: one that
// names "CardMoved" reads "CardMoved.v1" too (it was refused for leaving it
// out, which broke configurations that worked), and says so; a name the
// projection does not handle is still refused.
func TestFilter_by_event_type_under_a_version_field_reads_every_name_a_version_decodes_from(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[laneMoved](r, "CardMoved",
		projector.Upcast("CardMoved.v1", func(v laneMovedV1) (laneMoved, error) { return laneMoved{Column: v.To}, nil }))
	projector.Register[laneClosed](r, "LaneClosed")
	p := projector.New[struct{ N int }]("lanes", projector.StreamSuffix("card-"))
	projector.On(p, func(s struct{ N int }, _ laneMoved) (struct{ N int }, error) { s.N++; return s, nil })
	projector.On(p, func(s struct{ N int }, _ laneClosed) (struct{ N int }, error) { s.N = 0; return s, nil })
	f := EventTypes("CardMoved", "LaneClosed").withVersionedNames(r, p)
	if err := f.covers(r, p); err != nil {
		t.Errorf("%s: refused: %v", f, err)
	}
	if !f.matches("card-1", "CardMoved.v1") || !f.matches("card-1", "CardMoved") || f.matches("card-1", "Other") {
		t.Errorf("%s: does not read CardMoved.v1 and CardMoved alone", f)
	}
	if !strings.Contains(f.String(), `"CardMoved.v1"`) {
		t.Errorf("the filter says %q, which does not name CardMoved.v1", f)
	}
	if err := EventTypes("CardMoved").withVersionedNames(r, p).covers(r, p); err == nil || !strings.Contains(err.Error(), `"LaneClosed"`) {
		t.Errorf(`EventTypes("CardMoved"): %v, want it refused for leaving out "LaneClosed"`, err)
	}
	if g := EventTypes("LaneClosed").withVersionedNames(r, p); g.matches("card-1", "CardMoved.v1") {
		t.Errorf("%s reads CardMoved.v1, whose type it does not name", g)
	}
	if err := EventTypes(projector.HandledTypes(r, p)...).withVersionedNames(r, p).covers(r, p); err != nil {
		t.Errorf("EventTypes(HandledTypes...) refused: %v", err)
	}
}

type laneClosed struct{}

// A projection that ties streams must read them: a filter that leaves a
// tied prefix out is refused (their events would never reach the
// documents, and nothing else would say so); one that reads it, by a
// shorter prefix or a regex, is not.
func TestFilter_must_read_the_streams_its_projection_ties(t *testing.T) {
	p := projector.New[struct{ N int }]("turbines", projector.StreamSuffix("turbine-")).
		Idempotency(projector.RevisionMap()).TieStreams("workorder-", "alarm-")
	for _, c := range []struct {
		f    Filter
		want string // "" for none
	}{
		{StreamPrefix("turbine-", "workorder-"), `ties streams "alarm-"* (TieStreams), but reads streams ["turbine-" "workorder-"]*`},
		{StreamPrefix("turbine-", "workorder-", "alarm-"), ""},
		{StreamPrefix("turbine-", "workorder-", "al"), ""},
		{StreamRegex("^(turbine|workorder)-"), `ties streams "alarm-"* (TieStreams), but reads streams matching "^(turbine|workorder)-"`},
		{StreamRegex("^(turbine|workorder|alarm)-"), ""},
		{Category("turbine"), `ties streams "workorder-"*`},
	} {
		err := c.f.readsTies(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.f, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.f, err, c.want)
		}
	}
}

// A writer that names its current version too ("CardMoved.v2") has that
// name registered for the current shape (Renamed): the registry reads it
// as CardMoved, and EventTypes("CardMoved") reads it with the others.
func TestFilter_by_event_type_reads_the_current_versions_name_registered_with_Renamed(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[laneMoved](r, "CardMoved", projector.Renamed("CardMoved.v2"),
		projector.Upcast("CardMoved.v1", func(v laneMovedV1) (laneMoved, error) { return laneMoved{Column: v.To}, nil }))
	p := projector.New[struct{ N int }]("lanes", projector.StreamSuffix("card-"))
	projector.On(p, func(s struct{ N int }, _ laneMoved) (struct{ N int }, error) { s.N++; return s, nil })
	ev, err := r.Decode(projector.Event{Type: "CardMoved.v2", Data: []byte(`{"Column": "Done"}`)})
	if m, ok := ev.Payload.(laneMoved); err != nil || !ok || m.Column != "Done" {
		t.Fatalf("CardMoved.v2: %#v, %v; want it read as CardMoved", ev.Payload, err)
	}
	f := EventTypes("CardMoved").withVersionedNames(r, p)
	if err := f.covers(r, p); err != nil {
		t.Errorf("%s: refused: %v", f, err)
	}
	for _, name := range []string{"CardMoved", "CardMoved.v1", "CardMoved.v2"} {
		if !f.matches("card-1", name) {
			t.Errorf("%s does not read %s", f, name)
		}
	}
	if f.matches("card-1", "CardMoved.v9") {
		t.Errorf("%s reads CardMoved.v9, a version nobody registered", f)
	}
}
