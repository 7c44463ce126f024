package projector_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
)

// unbatched is a store with guarded writes and no guarded batch writes
// (no driver.GuardedBatchStore), as a user's own driver may be.
type unbatched struct {
	driver.Store
	driver.GuardedStore
}

// newRunnerLogged makes a runner of defs over store with opts, and returns
// what it logged.
func newRunnerLogged(t *testing.T, store driver.Store, opts []projector.RunnerOption, defs ...projector.Definition) string {
	t.Helper()
	var log lockedbuf.Buffer
	e, err := projector.NewEngine(store, cart.Registry(), defs, projector.WithRetry(patient()),
		projector.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := projector.NewRunner("windows", e, &scripted{}, newStore(t), opts...); err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	return log.String()
}

// perCart counts a cart's items under HandledIDs: each document is fed by
// one stream.
type perCart struct {
	Items int `bson:"items"`
}

// An engine of several projections spreads its events over the workers by
// stream, so the shop summary's one document, fed by every cart, meets the
// events of four workers out of log order by up to what they hold (4 x
// (1000 + 1024)), far past its window of 2,000 ids: a catch-up of a few
// thousand carts stopped on ErrOutsideWindow. NewRunner warns at start,
// with the figures and what to do; it does not refuse, as a document fed
// by one stream meets its events in one worker, in order. One worker, the
// projection in an engine of its own, or a window as large as the events
// in flight draw no warning. An engine of one projection on a store
// without guarded batch writes handles events one at a time, spread by
// stream: the figure counts one event a worker, and the advice is not an
// engine of its own, which it has.
func TestNewRunner_warns_of_a_window_smaller_than_the_events_its_workers_hold(t *testing.T) {
	s := newStore(t)
	const warning = "a handled-ids window smaller than the events the workers can hold"
	log := newRunnerLogged(t, s, nil, cart.NewDetailsProjection(), cart.NewShopSummaryProjection())
	for _, want := range []string{warning, "projection=cart_shop_summary", "window=2000", "in_flight=8096", "an engine of its own", "WithWorkers(1)"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
	wide := projector.Copy(cart.NewShopSummaryProjection().Idempotency(projector.HandledIDs(8096)), "shop_wide")
	for name, log := range map[string]string{
		"one worker": newRunnerLogged(t, s, []projector.RunnerOption{projector.WithWorkers(1)}, cart.NewDetailsProjection(), cart.NewShopSummaryProjection()),
		"alone":      newRunnerLogged(t, s, nil, cart.NewShopSummaryProjection()),
		"wide":       newRunnerLogged(t, s, nil, cart.NewDetailsProjection(), wide),
	} {
		if strings.Contains(log, warning) {
			t.Errorf("%s: warned:\n%s", name, log)
		}
	}
	log = newRunnerLogged(t, unbatched{s, s}, nil, cart.NewShopSummaryProjection())
	for _, want := range []string{warning, "in_flight=4100", "writes no guarded batches"} {
		if !strings.Contains(log, want) {
			t.Errorf("a store without guarded batches: the log does not say %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "an engine of its own") {
		t.Errorf("a store without guarded batches: the advice is an engine of its own, which it has:\n%s", log)
	}
	// Documents each fed by one stream: a warning, and a runner.
	p := projector.New[perCart]("per_cart", projector.StreamSuffix(cart.StreamPrefix)).Idempotency(projector.HandledIDs(100))
	projector.On(p, func(c perCart, _ cart.ProductItemAddedToShoppingCart) (perCart, error) { c.Items++; return c, nil })
	newRunnerLogged(t, s, nil, cart.NewDetailsProjection(), p)
}
