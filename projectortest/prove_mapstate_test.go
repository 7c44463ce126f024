package projectortest_test

import (
	"context"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// quantities is a state that is a map: quantity by product.
type quantities map[string]int

// openState is a struct whose inline map takes every field it has no
// field for.
type openState struct {
	Lines int            `bson:"lines"`
	Rest  map[string]int `bson:",inline"`
}

// A state that is a map, or a struct with an inline map, holds what its
// handlers put there, not the engine's fields of its document (its id, its
// revision, its meta): those are the store's, kept beside it.
func TestProve_passes_states_that_take_any_field(t *testing.T) {
	for _, strategy := range []projector.Strategy{projector.StreamRevision(), projector.RevisionMap(), projector.HandledIDs(100)} {
		t.Run("map/"+strategy.String(), func(t *testing.T) {
			p := projector.New[quantities]("quantities", projector.StreamSuffix(cart.StreamPrefix)).Idempotency(strategy)
			projector.On(p, func(s quantities, e cart.ProductItemAddedToShoppingCart) (quantities, error) {
				out := quantities{}
				for k, v := range s {
					out[k] = v
				}
				out[e.ProductItem.ProductID] += e.ProductItem.Quantity
				return out, nil
			})
			store := mongostore.New(mongotest.Database(t))
			if _, err := projectortest.Prove(context.Background(), store, cart.Registry(), p, lives(5, 6, 4), projectortest.Delivery{Seed: 4}); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("inline/"+strategy.String(), func(t *testing.T) {
			p := projector.New[openState]("open_state", projector.StreamSuffix(cart.StreamPrefix)).Idempotency(strategy)
			projector.On(p, func(s openState, e cart.ProductItemAddedToShoppingCart) (openState, error) {
				rest := map[string]int{}
				for k, v := range s.Rest {
					rest[k] = v
				}
				rest[e.ProductItem.ProductID] += e.ProductItem.Quantity
				return openState{Lines: s.Lines + 1, Rest: rest}, nil
			})
			store := mongostore.New(mongotest.Database(t))
			if _, err := projectortest.Prove(context.Background(), store, cart.Registry(), p, lives(5, 6, 4), projectortest.Delivery{Seed: 4}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
