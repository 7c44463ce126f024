package mongostore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

func TestLease_one_holder_at_a_time_a_new_token_each_holding_and_fenced_checkpoints(t *testing.T) {
	testLease(t, mongostore.New(mongotest.Database(t)))
}

// The same on MongoDB, whose conditional writes are atomic (the embedded
// server's are not: two takers of an expired lease can both match there).
func TestLease_on_MongoDB_in_Docker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the Docker tier")
	}
	testLease(t, mongostore.New(mongotest.Docker(t)))
}

// Two processes race for an expired lease many times on MongoDB: exactly
// one takes it each time.
func TestLease_racing_takers_on_MongoDB_in_Docker_one_wins(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the Docker tier")
	}
	s := mongostore.New(mongotest.Docker(t))
	ctx := context.Background()
	for round := range 30 {
		name := fmt.Sprintf("race-%d", round)
		wins := make(chan bool, 4)
		for i := range 4 {
			go func() {
				_, err := s.AcquireLease(ctx, name, fmt.Sprintf("taker-%d", i), time.Minute)
				wins <- err == nil
			}()
		}
		won := 0
		for range 4 {
			if <-wins {
				won++
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d takers hold the lease", round, won)
		}
	}
}

func testLease(t *testing.T, s *mongostore.Store) {
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	a, err := s.AcquireLease(ctx, "p", "A", ttl)
	if err != nil || a.Holder != "A" || a.Token != 1 {
		t.Fatalf("first: %+v %v", a, err)
	}
	if held, err := s.AcquireLease(ctx, "p", "B", ttl); !errors.Is(err, mongostore.ErrLeaseHeld) || held.Holder != "A" || !strings.Contains(err.Error(), "A holds the lease") {
		t.Fatalf("second holder: %+v %v, want ErrLeaseHeld naming A", held, err)
	}
	if a, err = s.RenewLease(ctx, a, ttl); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if err := s.SaveCheckpointUnder(ctx, "p", projector.Checkpoint{Position: 10}, a.Token); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 50*time.Millisecond) // A dies: no renewal
	b, err := s.AcquireLease(ctx, "p", "B", ttl)
	if err != nil || b.Holder != "B" || b.Token != 2 {
		t.Fatalf("after the expiry: %+v %v", b, err)
	}
	if _, err := s.RenewLease(ctx, a, ttl); !errors.Is(err, mongostore.ErrLeaseLost) {
		t.Fatalf("the old holder renews: %v, want ErrLeaseLost", err)
	}
	if err := s.SaveCheckpointUnder(ctx, "p", projector.Checkpoint{Position: 20}, b.Token); err != nil {
		t.Fatal(err)
	}
	// The old holder, late: fenced, and the checkpoint stays.
	if err := s.SaveCheckpointUnder(ctx, "p", projector.Checkpoint{Position: 30}, a.Token); !errors.Is(err, mongostore.ErrFenced) {
		t.Fatalf("a write under the old token: %v, want ErrFenced", err)
	}
	if cp, err := s.LoadCheckpoint(ctx, "p"); err != nil || cp.Position != 20 {
		t.Fatalf("checkpoint %v (%v), want 20", cp, err)
	}
	// A checkpoint never moves back, under the current token either.
	if err := s.SaveCheckpointUnder(ctx, "p", projector.Checkpoint{Position: 5}, b.Token); err != nil {
		t.Fatal(err)
	}
	if cp, _ := s.LoadCheckpoint(ctx, "p"); cp.Position != 20 {
		t.Fatalf("checkpoint moved back to %v", cp)
	}
	if err := s.ReleaseLease(ctx, b); err != nil {
		t.Fatal(err)
	}
	if c, err := s.AcquireLease(ctx, "p", "C", ttl); err != nil || c.Token != 3 {
		t.Fatalf("after a release: %+v %v", c, err)
	}
	leases, err := s.Leases(ctx)
	if err != nil || leases["p"].Holder != "C" || !leases["p"].Held(time.Now()) {
		t.Fatalf("leases %+v (%v)", leases, err)
	}
}
