package esdbv4_test

import (
	"os"
	"testing"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/subscription/esdbv4"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Main(m)) }

// The acceptance suite of the sources, on EventStore-Client-Go v4 against
// the esdbtest double. The double is built on KurrentDB-Client-Go's
// protocol code, so this test binary links both clients: the Makefile builds
// it with the protobuf registry's conflict policy set to ignore (see the
// package documentation).
func TestSources_on_EventStore_Client_Go_v4(t *testing.T) { sourcetest.Run(t, kit) }

// kit is what the acceptance suite needs of this adapter.
var kit = sourcetest.Kit{
	Name: "EventStore-Client-Go v4",
	Dial: func(uri string) (sourcetest.Client, error) {
		c, err := esdbv4.Dial(uri, nil)
		if err != nil {
			return nil, err
		}
		return sourcetest.Sources(c), nil
	},
}
