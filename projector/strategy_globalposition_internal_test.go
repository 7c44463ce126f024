package projector

import (
	"math"
	"testing"

	"github.com/revgate/projector/projector/driver"
)

// An event's prepare position that is not told (0), or that no event
// store gives (past its commit position, or -1 read as MaxUint64), stands
// at its commit position; GlobalPosition keeps a prepare position in the
// document's meta only below the commit position.
func TestEvent_at_takes_a_prepare_position_not_told_as_the_commit_position(t *testing.T) {
	for _, c := range []struct {
		prepare, want, kept uint64
	}{{0, 100, 0}, {100, 100, 0}, {70, 70, 70}, {101, 100, 0}, {math.MaxUint64, 100, 0}} {
		ev := Event{Position: 100, Prepare: c.prepare}
		if at := ev.at(); at != (Checkpoint{Position: 100, Prepare: c.want}) {
			t.Errorf("prepare %d: at %+v, want 100/%d", c.prepare, at, c.want)
		}
		d := globalPosition{}.record(stored{}, ev)
		if d.meta.Position != 100 || d.meta.Prepare != c.kept {
			t.Errorf("prepare %d: meta keeps %d/%d, want 100/%d", c.prepare, d.meta.Position, d.meta.Prepare, c.kept)
		}
		if got := appliedAt(driver.Meta{Position: 100, Prepare: c.prepare}); got.Prepare != c.want {
			t.Errorf("a meta of prepare %d stands at %v, want 100/%d", c.prepare, got, c.want)
		}
	}
}
