package projector_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// A crate's moves, from a build that knows "crate.moved" and one before it
// that does not.
type (
	crate      struct{ Yard string }
	crateIn    struct{ Yard string }
	crateMoved struct{ Yard string }
)

func crates(build int, policy projector.FailurePolicy, failing bool) (*projector.Registry, *projector.Projection[crate]) {
	r := projector.NewRegistry()
	projector.Register[crateIn](r, "crate.in")
	p := projector.New[crate]("crates", projector.StreamSuffix("crate-"))
	projector.On(p, func(s crate, e crateIn) (crate, error) { s.Yard = e.Yard; return s, nil })
	if build > 1 {
		projector.Register[crateMoved](r, "crate.moved")
		projector.On(p, func(s crate, e crateMoved) (crate, error) {
			if failing {
				return s, retry.Permanent(errors.New("no such yard"))
			}
			s.Yard = e.Yard
			return s, nil
		})
	}
	p.OnFailure(policy)
	return r, p
}

// A parked or held event replayed by a build whose registry does not know
// its type (an older binary, a rename without Renamed) fails, with why, so
// that it stays parked: before, the replay applied it as an event nobody
// handles, replay-parked marked it replayed, and the document never got it.
func TestReplay_of_an_event_of_a_type_this_build_does_not_know_leaves_it_parked(t *testing.T) {
	for _, policy := range []projector.FailurePolicy{projector.Park, projector.Hold} {
		t.Run(policy.String(), func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			r2, broken := crates(2, policy, true)
			e, err := projector.NewEngine(s, r2, []projector.Definition{broken}, projector.WithParker(s))
			if err != nil {
				t.Fatal(err)
			}
			log := projectortest.NewLog(r2)
			for _, ev := range log.MustAppend(t, "crate-7", crateIn{Yard: "A"}, crateMoved{Yard: "B"}) {
				if _, err := e.Handle(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
			parked, err := s.Parked(ctx, "crates")
			if err != nil || len(parked) != 1 || parked[0].Type != "crate.moved" {
				t.Fatalf("parked %+v (%v), want the move", parked, err)
			}

			r1, old := crates(1, policy, false)
			e1, err := projector.NewEngine(s, r1, []projector.Definition{old}, projector.WithParker(s))
			if err != nil {
				t.Fatal(err)
			}
			var res projector.Result
			if policy == projector.Hold {
				hr := e1.ReplayHeld(ctx, "crates", parked)
				if len(hr.Left) != 1 {
					t.Fatalf("held replay by the old build: %+v, want the move left held", hr)
				}
				res = projector.Result{Outcome: projector.Failed, Err: hr.Err}
			} else {
				res = e1.Replay(ctx, parked[0])
			}
			if res.Outcome != projector.Failed || res.Err == nil || !strings.Contains(res.Err.Error(), `does not know event type "crate.moved"`) {
				t.Fatalf("replay by the old build: %v %v, want it refused, naming the type", res.Outcome, res.Err)
			}
			// What the record keeps says why it was parked, also after two
			// such replays.
			again := parked[0]
			again.Error = res.Err.Error()
			if policy == projector.Hold {
				res = projector.Result{Err: e1.ReplayHeld(ctx, "crates", []projector.ParkedEvent{again}).Err}
			} else {
				res = e1.Replay(ctx, again)
			}
			if res.Err == nil || !strings.Contains(res.Err.Error(), "it was parked for: ") || !strings.Contains(res.Err.Error(), "no such yard") ||
				strings.Count(res.Err.Error(), "not replayed") != 1 {
				t.Fatalf("the old build's replay again: %v, want the refusal once and the cause it was parked for", res.Err)
			}

			// The build that knows the type, fixed, applies it.
			_, fixed := crates(2, policy, false)
			e2, err := projector.NewEngine(s, r2, []projector.Definition{fixed}, projector.WithParker(s))
			if err != nil {
				t.Fatal(err)
			}
			if policy == projector.Hold {
				if hr := e2.ReplayHeld(ctx, "crates", parked); len(hr.Left) != 0 || hr.Err != nil {
					t.Fatalf("held replay by the fixed build: %+v", hr)
				}
			} else if res := e2.Replay(ctx, parked[0]); res.Outcome != projector.Applied {
				t.Fatalf("replay by the fixed build: %v %v", res.Outcome, res.Err)
			}
			var got crate
			if _, _, err := s.Load(ctx, "crates", "7", 0, &got); err != nil || got.Yard != "B" {
				t.Fatalf("crate 7: %+v (%v), want yard B", got, err)
			}
		})
	}
}
