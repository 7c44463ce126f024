package projector_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// fixable is the cart-details projection with a bug that panics on product
// "x" while broken is set: what a deploy with a bad handler looks like.
func fixable(broken *atomic.Bool) *projector.Projection[cart.Details] {
	p := projector.New[cart.Details]("fixable", projector.StreamSuffix(cart.StreamPrefix)).OnFailure(projector.Park)
	projector.Create(p, func(e cart.ShoppingCartOpened) (cart.Details, error) {
		return cart.Details{ClientID: e.ClientID, Status: cart.StatusOpened, ProductItems: []cart.ProductItem{}}, nil
	})
	projector.On(p, func(d cart.Details, e cart.ProductItemAddedToShoppingCart) (cart.Details, error) {
		if broken.Load() && e.ProductItem.ProductID == "x" {
			var m map[string]int
			//lint:ignore SA5000 the handler must panic while it is broken
			m["x"]++ // nil map
		}
		items, err := cart.AddProductItem(d.ProductItems, e.ProductItem)
		d.ProductItems = items
		return d, err
	})
	return p
}

func TestPark_records_a_poison_event_moves_past_it_and_replays_it_after_the_fix(t *testing.T) {
	s := newStore(t)
	var broken atomic.Bool
	broken.Store(true)
	p := fixable(&broken)
	// The engine blocks by default; the projection parks.
	// Another projection of the same events goes on regardless.
	details := cart.NewDetailsProjection()
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p, details}, projector.WithRetry(retry.Default()), projector.WithParker(s))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	add := func(id string, q int) cart.ProductItemAddedToShoppingCart {
		return cart.ProductItemAddedToShoppingCart{ShoppingCartID: "k1", ProductItem: cart.ProductItem{ProductID: id, Quantity: q}}
	}
	evs := log.MustAppend(t, cart.StreamID("k1"), cart.ShoppingCartOpened{ShoppingCartID: "k1", ClientID: "c", OpenedAt: t0}, add("p", 1), add("x", 2), add("q", 3))
	var outcomes []projector.Outcome
	for _, ev := range evs {
		rs, _ := e.Handle(context.Background(), ev)
		for _, r := range rs {
			if r.Projection == "fixable" {
				outcomes = append(outcomes, r.Outcome)
			} else if r.Outcome != projector.Applied {
				t.Fatalf("details: %v %v", r.Outcome, r.Err)
			}
		}
	}
	if len(outcomes) != 4 || outcomes[2] != projector.Parked || outcomes[3] != projector.Applied {
		t.Fatalf("outcomes %v", outcomes)
	}
	assertDocument(t, s, "k1", evs) // the details projection has every event
	// The fold without x, at revision 3 (the last event's).
	if err := projectortest.CheckDocument(context.Background(), s, p, "k1", []projector.Event{evs[0], evs[1], evs[3]}); err != nil {
		t.Fatal(err)
	}
	parked, err := s.Parked(context.Background(), "fixable")
	if err != nil || len(parked) != 1 {
		t.Fatalf("parked %v %v", parked, err)
	}
	pe := parked[0]
	if pe.ID != evs[2].ID || pe.StreamRevision != 2 || pe.Document != "k1" || !strings.Contains(pe.Error, "panicked") || pe.Attempts < 1 {
		t.Fatalf("parked record %+v", pe)
	}
	// Delivered again, it is a duplicate, not parked twice.
	if rs, _ := e.Handle(context.Background(), evs[2]); rs[0].Outcome != projector.Duplicate {
		t.Fatalf("redelivered: %v", rs[0].Outcome)
	}

	// Replaying while still broken fails and keeps it parked.
	if r := e.Replay(context.Background(), pe); r.Outcome != projector.Failed {
		t.Fatalf("replay while broken: %v", r.Outcome)
	}
	broken.Store(false)
	if r := e.Replay(context.Background(), pe); r.Outcome != projector.Applied {
		t.Fatalf("replay after the fix: %v %v", r.Outcome, r.Err)
	}
	if err := s.Replayed(context.Background(), pe, nil); err != nil {
		t.Fatal(err)
	}
	// After the replay the document holds every event's effect. The item
	// list is in the order the events were applied (x last), so compare the
	// quantities per product with the fold's.
	want, _ := p.Fold(evs...)
	var got cart.Details
	head, _, err := s.Load(context.Background(), "fixable", "k1", 0, &got)
	if rev := head.Revision; err != nil || rev != 3 || !sameItems(got.ProductItems, want.ProductItems) {
		t.Fatalf("after the replay: revision %d, items %v, want %v (%v)", head.Revision, got.ProductItems, want.ProductItems, err)
	}
	if left, _ := s.Parked(context.Background(), "fixable"); len(left) != 0 {
		t.Fatalf("still parked: %v", left)
	}
}

