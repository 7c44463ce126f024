package kurrent_test

import (
	"os"
	"strings"
	"testing"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/kurrent"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Main(m)) }

// The acceptance suite of the sources, on KurrentDB-Client-Go against the
// esdbtest double, addressed with the kurrentdb:// scheme.
func TestSources_on_KurrentDB_Client_Go(t *testing.T) { sourcetest.Run(t, kit) }

// kit is what the acceptance suite needs of this adapter. The double's
// esdb:// URIs are dialed as kurrentdb://, the scheme this client adds.
var kit = sourcetest.Kit{
	Name: "KurrentDB-Client-Go v1.1.2",
	Dial: func(uri string) (sourcetest.Client, error) {
		c, err := kurrent.Dial(kurrentScheme(uri), nil)
		if err != nil {
			return nil, err
		}
		return sourcetest.Sources(c), nil
	},
}

// kurrentScheme rewrites an esdb:// connection string as kurrentdb://.
func kurrentScheme(uri string) string {
	if rest, ok := strings.CutPrefix(uri, "esdb://"); ok {
		return "kurrentdb://" + rest
	}
	return uri
}
