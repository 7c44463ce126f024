package app

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/subscription"
)

// The event store is opened through Config.Dial, whatever the scheme of the
// connection string: esdb://, kurrentdb://, kurrent:// and kdb:// (each
// also +discover) reach it, and KurrentDB-Client-Go reads them all; anything
// else is refused in one line, without its password, before Dial is called.
func TestOpenEventStore_opens_through_Config_Dial_and_refuses_an_unknown_scheme(t *testing.T) {
	for uri, known := range map[string]bool{
		"esdb://localhost:2113?tls=false":                 true,
		"esdb+discover://localhost:2113?tls=false":        true,
		"kurrentdb://localhost:2113?tls=false":            true,
		"kurrentdb+discover://localhost:2113?tls=false":   true,
		"kurrent://admin:changeit@localhost:2113":         true,
		"kdb://localhost:2113?tls=false":                  true,
		"KurrentDB://localhost:2113?tls=false":            true,
		"http://admin:hunter2@localhost:2113":             false,
		"localhost:2113":                                  false,
		"mongodb://admin:hunter2@localhost:27017/?x=true": false,
	} {
		var dialed []string
		dial := func(uri string, logger *slog.Logger) (*subscription.Client, error) {
			dialed = append(dialed, uri)
			return kurrent.Dial(uri, logger)
		}
		es, err := openEventStore(dial, uri, nil)
		switch {
		case known && err != nil:
			t.Errorf("%s: %v", uri, err)
		case known && len(dialed) != 1:
			t.Errorf("%s: Config.Dial called %d times, want once", uri, len(dialed))
		case !known && len(dialed) != 0:
			t.Errorf("%s: Config.Dial called for a scheme no client reads", uri)
		case !known && (err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "kurrentdb://")):
			t.Errorf("%s: %v, want one line naming the schemes, without the password", uri, err)
		}
		if err == nil {
			es.Close()
		}
	}
}
