package projectortest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Main(m)) }

func lives(n, size int, seed uint64) map[string][]any {
	r := rand.New(rand.NewPCG(seed, seed))
	out := map[string][]any{}
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	for i := range n {
		id := fmt.Sprintf("cart%02d", i)
		out[cart.StreamID(id)] = cart.RandomLife(r, id, fmt.Sprintf("client%d", i%3), size, at)
	}
	return out
}

func TestProve_passes_the_cart_details_projection(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	rep, err := projectortest.Prove(context.Background(), store, cart.Registry(), cart.NewDetailsProjection(), lives(20, 8, 1),
		projectortest.Delivery{Shuffle: true, Seed: 1})
	t.Log(rep)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Applied != rep.Events || rep.Duplicates == 0 || rep.Documents != 20 {
		t.Fatalf("report %v", rep)
	}
	// Every delivery has its outcome in the report.
	if sum := rep.Applied + rep.Duplicates + rep.Failed + rep.Requeued; sum != rep.Deliveries {
		t.Fatalf("report %v: the outcomes add up to %d deliveries", rep, sum)
	}
}

// Engines of their own for the workers are refused, at once, on a server
// whose conditional writes are not atomic: there they would overwrite each
// other's writes, and the proof would wait for the lost events.
func TestProve_separate_engines_are_refused_where_conditional_writes_are_not_atomic(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	caps, err := store.Capabilities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if caps.AtomicConditionalWrites {
		t.Skip("this server's conditional writes are atomic: separate engines are allowed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := projectortest.Prove(ctx, store, cart.Registry(), cart.NewDetailsProjection(), lives(4, 4, 3),
		projectortest.Delivery{Shuffle: true, Seed: 3, SeparateEngines: true})
	if err == nil || !strings.Contains(err.Error(), "SeparateEngines") || rep.Deliveries != 0 {
		t.Fatalf("Prove with separate engines on %s: %v, %v; want it refused before any delivery", caps.Server, rep, err)
	}
}

// A stream given with no events appends nothing, and the others are proven.
func TestProve_a_stream_of_no_events_is_left_out(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	streams := lives(3, 4, 2)
	streams[cart.StreamID("empty")] = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	var rep projectortest.Report
	var err error
	go func() {
		defer close(done)
		rep, err = projectortest.Prove(ctx, store, cart.Registry(), cart.NewDetailsProjection(), streams, projectortest.Delivery{Seed: 2})
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Prove did not return within a minute")
	}
	if err != nil || rep.Documents != 3 || rep.Applied != rep.Events {
		t.Fatalf("report %v, err %v: want the 3 carts proven", rep, err)
	}
}

// clientCarts counts a client's carts in one document per client, but uses
// the single-stream revision gate although many streams feed the document:
// the revisions of different carts collide, and events are lost or refused.
type clientCarts struct {
	Carts int `bson:"carts"`
}

func TestProve_catches_a_projection_that_is_not_exactly_once(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	p := projector.New[clientCarts]("client_carts", func(ev projector.Event) (string, bool) {
		if o, ok := ev.Payload.(cart.ShoppingCartOpened); ok {
			return o.ClientID, true
		}
		return "", false
	})
	projector.On(p, func(s clientCarts, _ cart.ShoppingCartOpened) (clientCarts, error) { s.Carts++; return s, nil })
	rep, err := projectortest.Prove(context.Background(), store, cart.Registry(), p, lives(9, 3, 2), projectortest.Delivery{Seed: 2})
	t.Log(rep, err)
	if err == nil {
		t.Fatal("Prove passed a projection whose documents are fed by several streams through the single-stream gate")
	}
	if !errors.Is(err, projectortest.ErrNotExactlyOnce) {
		t.Logf("caught as a failed event rather than a wrong document: %v", err)
	}
}

func TestProve_refuses_a_store_that_has_the_documents_already(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	ctx := context.Background()
	if _, err := projectortest.Prove(ctx, store, cart.Registry(), cart.NewDetailsProjection(), lives(3, 4, 9), projectortest.Delivery{Seed: 9}); err != nil {
		t.Fatal(err)
	}
	_, err := projectortest.Prove(ctx, store, cart.Registry(), cart.NewDetailsProjection(), lives(3, 4, 9), projectortest.Delivery{Seed: 9})
	if err == nil || !strings.Contains(err.Error(), "needs an empty collection") {
		t.Fatalf("second Prove on the same store: %v", err)
	}
}

// A sensor's reading, taken at a time with nanoseconds.
type readingTaken struct {
	Sensor string
	At     time.Time
}

type lastReading struct{ At time.Time }

// A projection whose step depends on the order of its events (the last
// reading wins) under a strategy that applies them in any order: Prove
// says that every event was applied once, in another order, and what to
// do, not that it is not exactly-once.
func TestProve_tells_an_order_dependent_projection_from_one_not_exactly_once(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[readingTaken](reg, "ReadingTaken")
	p := projector.New[lastReading]("last_readings_any_order", projector.StreamSuffix("sensor-")).Idempotency(projector.HandledIDs(100))
	projector.On(p, func(s lastReading, e readingTaken) (lastReading, error) { s.At = e.At; return s, nil })
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	streams := map[string][]any{}
	for i := range 4 {
		var life []any
		for j := range 6 {
			life = append(life, readingTaken{fmt.Sprint(i), at.Add(time.Duration(j) * time.Second)})
		}
		streams[fmt.Sprintf("sensor-%d", i)] = life
	}
	store := mongostore.New(mongotest.Database(t))
	_, err := projectortest.Prove(context.Background(), store, reg, p, streams, projectortest.Delivery{Shuffle: true, Seed: 7, Workers: 1})
	if !errors.Is(err, projectortest.ErrMismatch) || errors.Is(err, projectortest.ErrNotExactlyOnce) ||
		!strings.Contains(err.Error(), "the projection depends on the order of its events") {
		t.Fatalf("err = %v", err)
	}
}

// Under RevisionMap, a document fed by several streams whose state depends
// on the order between them: Prove says that the strategy keeps each
// stream's order, not that order, rather than advising RevisionMap.
func TestProve_tells_a_revision_map_keeps_each_streams_order_only(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[readingTaken](reg, "ReadingTaken")
	p := projector.New[lastReading]("last_site_reading", func(projector.Event) (string, bool) { return "site", true }).Idempotency(projector.RevisionMap())
	projector.On(p, func(s lastReading, e readingTaken) (lastReading, error) { s.At = e.At; return s, nil })
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	streams := map[string][]any{}
	for i := range 10 {
		var life []any
		for j := range 3 {
			life = append(life, readingTaken{fmt.Sprint(i), at.Add(time.Duration(3*i+j) * time.Second)})
		}
		streams[fmt.Sprintf("sensor-%d", i)] = life
	}
	store := mongostore.New(mongotest.Database(t))
	_, err := projectortest.Prove(context.Background(), store, reg, p, streams, projectortest.Delivery{Shuffle: true, Seed: 7, Workers: 1})
	if !errors.Is(err, projectortest.ErrMismatch) || errors.Is(err, projectortest.ErrNotExactlyOnce) ||
		!strings.Contains(err.Error(), "it keeps each stream's order, not the order between a document's streams") ||
		strings.Contains(err.Error(), "RevisionMap keeps each stream's") {
		t.Fatalf("err = %v", err)
	}
}

// A fold that depends on an order its strategy does not keep is found
// also where the deliveries happen to apply the events in the log's order
// (here they come in it, from one worker): Prove folds each document in
// other orders the engine may apply them in, and compares. Under
// RevisionMap, the last reading of a site fed by several sensors depends
// on the order between the sensors' streams; under HandledIDs, the last
// reading of one sensor on the order of its own events. A sum does not.
func TestProve_finds_an_order_dependent_fold_the_deliveries_did_not_meet(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[readingTaken](reg, "ReadingTaken")
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	streams := map[string][]any{}
	for i := range 3 {
		streams[fmt.Sprintf("sensor-%d", i)] = []any{readingTaken{fmt.Sprint(i), at.Add(time.Duration(i) * time.Second)}, readingTaken{fmt.Sprint(i), at.Add(time.Duration(10+i) * time.Second)}}
	}
	last := func(s lastReading, e readingTaken) (lastReading, error) { s.At = e.At; return s, nil }
	site := projector.New[lastReading]("site_last_reading", func(projector.Event) (string, bool) { return "site", true }).Idempotency(projector.RevisionMap())
	projector.On(site, last)
	perSensor := projector.New[lastReading]("sensor_last_reading", projector.StreamSuffix("sensor-")).Idempotency(projector.HandledIDs(100))
	projector.On(perSensor, last)
	inOrder := projectortest.Delivery{Workers: 1, MaxTimes: 1, Seed: 3}
	for _, c := range []struct {
		p    *projector.Projection[lastReading]
		want string
	}{
		{site, "1 of 1 documents fold to another state in another order of their events that the engine may apply (the strategy, per-stream revision map, does not keep the log's order"},
		{perSensor, "3 of 3 documents fold to another state in another order of their events that the engine may apply (the strategy, handled ids (last 100), does not keep the log's order"},
	} {
		rep, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), reg, c.p, streams, inOrder)
		if !errors.Is(err, projectortest.ErrMismatch) || !strings.Contains(err.Error(), c.want) || rep.Applied != rep.Events {
			t.Errorf("%s: %v, %v; want every event applied, and %q", c.p.Name(), rep, err, c.want)
		}
	}
	type count struct{ N int }
	sum := projector.New[count]("site_readings", func(projector.Event) (string, bool) { return "site", true }).Idempotency(projector.HandledIDs(100))
	projector.On(sum, func(s count, _ readingTaken) (count, error) { s.N++; return s, nil })
	if _, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), reg, sum, streams, inOrder); err != nil {
		t.Errorf("a count, in any order: %v", err)
	}
}

