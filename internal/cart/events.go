// Package cart is the reference domain of the projector: the shopping cart of
// the seed article, its events, the merge logic of its product items, and the
// projections that read models are built from.
//
// A cart lives in the stream "shopping_cart-<cart id>": it is opened, product
// items are added and removed, and it is confirmed or canceled. Adding a
// product the cart holds already increases its quantity; removing decreases it
// and drops the item at zero; removing more than the cart holds is an error.
package cart

import (
	"time"

	"github.com/revgate/projector/projector"
)

// Category is the EventStoreDB category of the cart streams.
const Category = "shopping_cart"

// StreamPrefix starts the name of every cart stream; the rest is the cart id.
const StreamPrefix = Category + "-"

// StreamID returns the stream of cart id.
func StreamID(cartID string) string { return StreamPrefix + cartID }

// ProductItem is a quantity of one product.
type ProductItem struct {
	ProductID string `json:"productId" bson:"productId"`
	Quantity  int    `json:"quantity" bson:"quantity"`
}

// ShoppingCartOpened starts a cart.
type ShoppingCartOpened struct {
	ShoppingCartID string    `json:"shoppingCartId"`
	ClientID       string    `json:"clientId"`
	OpenedAt       time.Time `json:"openedAt"`
}

// ProductItemAddedToShoppingCart adds a quantity of a product.
type ProductItemAddedToShoppingCart struct {
	ShoppingCartID string      `json:"shoppingCartId"`
	ProductItem    ProductItem `json:"productItem"`
}

// ProductItemRemovedFromShoppingCart removes a quantity of a product.
type ProductItemRemovedFromShoppingCart struct {
	ShoppingCartID string      `json:"shoppingCartId"`
	ProductItem    ProductItem `json:"productItem"`
}

// ShoppingCartConfirmed closes a cart for checkout. It carries the items
// confirmed, so that read models of what was bought (the shop summary) need
// not keep every cart's items.
type ShoppingCartConfirmed struct {
	ShoppingCartID string        `json:"shoppingCartId"`
	ConfirmedAt    time.Time     `json:"confirmedAt"`
	ProductItems   []ProductItem `json:"productItems,omitempty"`
}

// ShoppingCartCanceled closes a cart without checkout: the client abandoned it.
// Read models need it to tell an abandoned cart from one still open.
type ShoppingCartCanceled struct {
	ShoppingCartID string    `json:"shoppingCartId"`
	CanceledAt     time.Time `json:"canceledAt"`
}

// Event type names, as stored in the event store.
const (
	TypeOpened    = "ShoppingCartOpened"
	TypeAdded     = "ProductItemAddedToShoppingCart"
	TypeRemoved   = "ProductItemRemovedFromShoppingCart"
	TypeConfirmed = "ShoppingCartConfirmed"
	TypeCanceled  = "ShoppingCartCanceled"
)

// Register adds the cart's event types to r.
func Register(r *projector.Registry) {
	projector.Register[ShoppingCartOpened](r, TypeOpened)
	projector.Register[ProductItemAddedToShoppingCart](r, TypeAdded)
	projector.Register[ProductItemRemovedFromShoppingCart](r, TypeRemoved)
	projector.Register[ShoppingCartConfirmed](r, TypeConfirmed)
	projector.Register[ShoppingCartCanceled](r, TypeCanceled)
}

// Registry returns a registry holding the cart's event types.
func Registry() *projector.Registry {
	r := projector.NewRegistry()
	Register(r)
	return r
}
