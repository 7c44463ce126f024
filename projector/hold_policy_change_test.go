package projector_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// A projection that held a document under Hold and runs again under Park
// (or Skip, or Block) keeps that document held: its later events are held
// behind the records, as under Hold, instead of each waiting for a
// predecessor that is held, which stopped the whole projection. The other
// documents go on, and once fixed, replay-parked brings the held one to
// the fold of its events. Under the stream revision gate and a revision
// map (versioned documents, another path).
func TestHold_a_document_held_before_stays_held_under_another_policy(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Park, projector.Skip, projector.Block} {
		for _, c := range []struct {
			batched bool
			strat   projector.Strategy
		}{{true, projector.StreamRevision()}, {false, projector.StreamRevision()}, {true, projector.RevisionMap()}, {false, projector.RevisionMap()}} {
			batched, strat := c.batched, func(p *projector.Projection[trail]) { p.Idempotency(c.strat) }
			t.Run(fmt.Sprintf("%v/batched=%v/%v", pol, batched, c.strat), func(t *testing.T) {
				ctx := context.Background()
				item := func(p string, q int) cart.ProductItem { return cart.ProductItem{ProductID: p, Quantity: q} }
				held, other := "held-cart", "other-cart"
				var heldLog, otherLog []projector.Event
				raw := rawLog(t, cart.Registry(), func(add func(string, ...any)) {
					add(cart.StreamID(held),
						cart.ShoppingCartOpened{ShoppingCartID: held, ClientID: "c", OpenedAt: t0},
						cart.ProductItemAddedToShoppingCart{ShoppingCartID: held, ProductItem: item("poison", 1)},
						cart.ProductItemAddedToShoppingCart{ShoppingCartID: held, ProductItem: item("a", 2)})
					add(cart.StreamID(other),
						cart.ShoppingCartOpened{ShoppingCartID: other, ClientID: "c", OpenedAt: t0},
						cart.ProductItemAddedToShoppingCart{ShoppingCartID: other, ProductItem: item("b", 1)})
					add(cart.StreamID(held),
						cart.ProductItemAddedToShoppingCart{ShoppingCartID: held, ProductItem: item("c", 3)},
						cart.ShoppingCartConfirmed{ShoppingCartID: held, ConfirmedAt: t0})
					add(cart.StreamID(other),
						cart.ShoppingCartConfirmed{ShoppingCartID: other, ConfirmedAt: t0})
				})
				for _, ev := range raw {
					d, err := cart.Registry().Decode(ev)
					if err != nil {
						t.Fatal(err)
					}
					if ev.StreamID == cart.StreamID(held) {
						heldLog = append(heldLog, d)
					} else {
						otherLog = append(otherLog, d)
					}
				}
				var broken atomic.Bool
				broken.Store(true)
				s := newStore(t)
				before := trailProjection(&broken, strat, func(p *projector.Projection[trail]) { p.OnFailure(projector.Hold) })
				deliver(faultEngine(t, s, cart.Registry(), projector.Hold, raw, before), raw[:3], batched)

				// Run again under pol: the held document's later events
				// come, and so do the other document's.
				p := trailProjection(&broken, strat)
				e := faultEngine(t, s, cart.Registry(), pol, raw, p)
				results := deliver(e, raw[3:], batched)
				for i, rs := range results {
					ev := raw[3+i]
					want := projector.Applied
					if ev.StreamID == cart.StreamID(held) {
						want = projector.Held
					}
					if len(rs) != 1 || rs[0].Outcome != want {
						t.Fatalf("%s@%d: %+v, want %v", ev.StreamID, ev.StreamRevision, rs, want)
					}
				}
				if err := projectortest.CheckDocument(ctx, s, p, other, otherLog); err != nil {
					t.Fatalf("the other document: %v", err)
				}
				_, records, _ := parkedRecords(t, s, "trail")
				if len(records) != 4 {
					t.Fatalf("%d held records, want the poison and the 3 events behind it", len(records))
				}
				broken.Store(false)
				if rep := e.ReplayHeld(ctx, "trail", records); len(rep.Left) != 0 {
					t.Fatalf("replay once fixed: %d applied, %d left: %v", len(rep.Applied), len(rep.Left), rep.Err)
				}
				if err := projectortest.CheckDocument(ctx, s, p, held, heldLog); err != nil {
					t.Fatalf("the held document after the replay: %v", err)
				}
			})
		}
	}
}
