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
// reads only "CardMoved" is refused, naming the other, so that such events
// are not passed over without a word.
func TestFilter_by_event_type_under_a_version_field_reads_every_name_a_version_decodes_from(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[laneMoved](r, "CardMoved",
		projector.Upcast("CardMoved.v1", func(v laneMovedV1) (laneMoved, error) { return laneMoved{Column: v.To}, nil }))
	p := projector.New[struct{ N int }]("lanes", projector.StreamSuffix("card-"))
	projector.On(p, func(s struct{ N int }, _ laneMoved) (struct{ N int }, error) { s.N++; return s, nil })
	if err := EventTypes("CardMoved").covers(r, p); err == nil || !strings.Contains(err.Error(), `"CardMoved.v1"`) {
		t.Errorf(`EventTypes("CardMoved"): %v, want it refused for leaving out "CardMoved.v1"`, err)
	}
	if err := EventTypes(projector.HandledTypes(r, p)...).covers(r, p); err != nil {
		t.Errorf("EventTypes(HandledTypes...) refused: %v", err)
	}
	if err := EventTypes("CardMoved", "CardMoved.v1").covers(r, p); err != nil {
		t.Errorf(`EventTypes("CardMoved", "CardMoved.v1") refused: %v`, err)
	}
}

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
