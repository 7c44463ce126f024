package cart_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

var fixedTime = time.Date(2026, 11, 2, 9, 30, 15, 123456789, time.FixedZone("CET", 3600))

func envelopes(t *testing.T, cartID string, payloads ...any) []projector.Event {
	t.Helper()
	return projectortest.NewLog(cart.Registry()).MustAppend(t, cart.StreamID(cartID), payloads...)
}

func TestDetails_fold_of_a_full_life(t *testing.T) {
	confirmed := fixedTime.Add(time.Hour)
	evs := envelopes(t, "c1",
		cart.ShoppingCartOpened{ShoppingCartID: "c1", ClientID: "client-7", OpenedAt: fixedTime},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "c1", ProductItem: item("shoes", 1)},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "c1", ProductItem: item("socks", 3)},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "c1", ProductItem: item("shoes", 1)},
		cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: "c1", ProductItem: item("socks", 3)},
		cart.ShoppingCartConfirmed{ShoppingCartID: "c1", ConfirmedAt: confirmed},
	)
	got, err := cart.NewDetailsProjection().Fold(evs...)
	if err != nil {
		t.Fatal(err)
	}
	wantConfirmed := confirmed.UTC().Truncate(time.Millisecond)
	want := cart.Details{
		ClientID:     "client-7",
		Status:       cart.StatusConfirmed,
		ProductItems: []cart.ProductItem{item("shoes", 2)},
		OpenedAt:     fixedTime.UTC().Truncate(time.Millisecond),
		ConfirmedAt:  &wantConfirmed,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fold = %+v\nwant %+v", got, want)
	}
}

func TestDetails_removing_a_product_not_in_the_cart_is_a_domain_error(t *testing.T) {
	evs := envelopes(t, "c1",
		cart.ShoppingCartOpened{ShoppingCartID: "c1", ClientID: "x", OpenedAt: fixedTime},
		cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: "c1", ProductItem: item("ghost", 1)},
	)
	_, err := cart.NewDetailsProjection().Fold(evs...)
	if !errors.Is(err, cart.ErrNotEnoughItems) {
		t.Fatalf("err = %v, want ErrNotEnoughItems", err)
	}
}

func TestDetails_routes_only_cart_streams(t *testing.T) {
	p := cart.NewDetailsProjection()
	for stream, want := range map[string]string{"shopping_cart-42": "42", "shopping_cart-": "", "order-42": ""} {
		id, ok := p.DocumentID(projector.Event{StreamID: stream})
		if id != want || ok != (want != "") {
			t.Errorf("DocumentID(%q) = %q, %v; want %q", stream, id, ok, want)
		}
	}
}
