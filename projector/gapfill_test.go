package projector_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// An event delivered before its predecessors (a persistent group's
// consumers, a redelivery) does not wait for them when the engine reads the
// event store's streams: its document is folded from its stream up to it
// and written once. The predecessors, when they come, count as applied on
// their first delivery and as duplicates after, so every event is applied
// once in the counts too; the document is the fold at every step.
func TestGapFill_an_event_before_its_predecessors_folds_them_from_the_stream(t *testing.T) {
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("f"), cart.ShoppingCartOpened{ShoppingCartID: "f", ClientID: "x", OpenedAt: t0},
		add("f", "p", 1), add("f", "q", 2), add("f", "r", 3), add("f", "s", 4), add("f", "t", 5))
	s := newStore(t)
	impatient := retry.Policy{InitialDelay: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond, MaxRetries: 2, MaxElapsed: time.Second}
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(impatient), projector.WithStreamReader(newStreams(evs...)))
	if err != nil {
		t.Fatal(err)
	}
	// Revision 3 first, on an empty collection; then 5, past a document at 3.
	for _, at := range []int{3, 5} {
		r := handle(t, e, evs[at])[0]
		if r.Outcome != projector.Applied || r.Waits != 0 {
			t.Fatalf("revision %d before its predecessors: %v after %d waits (%v), want applied without a wait", at, r.Outcome, r.Waits, r.Err)
		}
		assertDocument(t, s, "f", evs[:at+1])
	}
	var counts tally
	for _, at := range []int{4, 0, 2, 1, 3, 5, 0} {
		counts.add(handle(t, e, evs[at]))
	}
	if counts.counts[projector.Applied] != 4 || counts.counts[projector.Duplicate] != 3 || counts.waits != 0 {
		t.Errorf("the predecessors delivered late, then three copies: %v, %d waits; want 4 applied (their first delivery) and 3 duplicates", counts.counts, counts.waits)
	}
	assertDocument(t, s, "f", evs)
}

// The stream's events are folded ahead only where each would simply
// apply: an event between that fails its step (a product removed that was
// never added) is not folded past, so the one after it waits for it as
// before, and it meets the failure policy when it comes; and without the
// event store's streams, nothing is read.
func TestGapFill_stops_at_an_event_that_fails_and_needs_the_streams(t *testing.T) {
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("g"), cart.ShoppingCartOpened{ShoppingCartID: "g", ClientID: "x", OpenedAt: t0},
		add("g", "p", 1),
		cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: "g", ProductItem: cart.ProductItem{ProductID: "ghost", Quantity: 1}},
		add("g", "q", 2))
	impatient := retry.Policy{InitialDelay: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond, MaxRetries: 2, MaxElapsed: time.Second}
	for _, withStreams := range []bool{true, false} {
		s := newStore(t)
		opts := []projector.Option{projector.WithRetry(impatient), projector.WithFailurePolicy(projector.Skip)}
		if withStreams {
			opts = append(opts, projector.WithStreamReader(newStreams(evs...)))
		}
		e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		handle(t, e, evs[0])
		if r := handle(t, e, evs[3])[0]; r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrPredecessorMissing) {
			t.Fatalf("streams %v: revision 3 past a failing revision 2: %v (%v), want it to wait for its predecessor", withStreams, r.Outcome, r.Err)
		}
		for _, at := range []int{1, 2, 3} {
			want := projector.Applied
			if at == 2 {
				want = projector.Skipped
			}
			if r := handle(t, e, evs[at])[0]; r.Outcome != want {
				t.Fatalf("streams %v: revision %d: %v (%v), want %v", withStreams, at, r.Outcome, r.Err, want)
			}
		}
		assertDocument(t, s, "g", []projector.Event{evs[0], evs[1], evs[3]})
	}
}

// Predecessors folded ahead by a gap's fill count as applied on their first
// delivery also when they come in a batch.
func TestGapFill_predecessors_coming_in_a_batch_count_as_applied(t *testing.T) {
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("h"), cart.ShoppingCartOpened{ShoppingCartID: "h", ClientID: "x", OpenedAt: t0},
		add("h", "p", 1), add("h", "q", 2), add("h", "r", 3))
	s := newStore(t)
	e := foldEngine(t, s, newStreams(evs...))
	if r := handle(t, e, evs[2])[0]; r.Outcome != projector.Applied || r.Waits != 0 {
		t.Fatalf("revision 2 first: %v after %d waits (%v)", r.Outcome, r.Waits, r.Err)
	}
	applied, duplicates := handleInBatches(t, e, []projector.Event{evs[0], evs[1], evs[2], evs[3], evs[1]}, 5)
	if applied != 3 || duplicates != 2 {
		t.Errorf("the batch of revisions 0, 1, 2, 3 and 1 again: %d applied, %d duplicates; want 3 and 2", applied, duplicates)
	}
	assertDocument(t, s, "h", evs)
}

// A persistent group's consumer (deliveries settled one by one, out of log
// order) gets the same: the event before its predecessors applies without a
// wait, and each predecessor is applied on its first delivery, in a batch
// or alone, and a duplicate after; the runner's count of applied events is
// the number of events.
func TestGapFill_a_group_consumers_counts_are_exact(t *testing.T) {
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("k"), cart.ShoppingCartOpened{ShoppingCartID: "k", ClientID: "x", OpenedAt: t0},
		add("k", "p", 1), add("k", "q", 2), add("k", "r", 3))
	s := newStore(t)
	e := foldEngine(t, s, newStreams(evs...))
	var mu sync.Mutex
	var outcomes []string
	waits := 0
	deliver := func(ev projector.Event) projector.Delivery {
		return projector.Delivery{Event: &ev, Settle: func(rs []projector.Result) error {
			mu.Lock()
			defer mu.Unlock()
			outcomes = append(outcomes, fmt.Sprintf("%d:%v", ev.StreamRevision, rs[0].Outcome))
			waits += rs[0].Waits
			return nil
		}}
	}
	src := &live{ch: make(chan projector.Delivery, 8)}
	r, err := projector.NewRunner("group", e, src, nil, projector.WithWorkers(1), projector.WithDrainTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, r)
	settled := func() int { mu.Lock(); defer mu.Unlock(); return len(outcomes) }
	src.ch <- deliver(evs[3])
	waitFor(t, "revision 3 settled", func() bool { return settled() == 1 })
	for _, at := range []int{1, 0, 2, 1} {
		src.ch <- deliver(evs[at])
	}
	waitFor(t, "every delivery settled", func() bool { return settled() == 5 })
	mu.Lock()
	sort.Strings(outcomes) // settled in the order a batch's results come
	got := strings.Join(outcomes, " ")
	mu.Unlock()
	if want := "0:applied 1:applied 1:duplicate 2:applied 3:applied"; got != want || waits != 0 {
		t.Errorf("outcomes %q after %d waits, want %q and none", got, waits, want)
	}
	if st := r.Stats(); st.Applied != 4 || st.Duplicates != 1 {
		t.Errorf("runner counts %d applied, %d duplicates; want 4 and 1", st.Applied, st.Duplicates)
	}
	assertDocument(t, s, "k", evs)
}
