package mongostore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

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

// A checkpoint another lease wrote is taken over once that lease is not
// held, and then refuses the writes of the lease it was taken from: a
// rebuild's segment checkpoints pass to the runs that go on from them, and
// a rebuild process that lost its lease cannot write them back.
func TestLease_a_checkpoint_passes_to_another_lease_once_the_one_that_wrote_it_is_let_go(t *testing.T) {
	s := mongostore.New(mongotest.Database(t))
	ctx := context.Background()
	rb, err := s.AcquireLease(ctx, "rebuild x/segment-0-of-2", "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCheckpointUnder(ctx, "x/segment-0-of-2", projector.Checkpoint{Position: 10}, rb, 0); err != nil {
		t.Fatal(err)
	}
	run, err := s.AcquireLease(ctx, "x/segment-0-of-2", "B", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// While the rebuild's lease is held, the run's save is refused.
	if err := s.SaveCheckpointUnder(ctx, "x/segment-0-of-2", projector.Checkpoint{Position: 20}, run, 0); !errors.Is(err, mongostore.ErrFenced) ||
		!strings.Contains(err.Error(), "rebuild x/segment-0-of-2") {
		t.Fatalf("a save under another lease while the first is held: %v, want ErrFenced naming it", err)
	}
	if err := s.ReleaseLease(ctx, rb); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCheckpointUnder(ctx, "x/segment-0-of-2", projector.Checkpoint{Position: 20}, run, 0); err != nil {
		t.Fatalf("a save under another lease once the first is let go: %v", err)
	}
	// The rebuild's process, late, under its old token: refused, as the
	// run's lease is held; the checkpoint stays.
	if err := s.SaveCheckpointUnder(ctx, "x/segment-0-of-2", projector.Checkpoint{Position: 30}, rb, 0); !errors.Is(err, mongostore.ErrFenced) {
		t.Fatalf("a write of the lease taken over from: %v, want ErrFenced", err)
	}
	if cp, err := s.LoadCheckpoint(ctx, "x/segment-0-of-2"); err != nil || cp == nil || cp.Position != 20 {
		t.Fatalf("checkpoint %v (%v), want 20", cp, err)
	}
	// Taken over, the checkpoint does not move back either.
	if err := s.SaveCheckpointUnder(ctx, "x/segment-0-of-2", projector.Checkpoint{Position: 25}, run, 0); err != nil {
		t.Fatal(err)
	}
	other, err := s.AcquireLease(ctx, "y", "C", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCheckpointUnder(ctx, "x/segment-0-of-2", projector.Checkpoint{Position: 5}, other, 0); err != nil {
		t.Fatal(err)
	}
	if cp, _ := s.LoadCheckpoint(ctx, "x/segment-0-of-2"); cp.Position != 25 {
		t.Fatalf("checkpoint at %v, want 25 (never back)", cp)
	}
}

// A checkpoint written under a token before leases were named keeps its
// token: a lower one is refused, a higher one writes it.
func TestLease_a_checkpoint_of_an_unnamed_token_is_fenced_by_the_token(t *testing.T) {
	db := mongotest.Database(t)
	s := mongostore.New(db)
	ctx := context.Background()
	if _, err := db.Collection("projector_checkpoints").InsertOne(ctx, bson.D{{Key: "_id", Value: "p"}, {Key: "position", Value: int64(10)}, {Key: "lease", Value: int64(5)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCheckpointUnder(ctx, "p", projector.Checkpoint{Position: 20}, mongostore.Lease{Name: "p", Token: 4}, 0); !errors.Is(err, mongostore.ErrFenced) {
		t.Fatalf("a lower token: %v, want ErrFenced", err)
	}
	if err := s.SaveCheckpointUnder(ctx, "p", projector.Checkpoint{Position: 20}, mongostore.Lease{Name: "p", Token: 6}, 0); err != nil {
		t.Fatal(err)
	}
	if cp, err := s.LoadCheckpoint(ctx, "p"); err != nil || cp.Position != 20 {
		t.Fatalf("checkpoint %v (%v), want 20", cp, err)
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
	if err := s.SaveCheckpointUnder(ctx, "p", projector.Checkpoint{Position: 10}, a, 0); err != nil {
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
	if err := s.SaveCheckpointUnder(ctx, "p", projector.Checkpoint{Position: 20}, b, 0); err != nil {
		t.Fatal(err)
	}
	// The old holder, late: fenced, and the checkpoint stays.
	if err := s.SaveCheckpointUnder(ctx, "p", projector.Checkpoint{Position: 30}, a, 0); !errors.Is(err, mongostore.ErrFenced) {
		t.Fatalf("a write under the old token: %v, want ErrFenced", err)
	}
	if cp, err := s.LoadCheckpoint(ctx, "p"); err != nil || cp.Position != 20 {
		t.Fatalf("checkpoint %v (%v), want 20", cp, err)
	}
	// A checkpoint never moves back, under the current token either.
	if err := s.SaveCheckpointUnder(ctx, "p", projector.Checkpoint{Position: 5}, b, 0); err != nil {
		t.Fatal(err)
	}
	if cp, _ := s.LoadCheckpoint(ctx, "p"); cp.Position != 20 {
		t.Fatalf("checkpoint moved back to %v", cp)
	}
	if err := s.ReleaseLease(ctx, b); err != nil {
		t.Fatal(err)
	}
	// A renewal of the released lease that reaches the server after the
	// release (sent before it, and abandoned as its process stopped) finds
	// it lost: it does not hold it again.
	if l, err := s.RenewLease(ctx, b, ttl); !errors.Is(err, mongostore.ErrLeaseLost) {
		t.Fatalf("a renewal after the release: %+v %v, want ErrLeaseLost", l, err)
	}
	if c, err := s.AcquireLease(ctx, "p", "C", ttl); err != nil || c.Token != 3 {
		t.Fatalf("after a release: %+v %v", c, err)
	}
	leases, err := s.Leases(ctx)
	if err != nil || leases["p"].Holder != "C" || !leases["p"].Held(time.Now()) {
		t.Fatalf("leases %+v (%v)", leases, err)
	}
}

// Leases with prefixes reads the leases whose names start with one of them
// only (a prefix is a name, not a pattern): a process that looks at its
// projection's leases often does not read every lease ever taken.
func TestLease_Leases_reads_those_of_a_prefix_only(t *testing.T) {
	ctx := context.Background()
	s := mongostore.New(mongotest.Database(t))
	for _, name := range []string{"a.b", "a.b/segment-0-of-2", "axb/segment-0-of-2", "rebuild a.b_r1/segment-0-of-2", "c"} {
		if _, err := s.AcquireLease(ctx, name, "h", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		prefixes []string
		want     string
	}{{nil, "a.b a.b/segment-0-of-2 axb/segment-0-of-2 c rebuild a.b_r1/segment-0-of-2"}, {[]string{"a.b"}, "a.b a.b/segment-0-of-2"},
		{[]string{"rebuild a.b", "c"}, "c rebuild a.b_r1/segment-0-of-2"}} {
		leases, err := s.Leases(ctx, tc.prefixes...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for name := range leases {
			got = append(got, name)
		}
		slices.Sort(got)
		if strings.Join(got, " ") != tc.want {
			t.Errorf("Leases(%q) = %q, want %q", tc.prefixes, got, tc.want)
		}
	}
}
