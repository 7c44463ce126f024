package cart_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Main(m)) }

func prove[S any](t *testing.T, p *projector.Projection[S], d projectortest.Delivery) projectortest.Report {
	t.Helper()
	lives, meta := cart.Shop(30, 6, d.Seed)
	d.Metadata = meta
	rep, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), cart.Registry(), p, lives, d)
	t.Log(rep)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestClientSummary_per_stream_revision_map_under_shuffled_duplicated_concurrent_delivery(t *testing.T) {
	rep := prove(t, cart.NewClientSummaryProjection(), projectortest.Delivery{MaxTimes: 3, Workers: 8, Shuffle: true, Seed: 1})
	if rep.Documents != 5 || rep.Applied != rep.Events || rep.Duplicates == 0 {
		t.Fatalf("report %v", rep)
	}
}

func TestShopSummary_handled_ids_under_shuffled_duplicated_concurrent_delivery(t *testing.T) {
	rep := prove(t, cart.NewShopSummaryProjection(), projectortest.Delivery{MaxTimes: 3, Workers: 8, Shuffle: true, Seed: 2})
	if rep.Documents != 1 || rep.Applied != rep.Events || rep.Duplicates == 0 {
		t.Fatalf("report %v", rep)
	}
}

func TestClientSummary_global_position_with_one_ordered_consumer(t *testing.T) {
	p := cart.NewClientSummaryProjection().Idempotency(projector.GlobalPosition())
	rep := prove(t, p, projectortest.Delivery{MaxTimes: 3, Workers: 1, Seed: 3})
	if rep.Applied != rep.Events || rep.Duplicates == 0 {
		t.Fatalf("report %v", rep)
	}
}

// productsSeen is naturally idempotent: a set union, in any order, any
// number of times.
type productsSeen struct {
	Products []string `bson:"products"`
}

func productsProjection(strategy projector.Strategy) *projector.Projection[productsSeen] {
	p := projector.New[productsSeen]("products_seen", cart.ClientOf).Idempotency(strategy)
	projector.On(p, func(s productsSeen, e cart.ProductItemAddedToShoppingCart) (productsSeen, error) {
		if !slices.Contains(s.Products, e.ProductItem.ProductID) {
			s.Products = append(slices.Clone(s.Products), e.ProductItem.ProductID)
			slices.Sort(s.Products)
		}
		return s, nil
	})
	return p
}

func TestNone_for_a_naturally_idempotent_projection(t *testing.T) {
	prove(t, productsProjection(projector.None()), projectortest.Delivery{MaxTimes: 3, Workers: 8, Shuffle: true, Seed: 4})
}

// addsCounted counts item additions: not idempotent, so under None a
// redelivered event counts twice.
type addsCounted struct {
	Adds int `bson:"adds"`
}

func TestProve_catches_a_projection_that_counts_a_redelivered_event_twice(t *testing.T) {
	p := projector.New[addsCounted]("adds_counted", cart.ClientOf).Idempotency(projector.None())
	projector.On(p, func(s addsCounted, _ cart.ProductItemAddedToShoppingCart) (addsCounted, error) {
		s.Adds++
		return s, nil
	})
	lives, meta := cart.Shop(30, 6, 5)
	rep, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), cart.Registry(), p, lives,
		projectortest.Delivery{MaxTimes: 3, Workers: 4, Seed: 5, Metadata: meta})
	t.Log(rep, err)
	if !errors.Is(err, projectortest.ErrNotExactlyOnce) {
		t.Fatalf("Prove did not catch the double count: %v", err)
	}
	// The same projection under handled ids is exactly-once.
	p.Idempotency(projector.HandledIDs(1000))
	if _, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), cart.Registry(), p, lives,
		projectortest.Delivery{MaxTimes: 3, Workers: 4, Seed: 5, Metadata: meta}); err != nil {
		t.Fatal(err)
	}
}

func TestHandledIDs_the_window_never_grows_past_its_bound_and_an_older_event_is_reported(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	p := projector.New[addsCounted]("adds_window", func(projector.Event) (string, bool) { return "all", true }).Idempotency(projector.HandledIDs(3))
	projector.On(p, func(s addsCounted, _ cart.ProductItemAddedToShoppingCart) (addsCounted, error) {
		s.Adds++
		return s, nil
	})
	e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{p}, projector.WithRetry(retry.Default()))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	var evs []projector.Event
	for i := range 10 {
		evs = append(evs, log.MustAppend(t, cart.StreamID(fmt.Sprint("w", i)),
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: fmt.Sprint("w", i), ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})...)
	}
	for i, ev := range evs {
		if rs, _ := e.Handle(ctx, ev); rs[0].Outcome != projector.Applied {
			t.Fatalf("event %d: %v %v", i, rs[0].Outcome, rs[0].Err)
		}
		meta, _, err := store.LoadGuarded(ctx, "adds_window", "all", nil)
		if err != nil || len(meta.Handled) > 3 {
			t.Fatalf("after %d events the window holds %d ids (%v)", i+1, len(meta.Handled), err)
		}
	}
	// Inside the window: a duplicate. Older than it: reported, not counted.
	if rs, _ := e.Handle(ctx, evs[9]); rs[0].Outcome != projector.Duplicate {
		t.Fatalf("recent redelivery: %v", rs[0].Outcome)
	}
	rs, _ := e.Handle(ctx, evs[2])
	if rs[0].Outcome != projector.Failed || !errors.Is(rs[0].Err, projector.ErrOutsideWindow) {
		t.Fatalf("old redelivery: %v %v", rs[0].Outcome, rs[0].Err)
	}
	var got addsCounted
	if _, _, err := store.LoadGuarded(ctx, "adds_window", "all", &got); err != nil || got.Adds != 10 {
		t.Fatalf("adds %d (%v), want 10", got.Adds, err)
	}
}

func TestInbox_without_transactions_fails_at_start_naming_the_alternatives(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	caps, err := store.Capabilities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := productsProjection(projector.Inbox(0))
	if caps.Transactions {
		t.Logf("%s runs transactions: the inbox is tested for real", caps.Server)
		prove(t, p, projectortest.Delivery{MaxTimes: 3, Workers: 8, Shuffle: true, Seed: 6})
		return
	}
	e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{p})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Prepare(context.Background())
	if !errors.Is(err, projector.ErrNoTransactions) {
		t.Fatalf("Prepare: %v", err)
	}
	for _, want := range []string{"replica set", "handled-ids", "revision map", "global position"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not name %q", err, want)
		}
	}
}
