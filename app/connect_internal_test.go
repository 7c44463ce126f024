package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// slowHead is an event store whose Head answers only once it is let go,
// whatever its context says, as a client that dialled a port that accepts
// and never answers does for seconds.
type slowHead struct {
	eventStore
	release, returned chan struct{}
}

func (s slowHead) String() string          { return "esdb://silent" }
func (s slowHead) Address() (string, bool) { return "", false }
func (s slowHead) TLS() bool               { return false }
func (s slowHead) Head(context.Context) (uint64, error) {
	<-s.release
	close(s.returned)
	return 0, errors.New("closed")
}

// The probe of the event store gives up when its timeout is up, not when
// the client does.
func TestProbeESDB_gives_up_at_its_timeout_while_the_client_hangs(t *testing.T) {
	s := slowHead{release: make(chan struct{}), returned: make(chan struct{})}
	defer close(s.release)
	err := probeESDB(context.Background(), s, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "does not answer within 50ms") {
		t.Fatalf("probe = %v, want that it does not answer", err)
	}
	select {
	case <-s.returned:
		t.Fatal("the probe returned only after the client did")
	default:
	}
}
