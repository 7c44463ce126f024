package projectortest_test

import (
	"context"
	"testing"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// Injured is an event of a player's stream that the transfers projection
// has no handler for.
type Injured struct{}

// Prove's check of tied streams that move fails only an event that goes
// astray: not one of a stream that came back to its first document before
// it (the event goes where the stream is), nor one the projection has no
// handler for (it changes nothing where it goes).
func TestProve_passes_a_tied_stream_that_moves_where_nothing_goes_astray(t *testing.T) {
	r := scoreRegistry(upScored)
	projector.Register[Joined](r, "player.joined")
	projector.Register[Transferred](r, "player.transferred")
	projector.Register[Injured](r, "player.injured")
	cases := map[string]map[string][]any{
		"moved back before its points": {
			"player-1": {Joined{Team: "red"}, Scored{Points: 1}, Transferred{Team: "blue"}, Transferred{Team: "red"}, Scored{Points: 2}},
			"player-2": {Joined{Team: "blue"}, Scored{Points: 3}},
		},
		"an event nobody handles after the move": {
			"player-1": {Joined{Team: "red"}, Scored{Points: 1}, Transferred{Team: "blue"}, Injured{}},
			"player-2": {Joined{Team: "blue"}, Scored{Points: 3}},
		},
	}
	for name, streams := range cases {
		t.Run(name, func(t *testing.T) {
			store := mongostore.New(mongotest.Database(t))
			if _, err := projectortest.Prove(context.Background(), store, r, transfers(r, projector.HandledIDs(100)), streams, projectortest.Delivery{Seed: 3}); err != nil {
				t.Errorf("Prove: %v", err)
			}
		})
	}
}
