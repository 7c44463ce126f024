package app

import (
	"strings"
	"testing"
)

// The connection string's scheme picks the client: esdb:// the archived
// EventStore-Client-Go v4, kurrentdb://, kurrent:// and kdb:// (each also
// +discover) the maintained KurrentDB-Client-Go; anything else is refused
// in one line, without its password.
func TestOpenEventStore_the_scheme_picks_the_client(t *testing.T) {
	for uri, want := range map[string]string{
		"esdb://localhost:2113?tls=false":                 "esdb",
		"esdb+discover://localhost:2113?tls=false":        "esdb",
		"kurrentdb://localhost:2113?tls=false":            "kurrent",
		"kurrentdb+discover://localhost:2113?tls=false":   "kurrent",
		"kurrent://admin:changeit@localhost:2113":         "kurrent",
		"kdb://localhost:2113?tls=false":                  "kurrent",
		"KurrentDB://localhost:2113?tls=false":            "kurrent",
		"http://admin:hunter2@localhost:2113":             "",
		"localhost:2113":                                  "",
		"mongodb://admin:hunter2@localhost:27017/?x=true": "",
	} {
		a, err := adapterFor(uri)
		got := a.name
		if err == nil {
			es, err := openEventStore(uri, nil)
			if err != nil {
				t.Errorf("%s: %v", uri, err)
			} else {
				es.Close()
			}
		}
		if got != want {
			t.Errorf("%s: client %q (%v), want %q", uri, got, err, want)
		}
		if want == "" && (err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "kurrentdb://")) {
			t.Errorf("%s: %v, want one line naming the schemes, without the password", uri, err)
		}
	}
}