// A parked creation (a Create handler that failed) whose document later
// events made since is not replayed into it: its state would replace
// theirs. The replay fails with ErrAlreadyCreated, saying to rebuild, and
// the document keeps the later events' changes. One replayed before any
// later event applies.
func TestPark_a_parked_creation_is_not_replayed_over_the_later_events(t *testing.T) {
	for _, strategy := range []projector.Strategy{projector.StreamRevision(), projector.RevisionMap()} {
		t.Run(strategy.String(), func(t *testing.T) { testParkedCreation(t, strategy) })
	}
}

func testParkedCreation(t *testing.T, strategy projector.Strategy) {
	s := newStore(t)
	var broken atomic.Bool
	broken.Store(true)
	p := projector.New[cart.Details]("opens", projector.StreamSuffix(cart.StreamPrefix)).OnFailure(projector.Park).Idempotency(strategy)
	projector.Create(p, func(e cart.ShoppingCartOpened) (cart.Details, error) {
		if broken.Load() {
			return cart.Details{}, errors.New("cannot open yet")
		}
		return cart.Details{ClientID: e.ClientID, Status: cart.StatusOpened, ProductItems: []cart.ProductItem{}}, nil
	})
	projector.On(p, func(d cart.Details, e cart.ProductItemAddedToShoppingCart) (cart.Details, error) {
		if e.ProductItem.ProductID == "needs-open" && d.Status != cart.StatusOpened {
			return d, errors.New("not opened")
		}
		items, err := cart.AddProductItem(d.ProductItems, e.ProductItem)
		d.ProductItems = items
		return d, err
	})
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(retry.Default()), projector.WithParker(s))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	add := func(id, product string) cart.ProductItemAddedToShoppingCart {
		return cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: product, Quantity: 2}}
	}
	open := func(id string) cart.ShoppingCartOpened {
		return cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c-" + id, OpenedAt: t0}
	}
	// k1: its item applies on the zero state after the failed opening.
	// k2: its opening alone. k3: its item fails too (it needs the opening),
	// so the document is still the zero state, two revisions on.
	k1 := log.MustAppend(t, cart.StreamID("k1"), open("k1"), add("k1", "p"))
	k2 := log.MustAppend(t, cart.StreamID("k2"), open("k2"))
	k3 := log.MustAppend(t, cart.StreamID("k3"), open("k3"), add("k3", "needs-open"))
	ctx := context.Background()
	for _, ev := range append(append(k1, k2...), k3...) {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	parked, err := s.Parked(ctx, "opens")
	if err != nil || len(parked) != 4 {
		t.Fatalf("parked %+v (%v), want the three openings and k3's item", parked, err)
	}
	broken.Store(false)
	for _, pe := range parked {
		r := e.Replay(ctx, pe)
		var d cart.Details
		if _, _, err := projector.ReadDocument(ctx, s, p, pe.Document, &d); err != nil {
			t.Fatal(err)
		}
		switch pe.Document {
		case "k1": // its item was added since: the opening is not replayed over it
			if r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrAlreadyCreated) || !strings.Contains(r.Err.Error(), "rebuild") {
				t.Errorf("replay of k1's opening: %v %v; want it refused, saying to rebuild", r.Outcome, r.Err)
			}
			if len(d.ProductItems) != 1 || d.ClientID != "" {
				t.Errorf("k1 after the refused replay: %+v; want its item kept", d)
			}
		case "k2": // nothing since: the opening applies
			if r.Outcome != projector.Applied || d.ClientID != "c-k2" || d.Status != cart.StatusOpened {
				t.Errorf("replay of k2's opening: %v %v, document %+v", r.Outcome, r.Err, d)
			}
		case "k3": // only failures since: both replay, in order
			if r.Outcome != projector.Applied {
				t.Errorf("replay of k3's revision %d: %v %v", pe.StreamRevision, r.Outcome, r.Err)
			}
		}
	}
	if err := projectortest.CheckDocument(ctx, s, p, "k3", k3); err != nil {
		t.Errorf("k3 after its replays: %v", err)
	}
}

func TestPark_needs_a_parker(t *testing.T) {
	var broken atomic.Bool
	if _, err := projector.NewEngine(newStore(t), cart.Registry(), []projector.Definition{fixable(&broken)}); err == nil || !strings.Contains(err.Error(), "WithParker") {
		t.Fatalf("err %v", err)
	}
}

