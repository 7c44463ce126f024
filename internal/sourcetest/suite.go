package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// Run runs the suite, one subtest per behaviour, each on a server and a
// database of its own, through kit's client. The subtests run in parallel
// with each other (go test's -parallel bounds how many at once): most of
// their time is spent waiting on the servers and on timers.
func Run(t *testing.T, kit Kit) {
	if kit.Dial == nil {
		t.Fatal("sourcetest: the kit has no Dial")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, setUp(t, kit))
		})
	}
}

// Names lists the suite's subtests, in the order Run starts them.
func Names() []string {
	out := make([]string, len(cases))
	for i, c := range cases {
		out[i] = c.name
	}
	return out
}

var cases = []struct {
	name string
	run  func(*testing.T, *fixture)
}{
	{"200_carts_through_a_filtered_subscription_reach_the_fold_and_the_head", carts200},
	{"dropped_5_times_loses_nothing_and_applies_nothing_twice", dropped5Times},
	{"stopped_halfway_resumes_from_its_checkpoint", stoppedHalfway},
	{"abandoned_without_storing_its_checkpoint_resumes_from_the_older_one", abandoned},
	{"duplicated_deliveries_are_skipped", duplicates},
	{"an_undecodable_payload_is_skipped_under_Skip_and_the_stream_goes_on", undecodableSkipped},
	{"stream_subscription_from_a_revision", streamFromRevision},
	{"a_catch_up_subscription_says_once_that_it_caught_up_then_follows_live", caughtUpOnce},
	{"a_quiet_projection_stores_the_head_when_it_catches_up_without_a_checkpoint_message", quietAtHead},
	{"a_quiet_projection_keeps_its_stored_position_within_one_checkpoint_interval_of_the_head", quietCadence},
	{"a_live_projection_whose_traffic_ends_with_records_it_leaves_out_stores_the_head_once_quiet", quietLive},
	{"an_event_type_filter_is_refused_for_gated_projections", eventTypeFilterRefused},
	{"a_checkpoint_from_another_log_is_refused", foreignCheckpoint},
	{"the_global_position_strategy_and_the_hold_policy_are_refused_with_competing_consumers", orderedOnlyRefused},
	{"two_persistent_consumers_of_one_group_reach_the_fold", twoConsumers},
	{"a_group_is_behind_while_its_server_reads_the_log_and_live_once_it_has_read_it", groupLive},
	{"an_undecodable_payload_skipped_in_a_group_is_told_skipped_not_parked", undecodableSkippedInGroup},
	{"an_undecodable_payload_parked_in_a_group_is_acknowledged_its_record_the_parkers", undecodableParkedInGroup},
	{"the_server_unreachable_for_a_while_then_back", unreachable},
	{"an_outage_longer_than_the_clients_discovery_gets_a_new_client", longOutage},
	{"Dial_refuses_an_unparsable_connection_string_without_showing_its_password", dialRefuses},
	{"appends_check_their_expected_revision_and_a_repeated_append_writes_nothing", appendsCheckTheirRevision},
	{"hole_a_stream_truncated_before_its_first_sight", truncatedFirstSight},
	{"hole_events_truncated_while_the_document_is_behind", truncatedBehind},
	{"hole_a_soft_deleted_stream_written_again_starts_its_document_over", softDeletedWrittenAgain},
	{"hole_a_tombstone_and_a_soft_delete_apply_the_deletion_policy", deletionsApplyThePolicy},
	{"hole_dangling_links_are_passed_over_and_the_stream_hole_parked", danglingLinks},
	{"authentication_on_a_source_without_credentials_fails_with_one_line", authRequired},
}

// fixture is one subtest's server, database, and carts appended through a
// client of the kit's.
type fixture struct {
	kit    Kit
	server *esdbtest.Server
	store  *mongostore.Store
	carts  *Carts
}

func setUp(t *testing.T, kit Kit) *fixture {
	t.Helper()
	s := esdbtest.New(t)
	f := &fixture{kit: kit, server: s, store: mongostore.New(mongotest.Database(t))}
	f.carts = NewCarts(f.dial(t, s.URI()))
	return f
}

