package subscription_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

func newRunner(t *testing.T, name string, e *projector.Engine, src projector.Source, cps projector.CheckpointStore, opts ...projector.RunnerOption) *projector.Runner {
	t.Helper()
	opts = append([]projector.RunnerOption{projector.WithReconnect(fastReconnect())}, opts...)
	r, err := projector.NewRunner(name, e, src, cps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAll_200_carts_projected_through_a_filtered_subscription_reach_the_fold_and_the_head(t *testing.T) {
	g := newRig(t)
	g.appendCarts(t, 1, 200, 10)
	r := newRunner(t, "carts", engine(t, g.store), cartsOnAll(t, dial(t, g.server)), g.store)
	x := start(t, r)
	x.waitFor(t, "the checkpoint at the head", atHead(g.server))
	if err := x.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	t.Logf("%d events in %d carts; stats %+v", g.total, len(g.carts), st)
	if st.Applied != uint64(g.total) || st.Failed != 0 || st.Skipped != 0 || st.Events != uint64(g.total) {
		t.Fatalf("stats %+v, want %d applied", st, g.total)
	}
	if st.Checkpoints == 0 {
		t.Fatal("no checkpoint message from the server: the filtered-out events did not move the position")
	}
	g.check(t, g.store)
	cp, err := g.store.LoadCheckpoint(context.Background(), "carts")
	if err != nil || cp == nil || cp.Position != g.server.Head() {
		t.Fatalf("stored checkpoint %v (%v), want the head %d", cp, err, g.server.Head())
	}
}

func TestAll_subscription_dropped_5_times_loses_nothing_and_applies_nothing_twice(t *testing.T) {
	g := newRig(t)
	g.appendCarts(t, 2, 200, 10)
	r := newRunner(t, "carts", engine(t, g.store), cartsOnAll(t, dial(t, g.server)), g.store,
		projector.WithCheckpointEvery(100, 250*time.Millisecond))
	x := start(t, r)
	rnd := rand.New(rand.NewPCG(5, 5))
	points := make([]int, 5)
	for i := range points {
		points[i] = g.total/10 + rnd.IntN(g.total*8/10)
	}
	slices.Sort(points)
	for i, at := range points {
		// Drop once the runner is past the point with events still queued,
		// so the resubscription overlaps what is in flight.
		x.waitFor(t, "the drop point", func(st projector.RunnerStats) bool {
			handled := st.Applied + st.Duplicates
			return st.Events >= uint64(at) && st.Events-handled >= 16 || st.Events >= uint64(g.total)
		})
		if n := g.server.DropSubscriptions(); n == 0 {
			t.Fatalf("drop %d: no live subscription", i)
		}
		x.waitFor(t, "resubscription", func(st projector.RunnerStats) bool { return st.Subscriptions >= uint64(i+2) })
	}
	x.waitFor(t, "the checkpoint at the head", atHead(g.server))
	if err := x.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	t.Logf("drops at %v; stats %+v", points, st)
	if st.Drops < 5 || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if st.Applied != uint64(g.total) {
		t.Fatalf("applied %d, want each of the %d events once", st.Applied, g.total)
	}
	if st.Duplicates != st.Events-st.Applied-st.Abandoned || st.Duplicates == 0 {
		t.Fatalf("duplicates %d, want the %d redelivered events of the overlaps", st.Duplicates, st.Events-st.Applied-st.Abandoned)
	}
	g.check(t, g.store)
}

func TestAll_stopped_halfway_resumes_from_its_checkpoint(t *testing.T) {
	g := newRig(t)
	g.appendCarts(t, 3, 200, 10)
	c := dial(t, g.server)
	// Small batches, so that halfway is somewhere: large ones finish first.
	first := newRunner(t, "carts", engine(t, g.store), cartsOnAll(t, c), g.store, projector.WithCheckpointEvery(50, time.Hour), projector.WithBatch(10, 0))
	x := start(t, first)
	x.waitFor(t, "half the events", func(st projector.RunnerStats) bool { return st.Applied >= uint64(g.total/2) })
	if err := x.stop(); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	cp, err := g.store.LoadCheckpoint(context.Background(), "carts")
	if err != nil || cp == nil || cp.Position >= g.server.Head() {
		t.Fatalf("checkpoint after a clean stop: %v %v (head %d)", cp, err, g.server.Head())
	}
	if got := first.Stats().Checkpoint; got == nil || *got != *cp {
		t.Fatalf("stored %v, runner says %v", cp, got)
	}

	second := newRunner(t, "carts", engine(t, g.store), cartsOnAll(t, c), g.store)
	y := start(t, second)
	y.waitFor(t, "the checkpoint at the head", atHead(g.server))
	if err := y.stop(); err != nil {
		t.Fatalf("second Run: %v", err)
	}
	a, b := first.Stats(), second.Stats()
	t.Logf("first %+v\nsecond %+v", a, b)
	if a.Applied+b.Applied != uint64(g.total) || b.Events >= uint64(g.total) {
		t.Fatalf("applied %d + %d, want %d in all, the second run from the checkpoint", a.Applied, b.Applied, g.total)
	}
	g.check(t, g.store)
}

// crashable is a checkpoint store that stops storing once crashed: the
// process died before it could store its checkpoint.
type crashable struct {
	projector.CheckpointStore
	crashed atomic.Bool
}

func (c *crashable) SaveCheckpoint(ctx context.Context, name string, cp projector.Checkpoint) error {
	if c.crashed.Load() {
		return errors.New("process gone")
	}
	return c.CheckpointStore.SaveCheckpoint(ctx, name, cp)
}

func TestAll_abandoned_without_storing_its_checkpoint_resumes_from_the_older_one(t *testing.T) {
	g := newRig(t)
	g.appendCarts(t, 4, 200, 10)
	c := dial(t, g.server)
	cps := &crashable{CheckpointStore: g.store}
	first := newRunner(t, "carts", engine(t, g.store), cartsOnAll(t, c), cps, projector.WithCheckpointEvery(200, time.Hour), projector.WithBatch(10, 0))
	x := start(t, first)
	x.waitFor(t, "a stored checkpoint", func(st projector.RunnerStats) bool { return st.Saved >= 2 })
	cps.crashed.Store(true)
	x.waitFor(t, "more events past the checkpoint", func(st projector.RunnerStats) bool { return st.Applied >= uint64(g.total*3/4) })
	err := x.stop()
	if err == nil || !strings.Contains(err.Error(), "storing the checkpoint") {
		t.Fatalf("first Run: %v, want the failed store reported", err)
	}
	cp, _ := g.store.LoadCheckpoint(context.Background(), "carts")
	a := first.Stats()
	if cp == nil || a.Checkpoint == nil || cp.Position != a.Checkpoint.Position {
		t.Fatalf("stored %v, runner's last stored %v", cp, a.Checkpoint)
	}

	second := newRunner(t, "carts", engine(t, g.store), cartsOnAll(t, c), g.store)
	y := start(t, second)
	y.waitFor(t, "the checkpoint at the head", atHead(g.server))
	if err := y.stop(); err != nil {
		t.Fatalf("second Run: %v", err)
	}
	b := second.Stats()
	t.Logf("first %+v\nsecond %+v", a, b)
	if a.Applied+b.Applied != uint64(g.total) {
		t.Fatalf("applied %d + %d, want %d", a.Applied, b.Applied, g.total)
	}
	if b.Duplicates == 0 {
		t.Fatal("the replayed overlap came back without duplicates: the second run did not start from the older checkpoint")
	}
	g.check(t, g.store)
}

func TestAll_server_unreachable_for_a_while_then_back(t *testing.T) {
	g := newRig(t)
	g.appendCarts(t, 6, 60, 10)
	r := newRunner(t, "carts", engine(t, g.store), cartsOnAll(t, dial(t, g.server)), g.store)
	x := start(t, r)
	x.waitFor(t, "some events", func(st projector.RunnerStats) bool { return st.Applied >= 100 })
	g.server.Refuse(2 * time.Second)
	// The runner may be at the head already: wait for the drop, then for it
	// to subscribe again once the server is back.
	x.waitFor(t, "the drop", func(st projector.RunnerStats) bool { return st.Drops >= 1 })
	x.waitFor(t, "a new subscription", func(st projector.RunnerStats) bool { return st.Subscriptions >= 2 })
	x.waitFor(t, "the checkpoint at the head", atHead(g.server))
	if err := x.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	if st.Drops == 0 || st.Applied != uint64(g.total) {
		t.Fatalf("stats %+v", st)
	}
	g.check(t, g.store)
}

func TestAll_duplicated_deliveries_are_skipped(t *testing.T) {
	g := newRig(t)
	g.appendCarts(t, 7, 50, 8)
	g.server.DuplicateDeliveries(0.3)
	r := newRunner(t, "carts", engine(t, g.store), cartsOnAll(t, dial(t, g.server)), g.store)
	x := start(t, r)
	x.waitFor(t, "the checkpoint at the head", atHead(g.server))
	if err := x.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	if st.Applied != uint64(g.total) || st.Duplicates == 0 || st.Duplicates != st.Events-st.Applied-st.Abandoned {
		t.Fatalf("stats %+v", st)
	}
	g.check(t, g.store)
}

func TestAll_an_undecodable_payload_is_skipped_under_Skip_and_the_stream_goes_on(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	g.appendCarts(t, 8, 20, 6)
	g.appendRaw(t, ctx, "cart005", cart.TypeAdded, []byte(`{"productItem": "twelve"`), nil)
	g.appendCart(t, ctx, "cart005", cart.ProductItemAddedToShoppingCart{ShoppingCartID: "cart005", ProductItem: cart.ProductItem{ProductID: "late", Quantity: 3}})
	g.appendOther(t, ctx)
	r := newRunner(t, "carts", engine(t, g.store, projector.WithFailurePolicy(projector.Skip)), cartsOnAll(t, dial(t, g.server)), g.store)
	x := start(t, r)
	x.waitFor(t, "the checkpoint at the head", atHead(g.server))
	if err := x.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	if st.Skipped != 1 || st.Failed != 0 || st.Applied != uint64(g.total) {
		t.Fatalf("stats %+v, want 1 skipped and %d applied", st, g.total)
	}
	g.check(t, g.store) // cart005 includes the event after the poison one
}

func TestStream_subscription_from_a_revision(t *testing.T) {
	g := newRig(t)
	g.appendCarts(t, 9, 3, 10)
	c := dial(t, g.server)
	id := "cart001"
	src, err := subscription.NewStream(c, cart.StreamID(id), subscription.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := uint64(len(g.carts[id]) - 1)
	r := newRunner(t, "one-cart", engine(t, g.store), src, g.store)
	x := start(t, r)
	x.waitFor(t, "the last revision", func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position == last })
	if err := x.stop(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Applied != last+1 {
		t.Fatalf("stats %+v", st)
	}
	g.carts = map[string][]projector.Event{id: g.carts[id]}
	g.check(t, g.store)
}

func TestAll_refuses_an_event_type_filter_for_gated_projections(t *testing.T) {
	g := newRig(t)
	src, err := subscription.NewAll(dial(t, g.server), subscription.AllOptions{EventTypePrefixes: []string{"ShoppingCart"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := projector.NewRunner("x", engine(t, g.store), src, g.store); err == nil || !strings.Contains(err.Error(), "filter by stream name") {
		t.Fatalf("err %v", err)
	}
	if _, err := subscription.NewAll(dial(t, g.server), subscription.AllOptions{StreamPrefixes: []string{"a"}, EventTypePrefixes: []string{"b"}}); err == nil {
		t.Fatal("two filters accepted")
	}
}

func TestDial_rejects_an_unparsable_connection_string_without_showing_the_password(t *testing.T) {
	_, err := subscription.Dial("esdb://admin:s3cret@host:notaport?tls=maybe", nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "connection string") {
		t.Fatalf("err %v", err)
	}
}

func TestPersistent_two_consumers_of_one_group_reach_the_fold(t *testing.T) {
	g := newRig(t)
	g.appendCarts(t, 10, 200, 10)
	ctx := context.Background()
	settings := esdb.SubscriptionSettingsDefault()
	settings.ResolveLinkTos = true
	settings.StartFrom = esdb.Start{}
	settings.ConsumerStrategyName = esdb.ConsumerStrategyRoundRobin
	// One group on $all, filtered to the carts.
	group := "cart-details"
	if err := g.esdb.CreatePersistentSubscriptionToAll(ctx, group, esdb.PersistentAllSubscriptionOptions{
		Settings: &settings, StartFrom: esdb.Start{},
		Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{cart.StreamPrefix}},
	}); err != nil {
		t.Fatal(err)
	}
	// FerretDB has no atomic compare-and-set across connections, so on it the
	// two consumers share one engine, whose per-document queue orders the
	// writes; on MongoDB each has its own, as two processes would.
	caps, err := g.store.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shared := engine(t, g.store)
	var runners []*projector.Runner
	var xs []*running
	for i := range 2 {
		e := shared
		if caps.AtomicConditionalWrites {
			e = engine(t, g.store)
		}
		src, err := subscription.NewPersistent(dial(t, g.server), subscription.PersistentOptions{Stream: subscription.AllStreams, Group: group, BufferSize: 32})
		if err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, "consumer-"+string(rune('a'+i)), e, src, nil)
		runners = append(runners, r)
		xs = append(xs, start(t, r))
	}
	applied := func() uint64 { return runners[0].Stats().Applied + runners[1].Stats().Applied }
	xs[0].waitFor(t, "every event applied", func(projector.RunnerStats) bool { return applied() >= uint64(g.total) })
	for _, x := range xs {
		if err := x.stop(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := runners[0].Stats(), runners[1].Stats()
	t.Logf("consumer a %+v\nconsumer b %+v", a, b)
	if a.Events == 0 || b.Events == 0 {
		t.Fatalf("one consumer got nothing: %d and %d events", a.Events, b.Events)
	}
	if a.Applied+b.Applied != uint64(g.total) {
		t.Fatalf("applied %d, want %d", a.Applied+b.Applied, g.total)
	}
	g.check(t, g.store)
}

func TestPersistent_an_undecodable_payload_is_parked_with_its_reason_and_the_rest_goes_on(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	g.appendCarts(t, 11, 10, 5)
	g.appendRaw(t, ctx, "cart003", cart.TypeAdded, []byte(`{"productItem": "twelve"`), nil)
	g.appendCart(t, ctx, "cart003", cart.ProductItemAddedToShoppingCart{ShoppingCartID: "cart003", ProductItem: cart.ProductItem{ProductID: "late", Quantity: 3}})
	group := "details"
	settings := esdb.SubscriptionSettingsDefault()
	settings.StartFrom = esdb.Start{}
	if err := g.esdb.CreatePersistentSubscriptionToAll(ctx, group, esdb.PersistentAllSubscriptionOptions{
		Settings: &settings, StartFrom: esdb.Start{},
		Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{cart.StreamPrefix}},
	}); err != nil {
		t.Fatal(err)
	}
	src, err := subscription.NewPersistent(dial(t, g.server), subscription.PersistentOptions{Stream: subscription.AllStreams, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, "consumer", engine(t, g.store, projector.WithFailurePolicy(projector.Skip)), src, nil)
	x := start(t, r)
	x.waitFor(t, "every event handled", func(st projector.RunnerStats) bool { return st.Applied+st.Skipped >= uint64(g.total+1) })
	if err := x.stop(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Skipped != 1 || st.Applied != uint64(g.total) {
		t.Fatalf("stats %+v", st)
	}
	if ps := src.Stats(); ps.Parked != 1 || ps.Acked != uint64(g.total) {
		t.Fatalf("consumer stats %+v, want 1 parked and %d acked", ps, g.total)
	}
	parked := g.server.Parked(subscription.AllStreams, group)
	if len(parked) != 1 || parked[0].Stream != cart.StreamID("cart003") || !strings.Contains(parked[0].Reason, "does not decode") {
		t.Fatalf("parked %+v", parked)
	}
	g.check(t, g.store)
}

func TestAll_an_outage_longer_than_the_clients_discovery_gets_a_new_client(t *testing.T) {
	g := newRig(t)
	g.appendCarts(t, 12, 40, 10)
	// Three discovery attempts 100 ms apart: the official client gives up,
	// and closes itself for good, well within the outage.
	uri := strings.Replace(g.server.URI(), "maxDiscoverAttempts=100", "maxDiscoverAttempts=3", 1)
	if uri == g.server.URI() {
		t.Fatalf("URI %s has no maxDiscoverAttempts to lower", uri)
	}
	c := dial(t, nil, uri)
	r := newRunner(t, "carts", engine(t, g.store), cartsOnAll(t, c), g.store)
	x := start(t, r)
	x.waitFor(t, "some events", func(st projector.RunnerStats) bool { return st.Applied >= 50 })
	g.server.Refuse(3 * time.Second)
	time.Sleep(3500 * time.Millisecond) // the outage, and then some
	g.prefix = "after-"                 // more carts, which only a new subscription can deliver
	g.appendCarts(t, 13, 10, 5)
	x.waitFor(t, "the checkpoint at the head", atHead(g.server))
	if err := x.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	if st.Drops == 0 || st.Subscriptions < 2 || st.Applied != uint64(g.total) {
		t.Fatalf("stats %+v, want %d applied", st, g.total)
	}
	if c.Rebuilt() == 0 {
		t.Fatal("the official client was not replaced after it closed itself")
	}
	g.check(t, g.store)
}

func TestRunner_refuses_the_global_position_strategy_with_competing_consumers(t *testing.T) {
	g := newRig(t)
	p := cart.NewClientSummaryProjection().Idempotency(projector.GlobalPosition())
	e, err := projector.NewEngine(g.store, cart.Registry(), []projector.Definition{p})
	if err != nil {
		t.Fatal(err)
	}
	group, err := subscription.NewPersistent(dial(t, g.server), subscription.PersistentOptions{Stream: subscription.AllStreams, Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := projector.NewRunner("x", e, group, nil); err == nil || !strings.Contains(err.Error(), "global-position") {
		t.Fatalf("persistent group: %v", err)
	}
	all := cartsOnAll(t, dial(t, g.server))
	if _, err := projector.NewRunner("x", e, all, g.store); err == nil || !strings.Contains(err.Error(), "4 workers") {
		t.Fatalf("4 workers: %v", err)
	}
	if _, err := projector.NewRunner("x", e, all, g.store, projector.WithWorkers(1)); err != nil {
		t.Fatalf("one ordered consumer: %v", err)
	}
}

// The $all source ties a checkpoint to its log: the first event names the
// log, and a checkpoint past the head or with another event at its
// position is foreign.
func TestAll_checks_that_a_checkpoint_is_a_position_of_its_log(t *testing.T) {
	g := newRig(t)
	src := cartsOnAll(t, dial(t, g.server))
	ctx := context.Background()
	if log, err := src.Log(ctx); err != nil || log != "" {
		t.Fatalf("the log of an empty store: %q, %v", log, err)
	}
	g.appendCarts(t, 1, 3, 4)
	log, err := src.Log(ctx)
	if err != nil || log == "" {
		t.Fatalf("log: %q, %v", log, err)
	}
	first, _ := src.Log(ctx)
	if first != log {
		t.Fatalf("the log changed: %q then %q", log, first)
	}
	// The last event of $all, read through the official client.
	rs, err := g.esdb.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	last, err := rs.Recv()
	rs.Close()
	if err != nil {
		t.Fatal(err)
	}
	at := projector.Checkpoint{Position: last.OriginalEvent().Position.Commit, Prepare: last.OriginalEvent().Position.Prepare, EventID: last.OriginalEvent().EventID.String()}
	if err := src.Check(ctx, at); err != nil {
		t.Fatalf("the checkpoint at the last event: %v", err)
	}
	for name, cp := range map[string]projector.Checkpoint{
		"past the head":          {Position: at.Position + 1000, Prepare: at.Prepare + 1000},
		"another event there":    {Position: at.Position, Prepare: at.Prepare, EventID: "00000000-0000-0000-0000-000000000001"},
		"no event at a position": {Position: at.Position - 1, Prepare: at.Prepare - 1, EventID: at.EventID},
	} {
		if err := src.Check(ctx, cp); !errors.Is(err, projector.ErrForeignCheckpoint) {
			t.Errorf("%s: %v, want ErrForeignCheckpoint", name, err)
		}
	}
	if err := src.Check(ctx, projector.Checkpoint{Position: at.Position, Prepare: at.Prepare}); err != nil {
		t.Errorf("a checkpoint message's position (no event id): %v", err)
	}
}
