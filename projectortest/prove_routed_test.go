package projectortest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// itemsByClient counts each client's carts and items.
type itemsByClient struct {
	Carts int `bson:"carts"`
	Items int `bson:"items"`
}

// A summary under HandledIDs whose router reads the client from the
// payload finds it in ShoppingCartOpened only: it declines every item
// added, which the engine passes over without a word, and the fold Prove
// compares with routes them the same way. Prove fails, naming the type
// whose events reach no document; routed from the metadata, where every
// event of the cart carries its client, the same projection passes.
func TestProve_fails_a_handled_type_whose_events_its_router_sends_nowhere(t *testing.T) {
	fromPayload := func(ev projector.Event) (string, bool) {
		if o, ok := ev.Payload.(cart.ShoppingCartOpened); ok {
			return o.ClientID, true
		}
		return "", false
	}
	build := func(name string, id projector.IDFunc) *projector.Projection[itemsByClient] {
		p := projector.New[itemsByClient](name, id).Idempotency(projector.HandledIDs(1000))
		projector.On(p, func(s itemsByClient, _ cart.ShoppingCartOpened) (itemsByClient, error) {
			s.Carts++
			return s, nil
		})
		projector.On(p, func(s itemsByClient, _ cart.ProductItemAddedToShoppingCart) (itemsByClient, error) {
			s.Items++
			return s, nil
		})
		return p
	}
	streams, meta := cart.Shop(12, 4, 3)
	_, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), cart.Registry(), build("items_by_client", fromPayload), streams,
		projectortest.Delivery{Shuffle: true, Seed: 3, Metadata: meta})
	if err == nil {
		t.Fatal("Prove passed a projection that handles items added and routes none of them")
	}
	for _, want := range []string{"handles ProductItemAddedToShoppingCart", "sends none of the", "RoutesByEnvelope"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	rep, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), cart.Registry(), build("items_by_client_meta", cart.ClientOf), streams,
		projectortest.Delivery{Shuffle: true, Seed: 3, Metadata: meta})
	if err != nil {
		t.Fatalf("routed by the metadata: %v (%v)", err, rep)
	}
}

// A projection that ties streams, whose router declines a type that only
// ever comes first in its stream (a discount before the cart is opened,
// here), is not told to tie its streams: it is told why the tie does not
// reach those events.
func TestProve_tells_a_projection_that_ties_streams_why_the_tie_misses_a_type(t *testing.T) {
	p := projector.New[itemsByClient]("early_discounts", func(ev projector.Event) (string, bool) {
		if o, ok := ev.Payload.(cart.ShoppingCartOpened); ok {
			return o.ClientID, true
		}
		return "", false
	}).Idempotency(projector.RevisionMap()).TieStreams("cart-")
	projector.On(p, func(s itemsByClient, _ cart.ShoppingCartOpened) (itemsByClient, error) { s.Carts++; return s, nil })
	projector.On(p, func(s itemsByClient, _ cart.ProductItemAddedToShoppingCart) (itemsByClient, error) {
		s.Items++
		return s, nil
	})
	// Each stream's add comes before its opening.
	streams := map[string][]any{}
	for i, c := range []string{"a", "b"} {
		streams["cart-"+c] = []any{
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: c, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
			cart.ShoppingCartOpened{ShoppingCartID: c, ClientID: []string{"c1", "c2"}[i]},
		}
	}
	_, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), cart.Registry(), p, streams,
		projectortest.Delivery{Shuffle: true, Seed: 3})
	if err == nil {
		t.Fatal("Prove passed a projection whose handler of items added is never called")
	}
	for _, want := range []string{"handles ProductItemAddedToShoppingCart", "ties streams", "first routed event", "route each tied stream's first event"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "tie each stream") {
		t.Errorf("the error tells a projection that ties streams to tie them: %v", err)
	}
}

// Under RevisionMap a stream feeds one document: a router that sends a
// cart's confirmation to another document than the cart's opening (a
// stream that moves) has the engine refuse those events (routed away).
// Prove fails naming that, not saying that the router sends them nowhere,
// which it does not.
func TestProve_names_the_events_its_router_routes_away_from_their_streams_document(t *testing.T) {
	p := projector.New[itemsByClient]("moving", func(ev projector.Event) (string, bool) {
		switch o := ev.Payload.(type) {
		case cart.ShoppingCartOpened:
			return o.ClientID, true
		case cart.ShoppingCartConfirmed:
			return "confirmed", true
		}
		return "", false
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(s itemsByClient, _ cart.ShoppingCartOpened) (itemsByClient, error) { s.Carts++; return s, nil })
	projector.On(p, func(s itemsByClient, _ cart.ShoppingCartConfirmed) (itemsByClient, error) { s.Items++; return s, nil })
	streams, meta := cart.Shop(12, 4, 3)
	_, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), cart.Registry(), p, streams,
		projectortest.Delivery{Shuffle: true, Seed: 3, Metadata: meta})
	if err == nil {
		t.Fatal("Prove passed a projection whose confirmations go to another document than their carts' openings")
	}
	for _, want := range []string{"handles ShoppingCartConfirmed, and its router routes the", "each to another document", "HandledIDs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "sends none of the") {
		t.Errorf("the error says the router sends them nowhere: %v", err)
	}
}