// dial returns a client of the kit's on uri (the server's by default),
// closed when the test ends.
func (f *fixture) dial(t *testing.T, uri ...string) Client {
	t.Helper()
	u := f.server.URI()
	if len(uri) > 0 {
		u = uri[0]
	}
	c, err := f.kit.Dial(u)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", f.kit.Name, u, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// cartsOnAll returns a $all source on c filtered to the carts, with
// frequent checkpoint messages.
func cartsOnAll(t *testing.T, c Client) AllSource {
	t.Helper()
	src, err := c.All(neutral.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}, MaxSearchWindow: 8, CheckpointInterval: 2})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func carts200(t *testing.T, f *fixture) {
	f.carts.Append(t, 1, 200, 10)
	r := NewRunner(t, "carts", Engine(t, f.store), cartsOnAll(t, f.dial(t)), f.store)
	x := Start(t, r)
	x.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
	x.WaitFor(t, "the runner caught up (the source said so)", func(st projector.RunnerStats) bool { return st.CaughtUp })
	if err := x.Stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	t.Logf("%d events in %d carts; stats %+v", f.carts.Total, len(f.carts.Events), st)
	if st.Applied != uint64(f.carts.Total) || st.Failed != 0 || st.Skipped != 0 || st.Events != uint64(f.carts.Total) {
		t.Fatalf("stats %+v, want %d applied", st, f.carts.Total)
	}
	if st.Checkpoints == 0 {
		t.Fatal("no checkpoint message from the server: the filtered-out events did not move the position")
	}
	f.carts.Check(t, f.store)
	cp, err := f.store.LoadCheckpoint(context.Background(), "carts")
	if err != nil || cp == nil || cp.Position < f.carts.Last || cp.Position > f.server.Head() {
		t.Fatalf("stored checkpoint %v (%v), want from the last cart event %d to the head %d", cp, err, f.carts.Last, f.server.Head())
	}
}

func dropped5Times(t *testing.T, f *fixture) {
	f.carts.Append(t, 2, 200, 10)
	total := f.carts.Total
	r := NewRunner(t, "carts", Engine(t, f.store), cartsOnAll(t, f.dial(t)), f.store,
		projector.WithCheckpointEvery(100, 250*time.Millisecond))
	x := Start(t, r)
	rnd := rand.New(rand.NewPCG(5, 5))
	points := make([]int, 5)
	for i := range points {
		points[i] = total/10 + rnd.IntN(total*8/10)
	}
	slices.Sort(points)
	for i, at := range points {
		// Drop once the runner is past the point with events still queued:
		// they are handled before the next subscription starts.
		x.WaitFor(t, "the drop point", func(st projector.RunnerStats) bool {
			handled := st.Applied + st.Duplicates
			return st.Events >= uint64(at) && st.Events-handled >= 16 || st.Events >= uint64(total)
		})
		if n := f.server.DropSubscriptions(); n == 0 {
			t.Fatalf("drop %d: no live subscription", i)
		}
		x.WaitFor(t, "resubscription", func(st projector.RunnerStats) bool { return st.Subscriptions >= uint64(i+2) })
	}
	x.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
	if err := x.Stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	t.Logf("drops at %v; stats %+v", points, st)
	if st.Drops < 5 || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if st.Applied != uint64(total) {
		t.Fatalf("applied %d, want each of the %d events once", st.Applied, total)
	}
	// After a drop the runner finishes the events in flight and stores the
	// checkpoint before it subscribes again: whatever the source delivers
	// again is a duplicate, and nothing is counted twice.
	if st.Duplicates != st.Events-st.Applied-st.Abandoned {
		t.Fatalf("duplicates %d, want the %d events delivered again", st.Duplicates, st.Events-st.Applied-st.Abandoned)
	}
	f.carts.Check(t, f.store)
}

