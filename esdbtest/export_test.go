package esdbtest

import (
	"testing"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
)

// ClientAs is [Server.Client] running as a user ([Server.URIAs]), for the
// tests of package esdbtest_test.
func ClientAs(s *Server, tb testing.TB, name, password string) *kurrentdb.Client {
	tb.Helper()
	return s.client(tb, s.URIAs(name, password))
}

// Len is the number of events in s's log ([Server.size]).
func Len(s *Server) int { return s.size() }