type pickup struct {
	PickedAt *time.Time `bson:",omitempty"`
}

// A state that holds a pointer to a zero time in a field marked omitempty
// reads back as nil: Prove says so, where it differs, and how to cure it,
// not that times are kept to the millisecond.
func TestProve_tells_an_omitempty_zero_value_the_store_leaves_out(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[readingTaken](reg, "ReadingTaken")
	p := projector.New[pickup]("pickups", projector.StreamSuffix("sensor-"))
	projector.On(p, func(s pickup, e readingTaken) (pickup, error) { s.PickedAt = &time.Time{}; return s, nil })
	streams := map[string][]any{"sensor-1": {readingTaken{"1", time.Time{}}}}
	store := mongostore.New(mongotest.Database(t))
	_, err := projectortest.Prove(context.Background(), store, reg, p, streams, projectortest.Delivery{Seed: 4, MaxTimes: 1})
	if !errors.Is(err, projectortest.ErrMismatch) || !strings.Contains(err.Error(), "state.PickedAt: a field marked omitempty") ||
		strings.Contains(err.Error(), "millisecond") {
		t.Fatalf("err = %v", err)
	}
}

// A state that keeps a time with nanoseconds is kept by MongoDB to the
// millisecond: every event was applied once, and Prove says that the
// difference is what the store keeps, not redelivery, and how to cure it.
func TestProve_tells_a_state_the_store_cannot_keep_from_redelivery(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[readingTaken](reg, "ReadingTaken")
	p := projector.New[lastReading]("last_readings", projector.StreamSuffix("sensor-"))
	projector.On(p, func(s lastReading, e readingTaken) (lastReading, error) { s.At = e.At; return s, nil })
	at := time.Date(2026, 11, 26, 9, 0, 0, 123456789, time.UTC)
	streams := map[string][]any{"sensor-1": {readingTaken{"1", at}, readingTaken{"1", at.Add(time.Second)}}}
	store := mongostore.New(mongotest.Database(t))
	_, err := projectortest.Prove(context.Background(), store, reg, p, streams, projectortest.Delivery{Shuffle: true, Seed: 4, MaxTimes: 3})
	if !errors.Is(err, projectortest.ErrMismatch) || errors.Is(err, projectortest.ErrNotExactlyOnce) ||
		!strings.Contains(err.Error(), "not under redelivery") || !strings.Contains(err.Error(), "t.UTC().Truncate(time.Millisecond)") {
		t.Fatalf("err = %v", err)
	}
	// Truncated, it is proven.
	q := projector.New[lastReading]("last_readings_ms", projector.StreamSuffix("sensor-"))
	projector.On(q, func(s lastReading, e readingTaken) (lastReading, error) {
		s.At = e.At.Truncate(time.Millisecond)
		return s, nil
	})
	if _, err := projectortest.Prove(context.Background(), store, reg, q, streams, projectortest.Delivery{Shuffle: true, Seed: 4, MaxTimes: 3}); err != nil {
		t.Fatal(err)
	}
}

