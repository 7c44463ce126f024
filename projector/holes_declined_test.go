package projector_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// addsSeen counts the items added to every cart.
type addsSeen struct {
	Adds int `bson:"adds"`
}

// A summary under RevisionMap whose router routes only the events it
// handles (items added) and declines the others of the same streams
// (openings, removals, confirmations, which it has no handler for): each
// added item after a removal follows a declined revision. The engine saw
// those declined in the stream's order, so it takes the next routed event
// as following on, in a batch and one event at a time alike, without
// reading the stream for each hole (before, every such hole cost a read
// of the stream and an event handled alone: a catch-up of 12,000 such
// events took 4.7 s against 0.13 s with every event routed), and the
// document is the fold of its events.
func TestRevisionMap_passes_over_declined_events_between_routed_ones_without_reading_the_stream(t *testing.T) {
	p := projector.New[addsSeen]("adds_seen", func(ev projector.Event) (string, bool) {
		_, ok := ev.Payload.(cart.ProductItemAddedToShoppingCart)
		return "all", ok
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(s addsSeen, _ cart.ProductItemAddedToShoppingCart) (addsSeen, error) {
		s.Adds++
		return s, nil
	})
	log := projectortest.NewLog(cart.Registry())
	item := cart.ProductItem{ProductID: "p", Quantity: 1}
	var all []projector.Event
	for i := range 20 {
		id := fmt.Sprintf("h%02d", i)
		all = append(all, log.MustAppend(t, cart.StreamID(id),
			cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "x", OpenedAt: t0},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: item},
			cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: id, ProductItem: item},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: item},
			cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: id, ProductItem: item},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: item},
			cart.ShoppingCartConfirmed{ShoppingCartID: id, ConfirmedAt: t0})...)
	}
	for _, batched := range []bool{true, false} {
		s, history := newStore(t), newStreams(all...)
		e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{projector.Copy(p, fmt.Sprintf("adds_seen_%v", batched))},
			projector.WithRetry(patient()), projector.WithStreamReader(history))
		if err != nil {
			t.Fatal(err)
		}
		applied := 0
		if batched {
			applied, _ = handleInBatches(t, e, all, 1000)
		} else {
			for _, ev := range all {
				rs, err := e.Handle(context.Background(), ev)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rs {
					if r.Outcome == projector.Applied {
						applied++
					}
				}
			}
		}
		reads := 0
		for _, n := range history.reads {
			reads += n
		}
		if applied != 60 || reads != 0 {
			t.Errorf("batched %v: %d events applied, want 60; %d stream reads, want 0", batched, applied, reads)
		}
		q := projector.Copy(p, fmt.Sprintf("adds_seen_%v", batched)).(*projector.Projection[addsSeen])
		if err := projectortest.CheckDocument(context.Background(), s, q, "all", p.Documents(all)["all"]); err != nil {
			t.Errorf("batched %v: %v", batched, err)
		}
	}
}
