package app

import (
	"strings"
	"testing"

	"github.com/revgate/projector/projector"
)

type laneMovedV1 struct{ To string }
type laneMoved struct{ Column string }

// Under VersionField every version of an event type is stored under its
// name, its version in the metadata: a filter that reads the name reads
// them all, and is not asked for "CardMoved.v1", which no event is stored
// under.
func TestFilter_by_event_type_under_a_version_field_reads_every_version_by_its_name(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[laneMoved](r, "CardMoved",
		projector.Upcast("CardMoved.v1", func(v laneMovedV1) (laneMoved, error) { return laneMoved{Column: v.To}, nil }))
	p := projector.New[struct{ N int }]("lanes", projector.StreamSuffix("card-"))
	projector.On(p, func(s struct{ N int }, _ laneMoved) (struct{ N int }, error) { s.N++; return s, nil })
	if err := EventTypes("CardMoved").covers(r, p); err != nil {
		t.Errorf(`EventTypes("CardMoved") refused: %v`, err)
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