// A projection with its own failure policy that records events (Hold,
// Park) is proven on mongostore's store without naming a parker: the store
// is one.
func TestProve_a_projection_that_holds_needs_no_parker_named(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[readingTaken](reg, "ReadingTaken")
	p := projector.New[lastReading]("held_readings", projector.StreamSuffix("sensor-")).OnFailure(projector.Hold)
	projector.On(p, func(s lastReading, e readingTaken) (lastReading, error) { s.At = e.At; return s, nil })
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	streams := map[string][]any{"sensor-1": {readingTaken{"1", at}, readingTaken{"1", at.Add(time.Second)}}}
	rep, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), reg, p, streams, projectortest.Delivery{Shuffle: true, Seed: 2, MaxTimes: 2})
	if err != nil || rep.Events != 2 {
		t.Fatalf("%v: %v", rep, err)
	}
}

// An event that fails its handler fails the proof whatever the policy, and
// the report counts it failed: under Hold its outcome is Held, which the
// report counted nowhere ("0 failed", found by a new user).
func TestProve_counts_an_event_that_failed_under_hold(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	p := projector.New[clientCarts]("held_carts", func(ev projector.Event) (string, bool) { return ev.StreamID, true }).OnFailure(projector.Hold)
	projector.On(p, func(s clientCarts, o cart.ShoppingCartOpened) (clientCarts, error) {
		if o.ClientID == "poison" {
			panic("a handler that panics")
		}
		s.Carts++
		return s, nil
	})
	streams := map[string][]any{cart.StreamID("h"): {cart.ShoppingCartOpened{ShoppingCartID: "h", ClientID: "poison", OpenedAt: time.Now()}}}
	rep, err := projectortest.Prove(context.Background(), store, cart.Registry(), p, streams, projectortest.Delivery{Seed: 1, Workers: 1, MaxTimes: 1})
	if err == nil || rep.Failed != 1 || rep.Applied+rep.Duplicates+rep.Failed+rep.Requeued != rep.Deliveries {
		t.Fatalf("report %v, error %v; want the proof failed and its one event counted failed", rep, err)
	}
}