func stoppedHalfway(t *testing.T, f *fixture) {
	f.carts.Append(t, 3, 200, 10)
	c := f.dial(t)
	// Small batches, so that halfway is somewhere: large ones finish first;
	// and no stream folds, which would apply each cart's events ahead of the
	// checkpoint (the catch-up of a stream at once is tested apart).
	first := NewRunner(t, "carts", Engine(t, f.store, projector.WithoutStreamFolds()), cartsOnAll(t, c), f.store, projector.WithCheckpointEvery(50, time.Hour), projector.WithBatch(10, 0))
	x := Start(t, first)
	x.WaitFor(t, "half the events", func(st projector.RunnerStats) bool { return st.Applied >= uint64(f.carts.Total/2) })
	if err := x.Stop(); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	cp, err := f.store.LoadCheckpoint(context.Background(), "carts")
	if err != nil || cp == nil || cp.Position >= f.carts.Last {
		t.Fatalf("checkpoint after a clean stop: %v %v (last cart event %d)", cp, err, f.carts.Last)
	}
	if got := first.Stats().Checkpoint; got == nil || *got != *cp {
		t.Fatalf("stored %v, runner says %v", cp, got)
	}

	second := NewRunner(t, "carts", Engine(t, f.store, projector.WithoutStreamFolds()), cartsOnAll(t, c), f.store)
	y := Start(t, second)
	y.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
	if err := y.Stop(); err != nil {
		t.Fatalf("second Run: %v", err)
	}
	a, b := first.Stats(), second.Stats()
	t.Logf("first %+v\nsecond %+v", a, b)
	if a.Applied+b.Applied != uint64(f.carts.Total) || b.Events >= uint64(f.carts.Total) {
		t.Fatalf("applied %d + %d, want %d in all, the second run from the checkpoint", a.Applied, b.Applied, f.carts.Total)
	}
	f.carts.Check(t, f.store)
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

func abandoned(t *testing.T, f *fixture) {
	f.carts.Append(t, 4, 200, 10)
	c := f.dial(t)
	cps := &crashable{CheckpointStore: f.store}
	first := NewRunner(t, "carts", Engine(t, f.store, projector.WithoutStreamFolds()), cartsOnAll(t, c), cps, projector.WithCheckpointEvery(200, time.Hour), projector.WithBatch(10, 0))
	x := Start(t, first)
	x.WaitFor(t, "a stored checkpoint", func(st projector.RunnerStats) bool { return st.Saved >= 2 })
	cps.crashed.Store(true)
	x.WaitFor(t, "more events past the checkpoint", func(st projector.RunnerStats) bool { return st.Applied >= uint64(f.carts.Total*3/4) })
	err := x.Stop()
	if err == nil || !strings.Contains(err.Error(), "storing the checkpoint") {
		t.Fatalf("first Run: %v, want the failed store reported", err)
	}
	cp, _ := f.store.LoadCheckpoint(context.Background(), "carts")
	a := first.Stats()
	if cp == nil || a.Checkpoint == nil || cp.Position != a.Checkpoint.Position {
		t.Fatalf("stored %v, runner's last stored %v", cp, a.Checkpoint)
	}

	second := NewRunner(t, "carts", Engine(t, f.store, projector.WithoutStreamFolds()), cartsOnAll(t, c), f.store)
	y := Start(t, second)
	y.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
	if err := y.Stop(); err != nil {
		t.Fatalf("second Run: %v", err)
	}
	b := second.Stats()
	t.Logf("first %+v\nsecond %+v", a, b)
	if a.Applied+b.Applied != uint64(f.carts.Total) {
		t.Fatalf("applied %d + %d, want %d", a.Applied, b.Applied, f.carts.Total)
	}
	if b.Duplicates == 0 {
		t.Fatal("the replayed overlap came back without duplicates: the second run did not start from the older checkpoint")
	}
	f.carts.Check(t, f.store)
}

func duplicates(t *testing.T, f *fixture) {
	f.carts.Append(t, 7, 50, 8)
	f.server.DuplicateDeliveries(0.3)
	r := NewRunner(t, "carts", Engine(t, f.store), cartsOnAll(t, f.dial(t)), f.store)
	x := Start(t, r)
	x.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
	if err := x.Stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	if st.Applied != uint64(f.carts.Total) || st.Duplicates == 0 || st.Duplicates != st.Events-st.Applied-st.Abandoned {
		t.Fatalf("stats %+v", st)
	}
	f.carts.Check(t, f.store)
}

// poison appends an event of cart id whose payload does not decode, then one
// that does.
func (f *fixture) poison(t *testing.T, id string) {
	ctx := context.Background()
	f.carts.AppendRaw(t, ctx, id, cart.TypeAdded, []byte(`{"productItem": "twelve"`), nil)
	f.carts.AppendCart(t, ctx, id, cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "late", Quantity: 3}})
}

func undecodableSkipped(t *testing.T, f *fixture) {
	f.carts.Append(t, 8, 20, 6)
	f.poison(t, "cart005")
	f.carts.AppendOther(t, context.Background())
	r := NewRunner(t, "carts", Engine(t, f.store, projector.WithFailurePolicy(projector.Skip)), cartsOnAll(t, f.dial(t)), f.store)
	x := Start(t, r)
	x.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
	if err := x.Stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	if st.Skipped != 1 || st.Failed != 0 || st.Applied != uint64(f.carts.Total) {
		t.Fatalf("stats %+v, want 1 skipped and %d applied", st, f.carts.Total)
	}
	f.carts.Check(t, f.store) // cart005 includes the event after the poison one
}

func streamFromRevision(t *testing.T, f *fixture) {
	f.carts.Append(t, 9, 3, 10)
	id := "cart001"
	src, err := f.dial(t).Stream(cart.StreamID(id), neutral.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !src.Ordered() {
		t.Fatal("a stream subscription says it is not ordered")
	}
	last := uint64(len(f.carts.Events[id]) - 1)
	r := NewRunner(t, "one-cart", Engine(t, f.store), src, f.store)
	x := Start(t, r)
	x.WaitFor(t, "the last revision", func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position == last })
	x.WaitFor(t, "the runner caught up (the source said so)", func(st projector.RunnerStats) bool { return st.CaughtUp })
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Applied != last+1 {
		t.Fatalf("stats %+v", st)
	}
	f.carts.Events = map[string][]projector.Event{id: f.carts.Events[id]}
	f.carts.Check(t, f.store)
}

