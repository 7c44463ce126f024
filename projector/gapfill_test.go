package projector_test

import (
	"errors"
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
