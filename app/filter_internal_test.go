package app

import (
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