// A catch-up subscription delivers the history, says once that it has
// caught up when it reaches the head, and then delivers what is appended
// live, on $all (filtered) and on one stream.
func caughtUpOnce(t *testing.T, f *fixture) {
	f.carts.Append(t, 14, 5, 4)
	c := f.dial(t)
	id := "cart001"
	all := cartsOnAll(t, c)
	stream, err := c.Stream(cart.StreamID(id), neutral.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		src     projector.Source
		history func() int // events before the head
	}{
		{"$all", all, func() int { return f.carts.Total }},
		{"stream", stream, func() int { return len(f.carts.Events[id]) }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), WaitBound)
		defer cancel()
		sub, err := tc.src.Subscribe(ctx, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		defer sub.Close()
		events, caughtUp := 0, 0
		for caughtUp == 0 {
			d, err := sub.Next(ctx)
			if err != nil {
				t.Fatalf("%s: after %d events: %v", tc.name, events, err)
			}
			if d.Event != nil {
				events++
			}
			if d.CaughtUp {
				caughtUp++
			}
		}
		if want := tc.history(); events != want {
			t.Fatalf("%s: caught up after %d events, want %d", tc.name, events, want)
		}
		rev := uint64(len(f.carts.Events[id]))
		f.carts.AppendCart(t, ctx, id, cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "live-" + tc.name, Quantity: 1}})
		for {
			d, err := sub.Next(ctx)
			if err != nil {
				t.Fatalf("%s: waiting for the live event: %v", tc.name, err)
			}
			if d.CaughtUp {
				caughtUp++
			}
			if d.Event != nil {
				if d.Event.StreamID != cart.StreamID(id) || d.Event.StreamRevision != rev {
					t.Fatalf("%s: live event %s@%d, want %s@%d", tc.name, d.Event.StreamID, d.Event.StreamRevision, cart.StreamID(id), rev)
				}
				break
			}
		}
		if caughtUp != 1 {
			t.Fatalf("%s: caught up %d times, want once", tc.name, caughtUp)
		}
		sub.Close()
	}
}

func eventTypeFilterRefused(t *testing.T, f *fixture) {
	c := f.dial(t)
	src, err := c.All(neutral.AllOptions{EventTypePrefixes: []string{"ShoppingCart"}})
	if err != nil {
		t.Fatal(err)
	}
	if !src.FiltersEventTypes() {
		t.Fatal("an event-type filter: FiltersEventTypes is false")
	}
	if _, err := projector.NewRunner("x", Engine(t, f.store), src, f.store); err == nil || !strings.Contains(err.Error(), "filter by stream name") {
		t.Fatalf("err %v", err)
	}
	if _, err := c.All(neutral.AllOptions{StreamPrefixes: []string{"a"}, EventTypePrefixes: []string{"b"}}); err == nil {
		t.Fatal("two filters accepted")
	}
	if cartsOnAll(t, c).FiltersEventTypes() {
		t.Fatal("a stream filter: FiltersEventTypes is true")
	}
}

