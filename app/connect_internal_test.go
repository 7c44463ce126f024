package app

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/nettest"
	"github.com/revgate/projector/kurrent"
)

// A port that accepts and never answers: dial gives up at the connect
// timeout, not when the official client's call it abandoned returns (its
// Close waits up to 5 s for that call).
func TestDial_gives_up_at_the_connect_timeout_on_a_server_that_never_answers(t *testing.T) {
	silent := nettest.Silent(t)
	s := servers{esdb: "esdb://" + silent + "?tls=false", timeout: 200 * time.Millisecond, dial: kurrent.Dial}
	began := time.Now()
	_, err := dial(context.Background(), s, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "does not answer within 200ms") {
		t.Fatalf("dial = %v, want that it does not answer", err)
	}
	// The client's Close would wait 5 s; 3 s leaves the machine's load a
	// wide margin.
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("dial gave up after %v, with a connect timeout of 200ms", took)
	}
}
