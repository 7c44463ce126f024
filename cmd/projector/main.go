// Command projector keeps MongoDB read models of the shopping cart exactly
// right from an EventStoreDB event stream: the cart instance of package app,
// plus a demo and a benchmark.
//
//	projector run       project EventStoreDB events into MongoDB read models
//	projector status    where each projection stands
//	projector rebuild   replay a projection into a new collection, then switch to it
//	projector replay-parked  apply a projection's parked events again, after a fix
//	projector demo      the engine on embedded parts, with faults, checked
//	projector bench     catch-up measured three ways, with ratios
//	projector version   the version of this binary
//
// Run "projector <command> --help" for the flags of a command. Your own
// projections get the same command line from package app.
package main

import (
	"github.com/revgate/projector/app"
	"github.com/revgate/projector/app/embedmongo"
	"github.com/revgate/projector/cart"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise
// the module version from the build info is used.
var version = ""

func main() { app.Main(config()) }

// config is the cart's projector: its three projections, all reading the
// shopping_cart category, the embedded Mongo-wire default, demo and bench.
func config() app.Config {
	carts := app.Category(cart.Category)
	return app.Config{
		Name:     "projector",
		Version:  version,
		Registry: cart.Registry(),
		Projections: []app.Projection{
			{Definition: cart.NewDetailsProjection(), Reads: carts},
			{Definition: cart.NewClientSummaryProjection(), Reads: carts},
			// One document fed by every stream: one worker writes it, in log
			// order (its window of handled ids needs no room for events of
			// other workers in flight; its batches fold them all anyway).
			{Definition: cart.NewShopSummaryProjection(), Reads: carts, Workers: 1},
		},
		Embedded: embedmongo.Start,
		Commands: []app.Command{
			{Name: "demo", Summary: "run the engine on embedded parts with injected faults and check every document", Run: runDemo},
			{Name: "bench", Summary: "measure catch-up: the projector, the per-event approach, the bulk-write floor", Run: runBench},
			{Name: "bench-catch-up", Hidden: true, Run: runBenchCatchUp}, // bench starts it
		},
	}
}