// The $all source ties a checkpoint to its log: the first event names the
// log, and a checkpoint past the head or with another event at its
// position is foreign.
func foreignCheckpoint(t *testing.T, f *fixture) {
	c := f.dial(t)
	src := cartsOnAll(t, c)
	ctx := context.Background()
	if log, err := src.Log(ctx); err != nil || log != "" {
		t.Fatalf("the log of an empty store: %q, %v", log, err)
	}
	f.carts.Append(t, 1, 3, 4)
	log, err := src.Log(ctx)
	if err != nil || log == "" {
		t.Fatalf("log: %q, %v", log, err)
	}
	if again, _ := src.Log(ctx); again != log {
		t.Fatalf("the log changed: %q then %q", log, again)
	}
	at := lastOfAll(t, c, f.server.Head())
	if err := src.Check(ctx, at); err != nil {
		t.Fatalf("the checkpoint at the last event: %v", err)
	}
	id, pos, _ := strings.Cut(log, "@")
	first, err := strconv.ParseUint(pos, 10, 64)
	if err != nil || id == "" {
		t.Fatalf("log %q: want <first event id>@<its position>", log)
	}
	other := "00000000-0000-0000-0000-000000000001"
	for name, cp := range map[string]projector.Checkpoint{
		"past the head":       {Position: at.Position + 1000, Prepare: at.Prepare + 1000},
		"another event there": {Position: at.Position, Prepare: at.Prepare, EventID: other},
		// A reset or another node starts again at the bottom of $all.
		"another log, starting at the same position": {Position: at.Position, Prepare: at.Prepare, Log: fmt.Sprintf("%s@%d", other, first)},
		"another log, starting further up":           {Position: at.Position, Prepare: at.Prepare, Log: fmt.Sprintf("%s@%d", other, first+1000)},
		"another log, stored as a bare id":           {Position: at.Position, Prepare: at.Prepare, Log: other},
	} {
		if err := src.Check(ctx, cp); !errors.Is(err, projector.ErrForeignCheckpoint) {
			t.Errorf("%s: %v, want ErrForeignCheckpoint", name, err)
		}
	}
	for name, cp := range map[string]projector.Checkpoint{
		"a checkpoint message's position (no event id)": {Position: at.Position, Prepare: at.Prepare, Log: log},
		// A scavenge removes events, at the start of $all too.
		"no event at its position": {Position: at.Position - 1, Prepare: at.Prepare - 1, EventID: at.EventID, Log: log},
		"a log whose start was removed since": {Position: at.Position, Prepare: at.Prepare, EventID: at.EventID,
			Log: fmt.Sprintf("%s@%d", other, first-1)},
		"a log stored as a bare id": {Position: at.Position, Prepare: at.Prepare, EventID: at.EventID, Log: id},
	} {
		if err := src.Check(ctx, cp); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// lastOfAll returns the checkpoint an unfiltered $all subscription on c
// gives the event at position head: what a runner stores after it.
func lastOfAll(t *testing.T, c Client, head uint64) projector.Checkpoint {
	t.Helper()
	src, err := c.All(neutral.AllOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), WaitBound)
	defer cancel()
	sub, err := src.Subscribe(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for {
		d, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("reading $all to its head %d: %v", head, err)
		}
		if d.Event != nil && d.Checkpoint != nil && d.Checkpoint.Position == head {
			return *d.Checkpoint
		}
	}
}

func orderedOnlyRefused(t *testing.T, f *fixture) {
	p := cart.NewClientSummaryProjection().Idempotency(projector.GlobalPosition())
	e, err := projector.NewEngine(f.store, cart.Registry(), []projector.Definition{p})
	if err != nil {
		t.Fatal(err)
	}
	group, err := f.dial(t).Persistent(Group{Name: "g", StreamPrefixes: []string{cart.StreamPrefix}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := projector.NewRunner("x", e, group, nil); err == nil || !strings.Contains(err.Error(), "global position strategy") ||
		!strings.Contains(err.Error(), "not a persistent subscription group") {
		t.Fatalf("persistent group: %v", err)
	}
	all := cartsOnAll(t, f.dial(t))
	if _, err := projector.NewRunner("x", e, all, f.store); err == nil || !strings.Contains(err.Error(), "one worker, not 4") {
		t.Fatalf("4 workers: %v", err)
	}
	if _, err := projector.NewRunner("x", e, all, f.store, projector.WithWorkers(1)); err != nil {
		t.Fatalf("one ordered consumer: %v", err)
	}
	// The hold policy, the engine's or the projection's own, needs the log
	// in order too: in a group, a consumer cannot know that another holds a
	// document. Any number of workers will do.
	for _, own := range []bool{false, true} {
		p := cart.NewDetailsProjection()
		opts := []projector.Option{projector.WithParker(f.store)}
		if own {
			p.OnFailure(projector.Hold)
		} else {
			opts = append(opts, projector.WithFailurePolicy(projector.Hold))
		}
		e, err := projector.NewEngine(f.store, cart.Registry(), []projector.Definition{p}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := projector.NewRunner("x", e, group, nil); err == nil || !strings.Contains(err.Error(), "the hold policy") {
			t.Fatalf("hold (its own %v) in a persistent group: %v", own, err)
		}
		if _, err := projector.NewRunner("x", e, all, f.store); err != nil {
			t.Fatalf("hold (its own %v) on $all with 4 workers: %v", own, err)
		}
	}
}

func twoConsumers(t *testing.T, f *fixture) {
	// 60 carts: on FerretDB's SQLite backend each conditional update scans the
	// collection, and two consumers contend for its lock.
	f.carts.Append(t, 10, 60, 10)
	ctx := context.Background()
	// One group on $all, filtered to the carts.
	group := Group{Name: "cart-details", StreamPrefixes: []string{cart.StreamPrefix}, ResolveLinks: true, BufferSize: 32}
	// FerretDB has no atomic compare-and-set across connections, so on it the
	// two consumers share one engine, whose per-document queue orders the
	// writes; on MongoDB each has its own, as two processes would.
	caps, err := f.store.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shared := Engine(t, f.store)
	var runners []*projector.Runner
	var xs []*Running
	for i := range 2 {
		e := shared
		if caps.AtomicConditionalWrites {
			e = Engine(t, f.store)
		}
		src, err := f.dial(t).Persistent(group)
		if err != nil {
			t.Fatal(err)
		}
		r := NewRunner(t, "consumer-"+string(rune('a'+i)), e, src, nil)
		runners = append(runners, r)
		xs = append(xs, Start(t, r))
	}
	// Every event is applied once, by one consumer or the other (a
	// redelivery is a duplicate); deliveries received together are
	// handled in batches, never folded from their streams' histories.
	handled := func() uint64 {
		a, b := runners[0].Stats(), runners[1].Stats()
		return a.Applied + a.Duplicates + b.Applied + b.Duplicates
	}
	xs[0].WaitFor(t, "every event handled", func(projector.RunnerStats) bool { return handled() >= uint64(f.carts.Total) })
	xs[0].WaitFor(t, "every cart at the fold of its events", f.carts.AtFold(f.store))
	for _, x := range xs {
		if err := x.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := runners[0].Stats(), runners[1].Stats()
	t.Logf("consumer a %+v\nconsumer b %+v", a, b)
	if a.Events == 0 || b.Events == 0 {
		t.Fatalf("one consumer got nothing: %d and %d events", a.Events, b.Events)
	}
	if a.Applied+b.Applied != uint64(f.carts.Total) || a.Failed+b.Failed+a.Parked+b.Parked != 0 {
		t.Fatalf("applied %d of %d events, %d failed, %d parked", a.Applied+b.Applied, f.carts.Total, a.Failed+b.Failed, a.Parked+b.Parked)
	}
	f.carts.Check(t, f.store)
}

// groupLive: the server says a group is behind while it reads the log's
// history (here, a consumer takes nothing, so the server stops reading
// once its buffers are full), and live once it has read the log to its
// end; a --group projector's readiness is the server's word.
func groupLive(t *testing.T, f *fixture) {
	f.carts.Append(t, 11, 100, 20) // 2,000 events: more than the server's buffers
	ctx := context.Background()
	c := f.dial(t)
	group := Group{Name: "cart-live", StreamPrefixes: []string{cart.StreamPrefix}, BufferSize: 10}
	idle, err := c.Persistent(group)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := idle.Subscribe(ctx, nil) // creates the group; takes nothing
	if err != nil {
		t.Fatal(err)
	}
	var g neutral.GroupInfo
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if g, err = c.Group(ctx, "cart-live"); err == nil && g.Consumers == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group and its consumer: %+v, %v", g, err)
		}
	}
	if g.Live {
		t.Fatalf("the group says it is live with 2,000 events and nothing taken: %+v", g)
	}
	sub.Close()

	src, err := c.Persistent(group)
	if err != nil {
		t.Fatal(err)
	}
	x := Start(t, NewRunner(t, "live", Engine(t, f.store), src, nil))
	x.WaitFor(t, "every cart at the fold of its events", f.carts.AtFold(f.store))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if g, err = c.Group(ctx, "cart-live"); err == nil && g.Live {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("every event applied, and the group does not say it is live: %+v, %v", g, err)
		}
	}
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
}

// undecodableSkippedInGroup and undecodableParkedInGroup: an event that
// fails for good in a group's consumer under the engine's Skip or Park
// policy is settled by it, not parked in the group as well: skipped, the
// server is told so (nack skip); parked, it is acknowledged, and the
// parker's record is the one a replay applies (delivered again from the
// group's parked stream, it would meet a document that moved past it).
func undecodableSkippedInGroup(t *testing.T, f *fixture) { undecodableInGroup(t, f, projector.Skip) }

func undecodableParkedInGroup(t *testing.T, f *fixture) { undecodableInGroup(t, f, projector.Park) }

func undecodableInGroup(t *testing.T, f *fixture, policy projector.FailurePolicy) {
	f.carts.Append(t, 11, 10, 5)
	f.poison(t, "cart003")
	group := Group{Name: "details", StreamPrefixes: []string{cart.StreamPrefix}}
	src, err := f.dial(t).Persistent(group)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(t, "consumer", Engine(t, f.store, projector.WithFailurePolicy(policy), projector.WithParker(f.store)), src, nil)
	x := Start(t, r)
	x.WaitFor(t, "every event handled", func(st projector.RunnerStats) bool {
		return st.Applied+st.Skipped+st.Parked >= uint64(f.carts.Total+1)
	})
	want := neutral.PersistentStats{Acked: uint64(f.carts.Total), Skipped: 1}
	if policy == projector.Park {
		want = neutral.PersistentStats{Acked: uint64(f.carts.Total) + 1}
	}
	x.WaitFor(t, "every event settled", func(projector.RunnerStats) bool {
		ps := src.Stats()
		return ps.Acked+ps.Skipped+ps.Parked >= uint64(f.carts.Total+1)
	})
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
	if ps := src.Stats(); ps != want {
		t.Fatalf("consumer stats %+v, want %+v", ps, want)
	}
	if b := src.Blocked(); len(b) != 0 {
		t.Fatalf("blocked %v: under %v the document moved past the event", b, policy)
	}
	if parked := f.server.Parked(neutral.AllStreams, group.Name); len(parked) != 0 {
		t.Fatalf("parked in the group as well: %+v", parked)
	}
	records, err := f.store.Parked(context.Background(), cart.DetailsName)
	if err != nil {
		t.Fatal(err)
	}
	if n := map[projector.FailurePolicy]int{projector.Skip: 0, projector.Park: 1}[policy]; len(records) != n ||
		n == 1 && (records[0].StreamID != cart.StreamID("cart003") || !strings.Contains(records[0].Error, "does not decode")) {
		t.Fatalf("the parker's records %+v, want %d of cart003", records, n)
	}
	f.carts.Check(t, f.store)
}

func unreachable(t *testing.T, f *fixture) {
	f.carts.Append(t, 6, 60, 10)
	r := NewRunner(t, "carts", Engine(t, f.store), cartsOnAll(t, f.dial(t)), f.store)
	x := Start(t, r)
	x.WaitFor(t, "some events", func(st projector.RunnerStats) bool { return st.Applied >= 100 })
	f.server.Refuse(2 * time.Second)
	// The runner may be at the head already: wait for the drop, then for it
	// to subscribe again once the server is back.
	x.WaitFor(t, "the drop", func(st projector.RunnerStats) bool { return st.Drops >= 1 })
	x.WaitFor(t, "a new subscription", func(st projector.RunnerStats) bool { return st.Subscriptions >= 2 })
	x.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
	if err := x.Stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	if st.Drops == 0 || st.Applied != uint64(f.carts.Total) {
		t.Fatalf("stats %+v", st)
	}
	f.carts.Check(t, f.store)
}

func longOutage(t *testing.T, f *fixture) {
	f.carts.Append(t, 12, 40, 10)
	// Three discovery attempts 100 ms apart: the official client gives up,
	// and closes itself for good, well within the outage (of 6 s: on a
	// loaded machine an attempt can take seconds, and one that outlives a
	// shorter outage reconnects without closing the client).
	uri := strings.Replace(f.server.URI(), "maxDiscoverAttempts=100", "maxDiscoverAttempts=3", 1)
	if uri == f.server.URI() {
		t.Fatalf("URI %s has no maxDiscoverAttempts to lower", uri)
	}
	c := f.dial(t, uri)
	r := NewRunner(t, "carts", Engine(t, f.store), cartsOnAll(t, c), f.store)
	x := Start(t, r)
	x.WaitFor(t, "some events", func(st projector.RunnerStats) bool { return st.Applied >= 50 })
	f.server.Refuse(6 * time.Second)
	time.Sleep(6500 * time.Millisecond) // the outage, and then some
	f.carts.Prefix = "after-"           // more carts, which only a new subscription can deliver
	f.carts.Append(t, 13, 10, 5)
	x.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
	if err := x.Stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	if st.Drops == 0 || st.Subscriptions < 2 || st.Applied != uint64(f.carts.Total) {
		t.Fatalf("stats %+v, want %d applied", st, f.carts.Total)
	}
	if c.Rebuilt() == 0 {
		t.Fatal("the official client was not replaced after it closed itself")
	}
	f.carts.Check(t, f.store)
}

func dialRefuses(t *testing.T, f *fixture) {
	c, err := f.kit.Dial("esdb://admin:s3cret@host:notaport?tls=maybe")
	if err == nil {
		c.Close()
	}
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "connection string") {
		t.Fatalf("err %v", err)
	}
}

// quietOptions filters $all to streams nothing appends to, with checkpoint
// messages every window x interval records the server scans.
func quietOptions(window, interval int) neutral.AllOptions {
	return neutral.AllOptions{StreamPrefixes: []string{"quiet-"}, MaxSearchWindow: window, CheckpointInterval: interval}
}

// appendOthers appends n events to streams none of the quiet projection's,
// 100 to a stream per append.
func appendOthers(t *testing.T, c Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitBound)
	defer cancel()
	stream := "audit-" + uuid.NewString()
	for i := 0; i < n; i += 100 {
		evs := make([]Event, min(100, n-i))
		for j := range evs {
			evs[j] = Event{ID: uuid.New(), Type: "PageViewed", Data: []byte(`{"page":"/"}`)}
		}
		if _, err := c.Append(ctx, fmt.Sprintf("%s-%d", stream, i/100), AnyRevision, evs...); err != nil {
			t.Fatal(err)
		}
	}
}

