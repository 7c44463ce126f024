package projector_test

import (
	"strings"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
)

// An engine of several projections spreads its events over the workers by
// stream, so the shop summary's one document, fed by every cart, meets the
// events of four workers out of log order by up to what they hold (4 x
// (1000 + 1024)), far past its window of 2,000 ids: a catch-up of a few
// thousand carts stopped on ErrOutsideWindow. The runner refuses that at
// start, saying what to do; one worker, or the projection in an engine of
// its own, is accepted.
func TestNewRunner_refuses_a_window_smaller_than_the_events_its_workers_hold(t *testing.T) {
	s := newStore(t)
	mixed := newEngine(t, s, patient(), cart.NewDetailsProjection(), cart.NewShopSummaryProjection())
	_, err := projector.NewRunner("mixed", mixed, &scripted{}, s)
	if err == nil {
		t.Fatal("a runner of 4 workers over an engine of two projections, one of them HandledIDs(2000), was accepted")
	}
	for _, want := range []string{`"cart_shop_summary"`, "last 2000 handled ids", "8096 events", "an engine of its own", "WithWorkers(1)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if _, err := projector.NewRunner("one-worker", mixed, &scripted{}, s, projector.WithWorkers(1)); err != nil {
		t.Errorf("one worker hands the document its events in log order, yet: %v", err)
	}
	alone := newEngine(t, s, patient(), cart.NewShopSummaryProjection())
	if _, err := projector.NewRunner("alone", alone, &scripted{}, s); err != nil {
		t.Errorf("an engine of the shop summary alone gives its document's events to one worker, yet: %v", err)
	}
	wide := projector.Copy(cart.NewShopSummaryProjection().Idempotency(projector.HandledIDs(8096)), "shop_wide")
	if _, err := projector.NewRunner("wide", newEngine(t, s, patient(), cart.NewDetailsProjection(), wide), &scripted{}, s); err != nil {
		t.Errorf("a window as large as the events in flight, yet: %v", err)
	}
}

// unbatched is a store with guarded writes and no guarded batch writes
// (no driver.GuardedBatchStore), as a user's own driver may be.
type unbatched struct {
	driver.Store
	driver.GuardedStore
}

// An engine of one HandledIDs projection on a store without guarded batch
// writes does not batch, so it spreads its events by stream too: refused,
// with the events in flight of workers handling one event at a time, and
// without the advice of an engine of its own, which it has.
func TestNewRunner_refuses_a_window_its_workers_overrun_on_a_store_without_batches(t *testing.T) {
	s := newStore(t)
	alone := newEngine(t, unbatched{s, s}, patient(), cart.NewShopSummaryProjection())
	_, err := projector.NewRunner("alone", alone, &scripted{}, s)
	if err == nil {
		t.Fatal("4 workers handing the shop summary its events by stream were accepted")
	}
	for _, want := range []string{"4100 events", "writes no guarded batches", "WithWorkers(1)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "an engine of its own") {
		t.Errorf("the refusal advises an engine of its own, which it has: %v", err)
	}
	if _, err := projector.NewRunner("alone-one", alone, &scripted{}, s, projector.WithWorkers(1)); err != nil {
		t.Errorf("one worker, yet: %v", err)
	}
}
