// Command projector-lab is the cart's projector (cmd/projector) with a
// demo and a benchmark, which run the EventStoreDB-protocol test server in
// their process. It is for trying and measuring the engine from a clone;
// deploy cmd/projector, which links no test server.
//
//	projector-lab demo      the engine on embedded parts, with faults, checked
//	projector-lab bench     catch-up measured three ways, with ratios
//	projector-lab run, status, rebuild, replay-parked, version: as cmd/projector
//
// Run "projector-lab <command> --help" for the flags of a command.
package main

import (
	"github.com/revgate/projector/app"
	"github.com/revgate/projector/internal/cartapp"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise
// the module version from the build info is used.
var version = ""

func main() { app.Main(config()) }

// config is the cart's projector with demo and bench.
func config() app.Config {
	c := cartapp.Config("projector-lab", version)
	c.Commands = []app.Command{
		{Name: "demo", Summary: "run the engine on embedded parts with injected faults and check every document", Run: runDemo},
		{Name: "bench", Summary: "measure catch-up: the projector, the per-event approach, the bulk-write floor", Run: runBench},
		{Name: "bench-catch-up", Hidden: true, Run: runBenchCatchUp}, // bench starts it
	}
	return c
}