// recordsAfter counts the records of $all past cp: what a subscription
// resumed from cp scans again.
func recordsAfter(t *testing.T, f *fixture, cp *projector.Checkpoint) int {
	t.Helper()
	var from kurrentdb.AllPosition = kurrentdb.Start{}
	if cp != nil {
		from = kurrentdb.Position{Commit: cp.Position, Prepare: cp.Prepare}
	}
	ctx, cancel := context.WithTimeout(context.Background(), WaitBound)
	defer cancel()
	rs, err := f.server.Client(t).ReadAll(ctx, kurrentdb.ReadAllOptions{From: from}, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	n := 0
	for {
		re, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if cp == nil || re.OriginalEvent().Position.Commit > cp.Position {
			n++
		}
	}
}

// A filtered projection none of whose events exist catches up over 10,000
// records of other streams, with the server's checkpoint messages so far
// apart that none comes: it stores the position of the head all the same
// (a node sends no checkpoint message at the head), so that a restart does
// not scan the 10,000 again. Then it stays there across a restart.
func quietAtHead(t *testing.T, f *fixture) {
	c := f.dial(t)
	appendOthers(t, c, 10_000)
	src, err := c.All(quietOptions(32, 1000))
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		r := NewRunner(t, "quiet", Engine(t, f.store), src, f.store, projector.WithCheckpointEvery(1, 50*time.Millisecond))
		x := Start(t, r)
		x.WaitFor(t, "the head stored", func(st projector.RunnerStats) bool {
			return st.CaughtUp && st.Checkpoint != nil && st.Checkpoint.Position == f.server.Head()
		})
		if err := x.Stop(); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		st := r.Stats()
		if st.Events != 0 || st.Applied != 0 {
			t.Fatalf("run %d: stats %+v, want no event", run, st)
		}
		cp, err := f.store.LoadCheckpoint(context.Background(), "quiet")
		if err != nil || cp == nil {
			t.Fatalf("run %d: stored checkpoint %v, %v", run, cp, err)
		}
		if n := recordsAfter(t, f, cp); n != 0 {
			t.Fatalf("run %d: stored %v, %d records before the head %d", run, cp, n, f.server.Head())
		}
		if err := src.Check(context.Background(), *cp); err != nil {
			t.Fatalf("run %d: the stored head fails its own check: %v", run, err)
		}
	}
}

