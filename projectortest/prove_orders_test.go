package projectortest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

type ordersPaid struct{ Amount float64 }

type ordersTotal struct{ Sum float64 }

// HandledIDs is for steps that commute: counters, sums. A float64 sum
// commutes up to rounding: with amounts 0.1, 0.2 and 0.3, the reverse fold
// gives 0.6 where the log's gives 0.6000000000000001. Prove does not take
// that for a dependence on the order: floats are compared to within
// rounding.
func TestProve_a_float_sum_in_another_order_is_not_order_dependent(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[ordersPaid](reg, "Paid")
	p := projector.New[ordersTotal]("orders_float_total", func(projector.Event) (string, bool) { return "shop", true }).
		Idempotency(projector.HandledIDs(100))
	projector.On(p, func(s ordersTotal, e ordersPaid) (ordersTotal, error) { s.Sum += e.Amount; return s, nil })
	streams := map[string][]any{"order-1": {ordersPaid{0.1}, ordersPaid{0.2}, ordersPaid{0.3}}}
	rep, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), reg, p, streams,
		projectortest.Delivery{Workers: 1, MaxTimes: 1, Seed: 1})
	if err != nil {
		t.Fatalf("%v\n%v", rep, err)
	}
}

type ordersOut struct{}
type ordersBack struct{}

type ordersPeak struct{ Out, Peak int }

// Under RevisionMap a document's streams interleave in any way. A summary
// whose state depends on the interleaving (the peak of loans out at once)
// depends on an order RevisionMap does not keep: Prove finds it also where
// the log has the streams one after another (both ways agree with it), by
// taking them in turns, for every seed.
func TestProve_finds_a_summary_that_depends_on_how_its_streams_interleave(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[ordersOut](reg, "Out")
	projector.Register[ordersBack](reg, "Back")
	newP := func(i int) *projector.Projection[ordersPeak] {
		p := projector.New[ordersPeak](fmt.Sprintf("orders_peak_%d", i), func(projector.Event) (string, bool) { return "member", true }).
			Idempotency(projector.RevisionMap())
		projector.On(p, func(s ordersPeak, _ ordersOut) (ordersPeak, error) {
			s.Out++
			s.Peak = max(s.Peak, s.Out)
			return s, nil
		})
		projector.On(p, func(s ordersPeak, _ ordersBack) (ordersPeak, error) { s.Out--; return s, nil })
		return p
	}
	streams := map[string][]any{"loan-a": {ordersOut{}, ordersBack{}}, "loan-b": {ordersOut{}, ordersBack{}}}
	var passed []uint64
	for seed := range uint64(12) {
		_, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), reg, newP(int(seed)), streams,
			projectortest.Delivery{Workers: 1, MaxTimes: 1, Seed: seed})
		if err == nil {
			passed = append(passed, seed)
		}
	}
	if len(passed) > 0 {
		t.Fatalf("an interleaving-dependent summary under RevisionMap passed Prove with seeds %v (of 0..11; in the log's order, one worker, as TestProve_finds_an_order_dependent_fold_the_deliveries_did_not_meet delivers)", passed)
	}
}

type ordersOpened struct{}
type ordersClosed struct{}

type ordersStatus struct{ Status string }

// Under HandledIDs a document's events apply in any order. A status that
// the last event sets depends on that order, also for a history that reads
// the same both ways (opened, closed, opened again), whose reverse fold is
// the log's: Prove finds it by moving the last event first.
func TestProve_finds_a_status_the_last_event_sets_under_a_strategy_that_keeps_no_order(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[ordersOpened](reg, "Opened")
	projector.Register[ordersClosed](reg, "Closed")
	p := projector.New[ordersStatus]("orders_status", projector.StreamSuffix("shop-")).Idempotency(projector.HandledIDs(100))
	projector.On(p, func(s ordersStatus, _ ordersOpened) (ordersStatus, error) { s.Status = "open"; return s, nil })
	projector.On(p, func(s ordersStatus, _ ordersClosed) (ordersStatus, error) { s.Status = "closed"; return s, nil })
	streams := map[string][]any{"shop-1": {ordersOpened{}, ordersClosed{}, ordersOpened{}}}
	rep, err := projectortest.Prove(context.Background(), mongostore.New(mongotest.Database(t)), reg, p, streams,
		projectortest.Delivery{Workers: 1, MaxTimes: 1, Seed: 1})
	if err == nil {
		t.Fatalf("%v: Prove passed a status the last event sets, under a strategy that keeps no order", rep)
	}
}
