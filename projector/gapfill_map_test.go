package projector_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// clientLog appends the carts' events with their client in the metadata,
// as the write side does, for the client summary (RevisionMap).
func clientLog(t *testing.T, client string, carts map[string][]any) (map[string][]projector.Event, []projector.Event) {
	t.Helper()
	log := projectortest.NewLog(cart.Registry())
	byCart := map[string][]projector.Event{}
	var all []projector.Event
	for _, id := range []string{"e", "f", "g"} {
		if carts[id] == nil {
			continue
		}
		evs, err := log.AppendWithMetadata(cart.StreamID(id), []byte(`{"clientId":"`+client+`"}`), carts[id]...)
		if err != nil {
			t.Fatal(err)
		}
		byCart[id], all = evs, append(all, evs...)
	}
	return byCart, all
}

// Under a revision map (a document fed by several streams, each gated on
// its own revision), an event delivered before its stream's predecessors
// does not wait for them either: they are read from its stream, folded
// with it on the document as it is, and written once. When they come, they
// count as applied on their first delivery and duplicates after, stream by
// stream; the document is the fold of its events.
func TestGapFill_under_a_revision_map_folds_the_streams_predecessors(t *testing.T) {
	carts, all := clientLog(t, "x", map[string][]any{
		"e": {cart.ShoppingCartOpened{ShoppingCartID: "e", ClientID: "x", OpenedAt: t0}, add("e", "p", 1), add("e", "q", 2), add("e", "r", 3)},
		"f": {cart.ShoppingCartOpened{ShoppingCartID: "f", ClientID: "x", OpenedAt: t0}, add("f", "s", 4), cart.ShoppingCartConfirmed{ShoppingCartID: "f", ConfirmedAt: t0}},
	})
	s := newStore(t)
	impatient := retry.Policy{InitialDelay: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond, MaxRetries: 2, MaxElapsed: time.Second}
	summary := cart.NewClientSummaryProjection()
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{summary},
		projector.WithRetry(impatient), projector.WithStreamReader(newStreams(all...)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// f's last event on an empty collection, then e's third past a
	// document that has f's stream only.
	for _, ev := range []projector.Event{carts["f"][2], carts["e"][2]} {
		r := handle(t, e, ev)[0]
		if r.Outcome != projector.Applied || r.Waits != 0 {
			t.Fatalf("%s@%d before its predecessors: %v after %d waits (%v), want applied without a wait", ev.StreamID, ev.StreamRevision, r.Outcome, r.Waits, r.Err)
		}
	}
	if err := projectortest.CheckDocument(ctx, s, summary, "x", append(append([]projector.Event{}, carts["e"][:3]...), carts["f"]...)); err != nil {
		t.Fatalf("after the two fills: %v", err)
	}
	var counts tally
	for _, ev := range []projector.Event{carts["e"][1], carts["f"][0], carts["e"][3], carts["f"][1], carts["e"][0], carts["e"][2], carts["f"][2], carts["e"][1]} {
		counts.add(handle(t, e, ev))
	}
	// e@0, e@1, f@0 and f@1 were folded ahead: applied on their first
	// delivery; e@3 applies; e@2, f@2 and e@1 again are duplicates.
	if counts.counts[projector.Applied] != 5 || counts.counts[projector.Duplicate] != 3 || counts.waits != 0 {
		t.Errorf("the predecessors delivered late, and copies: %v, %d waits; want 5 applied and 3 duplicates", counts.counts, counts.waits)
	}
	if err := projectortest.CheckDocument(ctx, s, summary, "x", all); err != nil {
		t.Error(err)
	}
}

// Under a revision map too, the stream is folded ahead only where each
// event would simply apply: past a predecessor that does not decode, the
// event waits for it as before (and, under Skip, the undecodable one is
// skipped when it comes); without the event store's streams nothing is
// read.
func TestGapFill_under_a_revision_map_stops_at_an_event_that_does_not_decode(t *testing.T) {
	_, all := clientLog(t, "x", map[string][]any{
		"g": {cart.ShoppingCartOpened{ShoppingCartID: "g", ClientID: "x", OpenedAt: t0}, add("g", "p", 1), add("g", "q", 2), add("g", "r", 3)},
	})
	all[2].Data = []byte(`{"productItem": 12`) // does not decode
	raw := make([]projector.Event, len(all))
	copy(raw, all)
	for i := range raw {
		raw[i].Payload = nil
	}
	impatient := retry.Policy{InitialDelay: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond, MaxRetries: 2, MaxElapsed: time.Second}
	summary := cart.NewClientSummaryProjection()
	for _, withStreams := range []bool{true, false} {
		s := newStore(t)
		opts := []projector.Option{projector.WithRetry(impatient), projector.WithFailurePolicy(projector.Skip)}
		if withStreams {
			opts = append(opts, projector.WithStreamReader(newStreams(raw...)))
		}
		e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{summary}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		handle(t, e, raw[0])
		if r := handle(t, e, raw[3])[0]; r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrPredecessorMissing) {
			t.Fatalf("streams %v: revision 3 past an undecodable revision 2: %v (%v), want it to wait for its predecessor", withStreams, r.Outcome, r.Err)
		}
		for _, at := range []int{1, 2, 3} {
			want := projector.Applied
			if at == 2 {
				want = projector.Skipped
			}
			if r := handle(t, e, raw[at])[0]; r.Outcome != want {
				t.Fatalf("streams %v: revision %d: %v (%v), want %v", withStreams, at, r.Outcome, r.Err, want)
			}
		}
		if err := projectortest.CheckDocument(context.Background(), s, summary, "x", []projector.Event{all[0], all[1], all[3]}); err != nil {
			t.Errorf("streams %v: %v", withStreams, err)
		}
	}
}
