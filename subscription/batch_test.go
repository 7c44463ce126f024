package subscription_test

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// The batched catch-up and the per-event path, each on a database of its
// own, through the same faults: duplicated deliveries, two dropped
// subscriptions, and a restart from a checkpoint older than what was applied
// (a process that died before storing it). Their documents must be the same,
// and the fold.
func TestAll_batched_and_per_event_runners_write_the_same_documents_under_duplicates_drops_and_restarts(t *testing.T) {
	server := esdbtest.New(t)
	g := sourcetest.NewCarts(sourcetest.Sources(dial(t, server.URI())))
	g.Append(t, 11, 12, 40)
	server.DuplicateDeliveries(0.2)
	ctx := context.Background()

	run := func(name string, store *mongostore.Store, batch int) (first, second projector.RunnerStats) {
		c := dial(t, server.URI())
		opts := []projector.RunnerOption{projector.WithCheckpointEvery(40, 50*time.Millisecond), projector.WithBatch(batch, 5*time.Millisecond)}
		r := sourcetest.NewRunner(t, name, sourcetest.Engine(t, store), cartsOnAll(t, c), store, opts...)
		x := sourcetest.Start(t, r)
		for i := range 2 {
			x.WaitFor(t, "events", func(st projector.RunnerStats) bool { return st.Events >= uint64((i+1)*g.Total/3) })
			server.DropSubscriptions()
			x.WaitFor(t, "resubscription", func(st projector.RunnerStats) bool { return st.Subscriptions >= uint64(i+2) })
		}
		x.WaitFor(t, "the checkpoint past the last cart event", g.Reached())
		if err := x.Stop(); err != nil {
			t.Fatalf("%s: Run: %v", name, err)
		}
		first = r.Stats()
		// Restart from halfway, as if the later checkpoints were never stored.
		if err := store.DeleteCheckpoint(ctx, name); err != nil {
			t.Fatal(err)
		}
		half := server.Head() / 2
		if err := store.SaveCheckpoint(ctx, name, projector.Checkpoint{Position: half, Prepare: half}); err != nil {
			t.Fatal(err)
		}
		r2 := sourcetest.NewRunner(t, name, sourcetest.Engine(t, store), cartsOnAll(t, c), store, opts...)
		y := sourcetest.Start(t, r2)
		y.WaitFor(t, "the checkpoint past the last cart event again", g.Reached())
		if err := y.Stop(); err != nil {
			t.Fatalf("%s: second Run: %v", name, err)
		}
		return first, r2.Stats()
	}

	batched := mongostore.New(mongotest.Database(t))
	perEvent := mongostore.New(mongotest.Database(t))
	b1, b2 := run("batched", batched, 100)
	p1, p2 := run("per-event", perEvent, 1)
	t.Logf("batched %+v then %+v", b1, b2)
	t.Logf("per-event %+v then %+v", p1, p2)
	for _, c := range []struct {
		name          string
		first, second projector.RunnerStats
		batches       bool
	}{{"batched", b1, b2, true}, {"per-event", p1, p2, false}} {
		if c.first.Applied != uint64(g.Total) || c.first.Drops < 2 || c.first.Duplicates == 0 || c.first.Failed != 0 {
			t.Errorf("%s, first run: want each of the %d events applied once through 2 drops and duplicates: %+v", c.name, g.Total, c.first)
		}
		if c.second.Applied != 0 || c.second.Duplicates == 0 || c.second.Failed != 0 {
			t.Errorf("%s, restart: want the second half again, all duplicates: %+v", c.name, c.second)
		}
		if got := c.first.Batches > 0 && c.first.Batched > 2*c.first.Batches; got != c.batches {
			t.Errorf("%s: %d batches of %d events in all; want batching %v", c.name, c.first.Batches, c.first.Batched, c.batches)
		}
	}
	g.Check(t, batched)
	g.Check(t, perEvent)
	for id := range g.Events {
		a, b := document(t, batched, id), document(t, perEvent, id)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("cart %s: batched %+v, per-event %+v", id, a, b)
		}
	}
}

// document reads a cart's document as stored.
func document(t *testing.T, s *mongostore.Store, id string) any {
	t.Helper()
	var d cart.Details
	rev, found, err := s.Load(context.Background(), cart.DetailsName, id, 0, &d)
	if err != nil || !found {
		t.Fatalf("load %s: found %v, %v", id, found, err)
	}
	return fmt.Sprintf("revision %d: %+v", rev.Revision, d)
}

// An engine made as a library user makes one, without WithStreamReader, fed
// by a catch-up on $all: the runner gives it the source's streams, so that a
// batch folds each cart's stream at once. Behind a source that reads no
// streams, the runner says what the engine goes without.
func TestAll_gives_an_engine_without_a_stream_reader_its_streams(t *testing.T) {
	server := esdbtest.New(t)
	g := sourcetest.NewCarts(sourcetest.Sources(dial(t, server.URI())))
	g.Append(t, 21, 30, 20)

	run := func(src func(*subscription.All) projector.Source) (*projector.Engine, *mongostore.Store, string) {
		store := mongostore.New(mongotest.Database(t))
		var logged strings.Builder
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logged.Write(p)
		}), &slog.HandlerOptions{Level: slog.LevelInfo}))
		e := sourcetest.Engine(t, store, projector.WithLogger(logger))
		r := sourcetest.NewRunner(t, "carts", e, src(cartsOnAll(t, dial(t, server.URI()))), store, projector.WithBatch(200, 5*time.Millisecond))
		x := sourcetest.Start(t, r)
		x.WaitFor(t, "the checkpoint past the last cart event", g.Reached())
		if err := x.Stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		g.Check(t, store)
		mu.Lock()
		defer mu.Unlock()
		return e, store, logged.String()
	}

	e, _, logged := run(func(a *subscription.All) projector.Source { return a })
	if e.StreamsFolded() == 0 || strings.Contains(logged, "no stream reader") {
		t.Fatalf("on $all: %d streams folded, log %q; want folds and no complaint", e.StreamsFolded(), logged)
	}
	hidden, _, logged := run(func(a *subscription.All) projector.Source { return struct{ projector.Source }{a} })
	if hidden.StreamsFolded() != 0 || !strings.Contains(logged, "the engine has no stream reader") || !strings.Contains(logged, "projection="+cart.DetailsName) {
		t.Fatalf("behind a source that reads no streams: %d streams folded, log %q; want none and the line that says so", hidden.StreamsFolded(), logged)
	}
}

// writerFunc is an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
