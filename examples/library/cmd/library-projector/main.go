// Command library-projector keeps the lending desk's read models in MongoDB
// from the library's EventStoreDB: the projector's command line (run,
// status, rebuild, replay-parked, version) for the projections of package
// lending.
package main

import (
	"github.com/revgate/projector/app"
	"github.com/revgate/projector/app/embedmongo"
	"github.com/revgate/projector/kurrent"

	"example.com/library/lending"
)

func main() { app.Main(config()) }

func config() app.Config {
	return app.Config{
		Name:     "library-projector",
		Registry: lending.Registry(),
		Dial:     kurrent.Dial, // KurrentDB-Client-Go, for esdb:// and kurrentdb://
		Projections: []app.Projection{
			{Definition: lending.NewLoans(), Reads: app.StreamPrefix(lending.LoanStreams)},
			{Definition: lending.NewMembers(), Reads: app.StreamPrefix(lending.LoanStreams)},
			{Definition: lending.NewDeskStats(), Reads: app.EventTypes(lending.StatsTypes...), Workers: 1},
		},
		Embedded: embedmongo.Start, // without --mongo: an embedded Mongo-wire server
		Commands: []app.Command{{Name: "seed", Summary: "append sample loans to an EventStoreDB, to try the projector", Run: seed}},
	}
}