// An event its projection's policy moves past (Park, Skip) fails the proof
// saying so, with its cause, and the report counts it failed: it was
// counted applied, and the proof failed as "not exactly-once", which the
// projection is (found by a new user, with a state the store cannot keep).
func TestProve_says_an_event_was_parked_under_the_policy(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Park, projector.Skip} {
		t.Run(pol.String(), func(t *testing.T) {
			store := mongostore.New(mongotest.Database(t))
			p := projector.New[clientCarts]("parked_carts", func(ev projector.Event) (string, bool) { return ev.StreamID, true }).OnFailure(pol)
			projector.On(p, func(s clientCarts, o cart.ShoppingCartOpened) (clientCarts, error) {
				if o.ClientID == "poison" {
					return s, errors.New("no poison here")
				}
				s.Carts++
				return s, nil
			})
			streams := map[string][]any{
				cart.StreamID("h"): {cart.ShoppingCartOpened{ShoppingCartID: "h", ClientID: "poison", OpenedAt: time.Now()}},
				cart.StreamID("i"): {cart.ShoppingCartOpened{ShoppingCartID: "i", ClientID: "ok", OpenedAt: time.Now()}},
			}
			rep, err := projectortest.Prove(context.Background(), store, cart.Registry(), p, streams, projectortest.Delivery{Seed: 1, Workers: 1, MaxTimes: 1})
			if err == nil || errors.Is(err, projectortest.ErrNotExactlyOnce) || !strings.Contains(err.Error(), "under the failure policy: ") ||
				!strings.Contains(err.Error(), "no poison here") || rep.Failed != 1 {
				t.Fatalf("report %v, error %v; want the proof failed, saying the event was moved past and why, counted failed", rep, err)
			}
		})
	}
}
