package projector_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/revgate/projector/projector"
)

// A garage's takings, fed by the payments of many vehicle streams: the
// router reads the garage from the payment, and declines one without it.
type FeePaid struct {
	Garage string `json:"garage"`
	Cents  int    `json:"cents"`
}

type takings struct {
	Cents int `bson:"cents"`
}

// A payment whose payload does not decode, in a projection whose router
// reads a field of the payload it requires: with no payload and with the
// zero one the router says "not mine", and the event was passed over
// without a word, also under Block (found by a new user). It cannot be
// routed: the policy has it, with no document. A router said to read the
// envelope only is taken at its word.
func TestEngine_an_undecodable_event_a_router_that_reads_the_payload_declines_is_not_dropped(t *testing.T) {
	r := projector.NewRegistry()
	projector.Register[FeePaid](r, "fee.paid")
	garages := func() *projector.Projection[takings] {
		p := projector.New[takings]("takings", func(ev projector.Event) (string, bool) {
			if e, ok := ev.Payload.(FeePaid); ok {
				return e.Garage, e.Garage != ""
			}
			return "", false
		}).Idempotency(projector.HandledIDs(100))
		projector.On(p, func(s takings, e FeePaid) (takings, error) { s.Cents += e.Cents; return s, nil })
		return p
	}
	raw := []projector.Event{
		{ID: "00000000-0000-0000-0000-000000000001", StreamID: "vehicle-1", Position: 10, Type: "fee.paid", Data: []byte(`{"garage": "g0", "cents": 100}`), Created: t0},
		{ID: "00000000-0000-0000-0000-000000000002", StreamID: "vehicle-2", Position: 20, Type: "fee.paid", Data: []byte(`{"garage": "g0", "cents": "abc"}`), Created: t0},
	}
	for _, pol := range []projector.FailurePolicy{projector.Park, projector.Block} {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/batched=%v", pol, batched), func(t *testing.T) {
				s := newStore(t)
				e := faultEngine(t, s, r, pol, raw, garages())
				rs := deliver(e, raw, batched)
				want := map[projector.FailurePolicy]projector.Outcome{projector.Park: projector.Parked, projector.Block: projector.Failed}[pol]
				if len(rs[1]) != 1 || rs[1][0].Outcome != want || !errors.Is(rs[1][0].Err, projector.ErrUndecodable) {
					t.Fatalf("the undecodable payment: %+v, want %v, undecodable", rs[1], want)
				}
				if pol == projector.Park {
					parked, err := s.Parked(context.Background(), "takings")
					if err != nil || len(parked) != 1 || parked[0].Document != "" {
						t.Errorf("%d records (%v); want the payment, with no document", len(parked), err)
					}
				}
			})
		}
	}
}
