// Package cartapp is the cart's command line: package app with the cart's
// three projections, all reading the shopping_cart category, and the
// embedded Mongo-wire default, on KurrentDB-Client-Go (kurrent.Dial, which
// reads esdb:// and kurrentdb:// connection strings alike): the binaries
// link that client only. cmd/projector deploys it; cmd/projector-lab adds
// the demo and the benchmark.
package cartapp

import (
	"github.com/revgate/projector/app"
	"github.com/revgate/projector/app/embedmongo"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/kurrent"
)

// Config is the cart's projector, named name, at version.
func Config(name, version string) app.Config {
	carts := app.Category(cart.Category)
	return app.Config{
		Name:     name,
		Version:  version,
		Registry: cart.Registry(),
		Dial:     kurrent.Dial,
		Projections: []app.Projection{
			{Definition: cart.NewDetailsProjection(), Reads: carts},
			{Definition: cart.NewClientSummaryProjection(), Reads: carts},
			// One document fed by every stream: one worker writes it, in log
			// order (its window of handled ids needs no room for events of
			// other workers in flight; its batches fold them all anyway).
			{Definition: cart.NewShopSummaryProjection(), Reads: carts, Workers: 1},
		},
		Embedded: embedmongo.Start,
	}
}
