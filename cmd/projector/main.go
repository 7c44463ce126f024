// Command projector keeps MongoDB read models of the shopping cart exactly
// right from an EventStoreDB event stream: the cart instance of package app.
//
//	projector run       project EventStoreDB events into MongoDB read models
//	projector status    where each projection stands
//	projector rebuild   replay a projection into a new collection, then switch to it
//	projector replay-parked  apply a projection's parked events again, after a fix
//	projector version   the version of this binary
//
// Run "projector <command> --help" for the flags of a command. Your own
// projections get the same command line from package app. The demo and the
// benchmark are in cmd/projector-lab, which runs the test servers this
// binary does not link; from a clone, "go run ./cmd/projector demo" runs
// its demo.
package main

import (
	"github.com/revgate/projector/app"
	"github.com/revgate/projector/internal/cartapp"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise
// the module version from the build info is used.
var version = ""

func main() { app.Main(config()) }

// config is the cart's projector, with demo handing over to
// cmd/projector-lab.
func config() app.Config {
	c := cartapp.Config("projector", version)
	c.Commands = []app.Command{{Name: "demo", Summary: "from a clone: run cmd/projector-lab's demo (the engine on embedded parts, with faults, every document checked)", Run: runDemo}}
	return c
}