func sameItems(a, b []cart.ProductItem) bool {
	count := map[string]int{}
	for _, i := range a {
		count[i.ProductID] += i.Quantity
	}
	for _, i := range b {
		count[i.ProductID] -= i.Quantity
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}

func TestPark_replay_of_a_document_kept_by_another_strategy_is_conditional_on_its_version(t *testing.T) {
	s := newStore(t)
	var broken atomic.Bool
	broken.Store(true)
	p := fixable(&broken).Idempotency(projector.HandledIDs(100))
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(retry.Default()), projector.WithParker(s))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	add := func(id string) cart.ProductItemAddedToShoppingCart {
		return cart.ProductItemAddedToShoppingCart{ShoppingCartID: "k2", ProductItem: cart.ProductItem{ProductID: id, Quantity: 1}}
	}
	evs := log.MustAppend(t, cart.StreamID("k2"), cart.ShoppingCartOpened{ShoppingCartID: "k2", ClientID: "c", OpenedAt: t0}, add("x"), add("q"))
	for _, ev := range evs {
		e.Handle(context.Background(), ev)
	}
	parked, _ := s.Parked(context.Background(), "fixable")
	if len(parked) != 1 {
		t.Fatalf("parked %v", parked)
	}
	broken.Store(false)
	if r := e.Replay(context.Background(), parked[0]); r.Outcome != projector.Applied {
		t.Fatalf("replay: %v %v", r.Outcome, r.Err)
	}
	var got cart.Details
	meta, _, err := s.LoadGuarded(context.Background(), "fixable", "k2", &got)
	want, _ := p.Fold(evs...)
	if err != nil || !sameItems(got.ProductItems, want.ProductItems) || meta.Version != 4 {
		t.Fatalf("after the replay: %+v version %d (%v)", got, meta.Version, err)
	}
}

func TestGuarded_strategies_that_need_a_position_refuse_an_event_without_one(t *testing.T) {
	s := newStore(t)
	var broken atomic.Bool
	p := fixable(&broken).Idempotency(projector.GlobalPosition()).OnFailure(projector.Block)
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p})
	if err != nil {
		t.Fatal(err)
	}
	ev := projectortest.NewLog(cart.Registry()).MustAppend(t, cart.StreamID("k3"), cart.ShoppingCartOpened{ShoppingCartID: "k3", ClientID: "c", OpenedAt: t0})[0]
	ev.Position = 0
	if rs, _ := e.Handle(context.Background(), ev); rs[0].Outcome != projector.Failed || !strings.Contains(rs[0].Err.Error(), "global position") {
		t.Fatalf("%v %v", rs[0].Outcome, rs[0].Err)
	}
}

func TestHandledIDs_an_event_outside_the_window_is_parked_under_Park(t *testing.T) {
	s := newStore(t)
	var broken atomic.Bool
	p := fixable(&broken).Idempotency(projector.HandledIDs(2))
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithParker(s))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("k4"), cart.ShoppingCartOpened{ShoppingCartID: "k4", ClientID: "c", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "k4", ProductItem: cart.ProductItem{ProductID: "a", Quantity: 1}},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "k4", ProductItem: cart.ProductItem{ProductID: "b", Quantity: 1}},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "k4", ProductItem: cart.ProductItem{ProductID: "c", Quantity: 1}})
	for _, ev := range evs {
		e.Handle(context.Background(), ev)
	}
	rs, _ := e.Handle(context.Background(), evs[1]) // older than the window of 2
	if rs[0].Outcome != projector.Parked || !errors.Is(rs[0].Err, projector.ErrOutsideWindow) {
		t.Fatalf("%v %v", rs[0].Outcome, rs[0].Err)
	}
	parked, _ := s.Parked(context.Background(), "fixable")
	if len(parked) != 1 || !strings.Contains(parked[0].Error, "older than the window") {
		t.Fatalf("parked %v", parked)
	}
	// A replay cannot tell whether it was applied (it was: a redelivery)
	// either: it refuses, and the document stays the fold.
	if r := e.Replay(context.Background(), parked[0]); r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrOutsideWindow) {
		t.Errorf("replay: %v %v; want it refused", r.Outcome, r.Err)
	}
	if err := projectortest.CheckDocument(context.Background(), s, p, "k4", evs); err != nil {
		t.Error(err)
	}
}

// A stream whose first event the projection passes over (a type nobody
// registered, an event its upcaster drops, one it has no handler for) and
// whose creation comes after it: the creation applies over the document
// that passed event made, as in the fold, instead of being refused as a
// second creation. Through a runner (batches) and one event at a time.
func TestCreate_after_an_event_the_projection_passes_over_applies_as_in_the_fold(t *testing.T) {
	for _, batch := range []int{1, 100} {
		s := newStore(t)
		log := projectortest.NewLog(cart.Registry())
		evs := log.MustAppend(t, cart.StreamID("n1"), projector.Event{Type: "cart.noise", Data: []byte(`{}`)},
			cart.ShoppingCartOpened{ShoppingCartID: "n1", ClientID: "c", OpenedAt: t0},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: "n1", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 2}})
		delivered := slices.Clone(evs)
		for i := range delivered {
			delivered[i].Payload = nil // as a subscription delivers them
		}
		r, err := projector.NewRunner("n", newEngine(t, s, retry.Default()), &scripted{events: delivered}, s, projector.WithBatch(batch, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := runUntil(t, r, func(st projector.RunnerStats) bool { return st.CaughtUp }); err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		if err := projectortest.CheckDocument(context.Background(), s, cart.NewDetailsProjection(), "n1", evs); err != nil {
			t.Errorf("batch %d: %v", batch, err)
		}
	}
}
