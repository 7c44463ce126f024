package cart

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/revgate/projector/projector"
)

// Names of the summary projections (and their collections).
const (
	ClientSummaryName = "cart_client_summary"
	ShopSummaryName   = "cart_shop_summary"
	// ShopSummaryID is the id of the shop summary's one document.
	ShopSummaryID = "shop"
	// TopProducts is how many products the shop summary ranks.
	TopProducts = 5
)

// ClientSummary is one client's carts: how many were opened, confirmed and
// canceled, and the items in the carts still open.
type ClientSummary struct {
	CartsOpened    int `bson:"cartsOpened" json:"cartsOpened"`
	CartsConfirmed int `bson:"cartsConfirmed" json:"cartsConfirmed"`
	CartsCanceled  int `bson:"cartsCanceled" json:"cartsCanceled"`
	// OpenQuantity is the total quantity of items in the client's open carts.
	OpenQuantity int `bson:"openQuantity" json:"openQuantity"`
	// OpenCarts holds the quantity in each open cart, by cart id.
	OpenCarts map[string]int `bson:"openCarts" json:"openCarts"`
}

// NewClientSummaryProjection returns the per-client summary. Many streams
// (a client's carts) feed one document, so it uses the per-stream revision
// map: each cart stream is gated on its own, in order. Its events are routed
// by the client the write side puts in their metadata ([ClientOf]); a cart
// event without one fails under the failure policy ([projector.ErrUnroutable]).
func NewClientSummaryProjection() *projector.Projection[ClientSummary] {
	p := projector.NewRouted[ClientSummary](ClientSummaryName, func(ev projector.Event) (string, bool, error) {
		if !strings.HasPrefix(ev.StreamID, StreamPrefix) {
			return "", false, nil
		}
		client, ok := ClientOf(ev)
		if !ok {
			// A cart event the write side did not mark with its client: not
			// left alone as unwanted, but failed under the failure policy.
			return "", true, errors.New("no client in the cart event's metadata")
		}
		return client, true, nil
	}).Idempotency(projector.RevisionMap())
	open := func(s ClientSummary) ClientSummary {
		s.OpenCarts = maps.Clone(s.OpenCarts)
		if s.OpenCarts == nil {
			s.OpenCarts = map[string]int{}
		}
		return s
	}
	projector.On(p, func(s ClientSummary, e ShoppingCartOpened) (ClientSummary, error) {
		s = open(s)
		s.CartsOpened++
		s.OpenCarts[e.ShoppingCartID] = 0
		return s, nil
	})
	projector.On(p, func(s ClientSummary, e ProductItemAddedToShoppingCart) (ClientSummary, error) {
		s = open(s)
		s.OpenCarts[e.ShoppingCartID] += e.ProductItem.Quantity
		s.OpenQuantity += e.ProductItem.Quantity
		return s, nil
	})
	projector.On(p, func(s ClientSummary, e ProductItemRemovedFromShoppingCart) (ClientSummary, error) {
		s = open(s)
		s.OpenCarts[e.ShoppingCartID] -= e.ProductItem.Quantity
		s.OpenQuantity -= e.ProductItem.Quantity
		return s, nil
	})
	closeCart := func(s ClientSummary, cartID string) ClientSummary {
		s = open(s)
		s.OpenQuantity -= s.OpenCarts[cartID]
		delete(s.OpenCarts, cartID)
		return s
	}
	projector.On(p, func(s ClientSummary, e ShoppingCartConfirmed) (ClientSummary, error) {
		s = closeCart(s, e.ShoppingCartID)
		s.CartsConfirmed++
		return s, nil
	})
	projector.On(p, func(s ClientSummary, e ShoppingCartCanceled) (ClientSummary, error) {
		s = closeCart(s, e.ShoppingCartID)
		s.CartsCanceled++
		return s, nil
	})
	return p
}

// ShopSummary is the whole shop: carts by status, and the products bought
// most (by quantity in confirmed carts).
type ShopSummary struct {
	Open      int `bson:"open" json:"open"`
	Confirmed int `bson:"confirmed" json:"confirmed"`
	Canceled  int `bson:"canceled" json:"canceled"`
	// ConfirmedQuantity is the quantity of each product in confirmed carts.
	ConfirmedQuantity map[string]int `bson:"confirmedQuantity" json:"confirmedQuantity"`
	// Top ranks the products by confirmed quantity (then by id), at most
	// TopProducts of them.
	Top []ProductItem `bson:"top" json:"top"`
}

// ShopWindow is the shop summary's window of handled event ids: every cart
// event of the shop reaches its one document, so the window must cover the
// deliveries that can be in flight or redelivered at once.
const ShopWindow = 2000

// NewShopSummaryProjection returns the shop summary: one document fed by
// every cart. Its steps add and subtract, so their order does not matter,
// only that each event counts once: it keeps a bounded window of handled
// event ids on the document (no transaction needed).
func NewShopSummaryProjection() *projector.Projection[ShopSummary] {
	p := projector.New[ShopSummary](ShopSummaryName, func(ev projector.Event) (string, bool) {
		return ShopSummaryID, strings.HasPrefix(ev.StreamID, StreamPrefix)
	}).Idempotency(projector.HandledIDs(ShopWindow))
	projector.On(p, func(s ShopSummary, _ ShoppingCartOpened) (ShopSummary, error) {
		s.Open++
		return s, nil
	})
	projector.On(p, func(s ShopSummary, e ShoppingCartConfirmed) (ShopSummary, error) {
		s.Open--
		s.Confirmed++
		s.ConfirmedQuantity = maps.Clone(s.ConfirmedQuantity)
		if s.ConfirmedQuantity == nil {
			s.ConfirmedQuantity = map[string]int{}
		}
		for _, it := range e.ProductItems {
			s.ConfirmedQuantity[it.ProductID] += it.Quantity
		}
		s.Top = top(s.ConfirmedQuantity, TopProducts)
		return s, nil
	})
	projector.On(p, func(s ShopSummary, _ ShoppingCartCanceled) (ShopSummary, error) {
		s.Open--
		s.Canceled++
		return s, nil
	})
	return p
}

// top ranks quantities, highest first, ties by product id.
func top(q map[string]int, n int) []ProductItem {
	out := make([]ProductItem, 0, len(q))
	for id, v := range q {
		out = append(out, ProductItem{ProductID: id, Quantity: v})
	}
	slices.SortFunc(out, func(a, b ProductItem) int {
		if a.Quantity != b.Quantity {
			return b.Quantity - a.Quantity
		}
		return strings.Compare(a.ProductID, b.ProductID)
	})
	return out[:min(n, len(out))]
}