// A projection filtered to the carts follows live traffic that ends with
// 300 records of other streams: fewer than one checkpoint interval (32 x
// 1,000), so the node sends no checkpoint message after them. Once no
// message has come for QuietCheckpoint, the subscription reads $all to the
// head, and the runner stores the head: within a bounded time, as the
// status and the lag metric then say.
func quietLive(t *testing.T, f *fixture) {
	c := f.dial(t)
	f.carts.Append(t, 5, 5, 4)
	o := neutral.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}, MaxSearchWindow: 32, CheckpointInterval: 1000,
		QuietCheckpoint: 100 * time.Millisecond}
	src, err := c.All(o)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(t, "quiet-live", Engine(t, f.store), src, f.store, projector.WithCheckpointEvery(1, 20*time.Millisecond))
	x := Start(t, r)
	x.WaitFor(t, "caught up", func(st projector.RunnerStats) bool { return st.CaughtUp })
	f.carts.Prefix = "live-"
	f.carts.Append(t, 6, 5, 4)
	appendOthers(t, c, 300)
	head := f.server.Head()
	x.WaitFor(t, "the head stored", func(projector.RunnerStats) bool {
		cp, err := f.store.LoadCheckpoint(context.Background(), "quiet-live")
		return err == nil && cp != nil && cp.Position == head
	})
	if err := x.Stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st := r.Stats(); st.Applied != uint64(f.carts.Total) || st.Failed != 0 {
		t.Fatalf("stats %+v, want the %d cart events applied", st, f.carts.Total)
	}
	f.carts.Check(t, f.store)
}

