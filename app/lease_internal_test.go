package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
)

// While MongoDB does not answer, a process that takes a projection's lease
// is not a standby (no other process is known to run it): readiness says
// it is retrying, and why; once taking it has failed for leadGiveUp, the
// projection stops with the error, as a run gives up on an event store
// that does not answer.
func TestLead_retries_while_MongoDB_does_not_answer_and_gives_up(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing answers there
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?serverSelectionTimeoutMS=200&connectTimeoutMS=200"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	defer func(d time.Duration) { leadGiveUp = d }(leadGiveUp)
	leadGiveUp = 2 * time.Second
	s := &session{c: &runConfig{lease: 400 * time.Millisecond}, store: mongostore.New(client.Database("x")), holder: "run h/1/a", logger: slog.New(slog.DiscardHandler)}
	sl := &slot{name: "p"}
	type result struct {
		held *heldLease
		err  error
	}
	done := make(chan result, 1)
	go func() {
		held, err := s.lead(context.Background(), sl)
		done <- result{held, err}
	}()
	var seen []string
	deadline := time.Now().Add(time.Minute)
	for {
		if time.Now().After(deadline) {
			t.Fatal("lead did not give up in a minute")
		}
		if down := sl.down.Load(); down != nil && (len(seen) == 0 || seen[len(seen)-1] != *down) {
			seen = append(seen, *down)
		}
		select {
		case r := <-done:
			if r.held != nil || r.err == nil || !strings.Contains(r.err.Error(), "taking the projection's lease failed for 2s") {
				t.Fatalf("lead: %v, %v; want it to give up", r.held, r.err)
			}
			for _, down := range seen {
				if !strings.HasPrefix(down, "retrying: taking its lease") {
					t.Errorf("readiness said %q while MongoDB did not answer", down)
				}
			}
			if len(seen) == 0 {
				t.Error("readiness said nothing while MongoDB did not answer")
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A lease lost because MongoDB stopped answering its renewal is let go in
// passing when the run stops: the release waits a second at most, not the
// lease's time, so that a stop (SIGTERM, a supervisor's grace period) does
// not wait out another timeout on a server that does not answer.
func TestRelease_of_a_lost_lease_waits_a_second_at_most(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // it accepts, and never answers
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + l.Addr().String() + "/?serverSelectionTimeoutMS=60000&connectTimeoutMS=60000"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	done := make(chan struct{})
	close(done) // no renewal running
	h := &heldLease{store: mongostore.New(client.Database("x")), ttl: 15 * time.Second, logger: slog.New(slog.DiscardHandler),
		lease: mongostore.Lease{Name: "p", Holder: "run h/1/a", Token: 3}, lost: make(chan struct{}), stop: func() {}, done: done}
	h.markLost(errors.New("not renewed in time"))
	began := time.Now()
	h.release()
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("releasing a lost lease on a server that does not answer took %v, want about a second", took)
	}
}

// A run whose lease is lost stops, and the process says at once that it
// is no longer the leader and why (readiness, the metrics), not once the
// run has drained, which waits on a MongoDB that does not answer.
func TestWatchLost_says_a_lost_lease_at_once(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	h, _, err := holdLease(context.Background(), store, "p", "A", time.Minute, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer h.release()
	sl := &slot{name: "p"}
	sl.leader.Store(true)
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchLost(runCtx, sl, h, cancel)
	h.markLost(errors.New("not renewed in time"))
	select {
	case <-runCtx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the run was not stopped")
	}
	if sl.Leader() || !strings.HasPrefix(sl.Down(), "retrying: lost its lease") {
		t.Errorf("leader %v, down %q; want not leader, retrying", sl.Leader(), sl.Down())
	}
}
