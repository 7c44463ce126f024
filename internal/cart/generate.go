package cart

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"
)

// RandomLife returns the payloads of a plausible cart life of size events
// (at least 1): opened, then products added and removed (never more than the
// cart holds), and, when size allows, confirmed or canceled at the end. The
// same r gives the same life. Demos, tests and benchmarks use it for traffic.
func RandomLife(r *rand.Rand, cartID, clientID string, size int, at time.Time) []any {
	out := []any{ShoppingCartOpened{ShoppingCartID: cartID, ClientID: clientID, OpenedAt: at}}
	var items []ProductItem
	closeAt := size - 1 // index of the closing event, if any
	if size < 3 {
		closeAt = size // too short to close
	}
	for i := 1; i < size; i++ {
		at = at.Add(time.Duration(1+r.IntN(5000)) * time.Millisecond)
		switch {
		case i == closeAt && (r.IntN(4) == 0 || len(items) == 0): // an empty cart cannot be confirmed
			out = append(out, ShoppingCartCanceled{ShoppingCartID: cartID, CanceledAt: at})
		case i == closeAt:
			out = append(out, ShoppingCartConfirmed{ShoppingCartID: cartID, ConfirmedAt: at, ProductItems: append([]ProductItem(nil), items...)})
		case len(items) > 0 && r.IntN(3) == 0:
			held := items[r.IntN(len(items))]
			item := ProductItem{ProductID: held.ProductID, Quantity: 1 + r.IntN(held.Quantity)}
			items, _ = RemoveProductItem(items, item)
			out = append(out, ProductItemRemovedFromShoppingCart{ShoppingCartID: cartID, ProductItem: item})
		default:
			item := ProductItem{ProductID: fmt.Sprintf("product-%d", r.IntN(8)), Quantity: 1 + r.IntN(4)}
			items, _ = AddProductItem(items, item)
			out = append(out, ProductItemAddedToShoppingCart{ShoppingCartID: cartID, ProductItem: item})
		}
	}
	return out
}

// CommandOf returns the command that decides event, under requestID: the
// write side's way to replay a generated life (times come from the handler's
// clock).
func CommandOf(requestID string, event any) (Command, error) {
	switch e := event.(type) {
	case ShoppingCartOpened:
		return OpenCart{RequestID: requestID, CartID: e.ShoppingCartID, ClientID: e.ClientID}, nil
	case ProductItemAddedToShoppingCart:
		return AddItem{RequestID: requestID, CartID: e.ShoppingCartID, Item: e.ProductItem}, nil
	case ProductItemRemovedFromShoppingCart:
		return RemoveItem{RequestID: requestID, CartID: e.ShoppingCartID, Item: e.ProductItem}, nil
	case ShoppingCartConfirmed:
		return ConfirmCart{RequestID: requestID, CartID: e.ShoppingCartID}, nil
	case ShoppingCartCanceled:
		return CancelCart{RequestID: requestID, CartID: e.ShoppingCartID}, nil
	}
	return nil, fmt.Errorf("cart: no command decides %T", event)
}

// Shop returns the lives of n carts of size events (RandomLife, from seed)
// of clients client0..client4, by stream, and each stream's metadata as
// the write side writes it (the cart's client): the summaries' tests feed
// them to projectortest.Prove.
func Shop(n, size int, seed uint64) (lives map[string][]any, metadata func(stream string) []byte) {
	r := rand.New(rand.NewPCG(seed, seed))
	lives = map[string][]any{}
	clients := map[string]string{}
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	for i := range n {
		id, client := fmt.Sprintf("cart%03d", i), fmt.Sprintf("client%d", i%5)
		lives[StreamID(id)] = RandomLife(r, id, client, size, at)
		clients[StreamID(id)] = client
	}
	return lives, func(stream string) []byte {
		b, _ := json.Marshal(Metadata{ClientID: clients[stream]})
		return b
	}
}