// A quiet projection over 10,000 records of other streams, then 10,000
// more while it follows live: its stored position stays within one
// checkpoint interval (window x interval records) of the head, by the
// server's checkpoint messages live and by the head at the catch-up.
func quietCadence(t *testing.T, f *fixture) {
	const window, interval = 32, 4
	c := f.dial(t)
	appendOthers(t, c, 10_000)
	src, err := c.All(quietOptions(window, interval))
	if err != nil {
		t.Fatal(err)
	}
	stored := func() *projector.Checkpoint {
		cp, err := f.store.LoadCheckpoint(context.Background(), "quiet")
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	near := func(projector.RunnerStats) bool {
		cp := stored()
		return cp != nil && recordsAfter(t, f, cp) <= window*interval
	}
	r := NewRunner(t, "quiet", Engine(t, f.store), src, f.store, projector.WithCheckpointEvery(1, 50*time.Millisecond))
	x := Start(t, r)
	x.WaitFor(t, "caught up", func(st projector.RunnerStats) bool { return st.CaughtUp })
	x.WaitFor(t, "the stored position within one interval of the head after the catch-up", near)
	caughtUp := stored()
	appendOthers(t, c, 10_000)
	x.WaitFor(t, "the stored position within one interval of the head while live", func(st projector.RunnerStats) bool {
		cp := stored()
		return cp != nil && cp.Position > caughtUp.Position && near(st)
	})
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Events != 0 || st.Checkpoints == 0 {
		t.Fatalf("stats %+v, want checkpoint messages and no event", st)
	}
	t.Logf("stored %v; %d records of $all after it, head %d", stored(), recordsAfter(t, f, stored()), f.server.Head())
}
