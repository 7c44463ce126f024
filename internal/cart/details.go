package cart

import (
	"time"

	"github.com/revgate/projector/projector"
)

// Cart statuses.
const (
	StatusOpened    = "Opened"
	StatusConfirmed = "Confirmed"
	StatusCanceled  = "Canceled"
)

// Details is the read model of one cart: the document the API shows a client.
// Times are kept in UTC to the millisecond, as MongoDB stores them, so that a
// document read back equals the fold that wrote it.
type Details struct {
	ClientID     string        `bson:"clientId" json:"clientId"`
	Status       string        `bson:"status" json:"status"`
	ProductItems []ProductItem `bson:"productItems" json:"productItems"`
	OpenedAt     time.Time     `bson:"openedAt" json:"openedAt"`
	ConfirmedAt  *time.Time    `bson:"confirmedAt,omitempty" json:"confirmedAt,omitempty"`
	CanceledAt   *time.Time    `bson:"canceledAt,omitempty" json:"canceledAt,omitempty"`
}

// DetailsName is the name (and collection) of the cart-details projection.
const DetailsName = "cart_details"

// NewDetailsProjection returns the cart-details projection: one document per
// cart, its id the cart id, indexed by client and status for the API's lists.
func NewDetailsProjection() *projector.Projection[Details] {
	p := projector.New[Details](DetailsName, projector.StreamSuffix(StreamPrefix)).RoutesByEnvelope().
		WithIndex(projector.Index{Keys: []string{"clientId", "status"}})
	projector.Create(p, func(e ShoppingCartOpened) (Details, error) {
		return Details{
			ClientID:     e.ClientID,
			Status:       StatusOpened,
			ProductItems: []ProductItem{},
			OpenedAt:     storedTime(e.OpenedAt),
		}, nil
	})
	projector.On(p, func(d Details, e ProductItemAddedToShoppingCart) (Details, error) {
		items, err := AddProductItem(d.ProductItems, e.ProductItem)
		d.ProductItems = items
		return d, err
	})
	projector.On(p, func(d Details, e ProductItemRemovedFromShoppingCart) (Details, error) {
		items, err := RemoveProductItem(d.ProductItems, e.ProductItem)
		d.ProductItems = items
		return d, err
	})
	projector.On(p, func(d Details, e ShoppingCartConfirmed) (Details, error) {
		t := storedTime(e.ConfirmedAt)
		d.Status, d.ConfirmedAt = StatusConfirmed, &t
		return d, nil
	})
	projector.On(p, func(d Details, e ShoppingCartCanceled) (Details, error) {
		t := storedTime(e.CanceledAt)
		d.Status, d.CanceledAt = StatusCanceled, &t
		return d, nil
	})
	return p
}

// storedTime is t as MongoDB keeps it: UTC, to the millisecond.
func storedTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
