package projector_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// noted is an event type the projection's build does not register (a
// retired one): delivered to a free document it is passed over.
type noted struct {
	Text string `json:"text"`
}

// An event of a type the build does not register, held behind a poison
// event, is passed over by the replay of a build that does not register it
// either, as it is when delivered to a free document: the held document
// reaches the fold of its events instead of staying held at it for good.
// Held by a build that did register it, it stays held: the replay cannot
// tell that the projection no longer wants it.
func TestHold_replay_passes_over_an_event_of_a_type_the_holding_build_did_not_register(t *testing.T) {
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			ctx := context.Background()
			withNoted := cart.Registry()
			projector.Register[noted](withNoted, "cart.noted")
			id := "noted-cart"
			item := func(p string, q int) cart.ProductItem { return cart.ProductItem{ProductID: p, Quantity: q} }
			raw := rawLog(t, withNoted, func(add func(string, ...any)) {
				add(cart.StreamID(id),
					cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c", OpenedAt: t0},
					cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: item("a", 2)},
					cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: item("poison", 1)},
					noted{Text: "called the client"},
					cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: item("b", 3)})
			})
			var broken atomic.Bool
			broken.Store(true)
			p := trailProjection(&broken, func(p *projector.Projection[trail]) { p.OnFailure(projector.Hold) })
			s := newStore(t)
			e := faultEngine(t, s, cart.Registry(), projector.Hold, raw, p)
			deliver(e, raw, batched)
			_, held, _ := parkedRecords(t, s, "trail")
			if len(held) != 3 {
				t.Fatalf("%d held records, want the poison and the 2 events behind it", len(held))
			}
			for _, pe := range held {
				if unknown := pe.Type == "cart.noted"; unknown != strings.Contains(pe.Error, "not registered by the build that held it") {
					t.Fatalf("record of %s: %q: want the unknown type said only of cart.noted", pe.Type, pe.Error)
				}
			}

			// Fixed, and still without the type: the replay passes over
			// it, as a delivery to a free document does.
			broken.Store(false)
			rep := e.ReplayHeld(ctx, "trail", held)
			if len(rep.Left) != 0 || len(rep.Applied) != 3 {
				t.Fatalf("replay once fixed: %d applied, %d left: %v", len(rep.Applied), len(rep.Left), rep.Err)
			}
			var events []projector.Event
			for _, ev := range raw {
				d, err := cart.Registry().Decode(ev)
				if err != nil {
					t.Fatal(err)
				}
				events = append(events, d)
			}
			if err := projectortest.CheckDocument(ctx, s, p, id, events); err != nil {
				t.Fatalf("after the replay: %v", err)
			}
		})
	}
}

// Held by a build that registers the type, an event stays held when a
// build that does not replays it: that build cannot tell whether the
// projection wants it.
func TestHold_replay_keeps_held_an_event_the_holding_build_knew(t *testing.T) {
	ctx := context.Background()
	withNoted := cart.Registry()
	projector.Register[noted](withNoted, "cart.noted")
	id := "noted-cart"
	item := func(p string, q int) cart.ProductItem { return cart.ProductItem{ProductID: p, Quantity: q} }
	raw := rawLog(t, withNoted, func(add func(string, ...any)) {
		add(cart.StreamID(id),
			cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c", OpenedAt: t0},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: item("poison", 1)},
			noted{Text: "called the client"})
	})
	var broken atomic.Bool
	broken.Store(true)
	p := trailProjection(&broken, func(p *projector.Projection[trail]) { p.OnFailure(projector.Hold) })
	s := newStore(t)
	deliver(faultEngine(t, s, withNoted, projector.Hold, raw, p), raw, false)
	_, held, _ := parkedRecords(t, s, "trail")
	if len(held) != 2 {
		t.Fatalf("%d held records, want 2", len(held))
	}
	broken.Store(false)
	rep := faultEngine(t, s, cart.Registry(), projector.Hold, raw, p).ReplayHeld(ctx, "trail", held)
	if len(rep.Applied) != 1 || len(rep.Left) != 1 || rep.Err == nil || !strings.Contains(rep.Err.Error(), "does not know event type") {
		t.Fatalf("replay by a build without the type: %d applied, %d left: %v; want the poison applied and cart.noted left", len(rep.Applied), len(rep.Left), rep.Err)
	}
}
