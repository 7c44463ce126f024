package projectortest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

type touched struct {
	Items map[string]int `bson:"items"`
	At    time.Time      `bson:"at"`
}

// A fold that is not a function of its events (a handler that reads the
// clock, documents that share their starting state's map, a router that
// answers otherwise when asked again) can match no delivery: the proof
// says so, and why, before any delivery, rather than that the documents
// differ from a "fold" that is not one.
func TestProve_says_a_fold_that_is_not_a_function_of_its_events(t *testing.T) {
	shared := map[string]int{} // every document's starting map: a mistake
	var calls atomic.Int64
	for _, c := range []struct {
		name string
		p    func() *projector.Projection[touched]
		want string
	}{
		{"the clock", func() *projector.Projection[touched] {
			p := projector.New[touched]("touched_clock", projector.StreamSuffix(cart.StreamPrefix))
			projector.On(p, func(s touched, _ cart.ProductItemAddedToShoppingCart) (touched, error) {
				s.At = time.Now()
				return s, nil
			})
			return p
		}, "is not a function of its events: folded twice"},
		{"a shared map", func() *projector.Projection[touched] {
			p := projector.New[touched]("touched_shared", projector.StreamSuffix(cart.StreamPrefix))
			projector.On(p, func(s touched, e cart.ProductItemAddedToShoppingCart) (touched, error) {
				if s.Items == nil {
					s.Items = shared
				}
				s.Items[e.ProductItem.ProductID] += e.ProductItem.Quantity
				return s, nil
			})
			return p
		}, "the documents share state"},
		{"a router that answers otherwise", func() *projector.Projection[touched] {
			p := projector.New[touched]("touched_router", func(ev projector.Event) (string, bool) {
				if calls.Add(1) == 5 { // once, as a router reading the clock might
					return "elsewhere", true
				}
				return strings.TrimPrefix(ev.StreamID, cart.StreamPrefix), true
			})
			projector.On(p, func(s touched, e cart.ProductItemAddedToShoppingCart) (touched, error) { return s, nil })
			return p
		}, "the router is not a function of the event"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := mongostore.New(mongotest.Database(t))
			rep, err := projectortest.Prove(context.Background(), store, cart.Registry(), c.p(), lives(6, 6, 3), projectortest.Delivery{Seed: 3})
			if !errors.Is(err, projectortest.ErrNotExactlyOnce) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v; want ErrNotExactlyOnce saying %q", err, c.want)
			}
			if rep.Deliveries != 0 {
				t.Errorf("%d deliveries: want it said before any", rep.Deliveries)
			}
		})
	}
}
