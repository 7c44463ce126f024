package projector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

func TestGate_full_cart_life_in_order_equals_the_pure_fold(t *testing.T) {
	s := newStore(t)
	e := newEngine(t, s, retry.Default())
	log := projectortest.NewLog(cart.Registry())
	r := rand.New(rand.NewPCG(1, 1))
	for i := range 5 {
		id := fmt.Sprintf("cart-%d", i)
		evs := log.MustAppend(t, cart.StreamID(id), cart.RandomLife(r, id, "client", 4+i*3, t0)...)
		var tl tally
		for _, ev := range evs {
			tl.add(handle(t, e, ev))
		}
		if tl.counts[projector.Applied] != len(evs) || len(tl.errs) > 0 || tl.waits != 0 {
			t.Fatalf("cart %s: outcomes %v, waits %d, errors %v", id, tl.counts, tl.waits, tl.errs)
		}
		assertDocument(t, s, id, evs)
	}
}

func TestGate_redelivered_events_are_skipped_as_duplicates(t *testing.T) {
	s := newStore(t)
	e := newEngine(t, s, retry.Default())
	log := projectortest.NewLog(cart.Registry())
	r := rand.New(rand.NewPCG(2, 2))
	for i := range 6 {
		id := fmt.Sprintf("cart-%d", i)
		evs := log.MustAppend(t, cart.StreamID(id), cart.RandomLife(r, id, "client", 10, t0)...)
		deliveries := projectortest.Redeliver(r, evs, 3)
		var tl tally
		for _, ev := range deliveries {
			tl.add(handle(t, e, ev))
		}
		if len(tl.errs) > 0 {
			t.Fatalf("cart %s: %v", id, tl.errs)
		}
		if tl.counts[projector.Applied] != len(evs) || tl.counts[projector.Duplicate] != len(deliveries)-len(evs) {
			t.Fatalf("cart %s: %d deliveries of %d events gave %v", id, len(deliveries), len(evs), tl.counts)
		}
		assertDocument(t, s, id, evs)
	}
}

// creationHold delays the insert of each cart until the events after it have
// all read the store and found no predecessor, so that every one of them must
// wait in the gate: the out-of-order case made certain rather than likely.
type creationHold struct {
	driver.Store
	need int
	mu   sync.Mutex
	seen map[string]map[uint64]bool // document -> revisions waited for
	open map[string]chan struct{}
}

func newCreationHold(s driver.Store, need int) *creationHold {
	return &creationHold{Store: s, need: need, seen: map[string]map[uint64]bool{}, open: map[string]chan struct{}{}}
}

func (h *creationHold) gate(id string) chan struct{} {
	if h.open[id] == nil {
		h.open[id] = make(chan struct{})
		h.seen[id] = map[uint64]bool{}
	}
	return h.open[id]
}

func (h *creationHold) Load(ctx context.Context, coll, id string, min uint64, state any) (driver.Head, bool, error) {
	rev, found, err := h.Store.Load(ctx, coll, id, min, state)
	if err == nil && !found {
		h.mu.Lock()
		ch := h.gate(id)
		if !h.seen[id][min] {
			h.seen[id][min] = true
			if len(h.seen[id]) == h.need {
				close(ch)
			}
		}
		h.mu.Unlock()
	}
	return rev, found, err
}

func (h *creationHold) Insert(ctx context.Context, coll, id string, rev driver.Head, state any) error {
	h.mu.Lock()
	ch := h.gate(id)
	h.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.Store.Insert(ctx, coll, id, rev, state)
}

func TestGate_concurrent_shuffled_delivery_equals_the_in_order_fold(t *testing.T) {
	t.Parallel()            // long, and on a database and servers of its own
	const eventsPerCart = 8 // one per goroutine
	for _, carts := range []int{1, 50} {
		for _, mode := range []string{"an_engine_per_goroutine", "one_shared_engine"} {
			t.Run(fmt.Sprintf("%d_carts_%s", carts, mode), func(t *testing.T) {
				base := newStore(t)
				var store driver.Store = base
				if mode == "an_engine_per_goroutine" {
					// Each goroutine is a separate consumer: only the store orders them.
					store = newCreationHold(base, eventsPerCart-1)
				}
				shared := newEngine(t, store, patient())
				log := projectortest.NewLog(cart.Registry())
				r := rand.New(rand.NewPCG(uint64(carts), 3))
				lives := map[string][]projector.Event{}
				var all []projector.Event
				for i := range carts {
					id := fmt.Sprintf("cart-%d", i)
					lives[id] = log.MustAppend(t, cart.StreamID(id), cart.RandomLife(r, id, "client", eventsPerCart, t0)...)
					all = append(all, lives[id]...)
				}
				all = projectortest.Shuffled(r, all)

				var tl tally
				var wg sync.WaitGroup
				start := make(chan struct{})
				for _, ev := range all {
					e := shared
					if mode == "an_engine_per_goroutine" {
						e = newEngine(t, store, patient())
					}
					wg.Go(func() {
						<-start
						rs, _ := e.Handle(t.Context(), ev)
						tl.add(rs)
						if ev.StreamRevision > 0 && mode == "an_engine_per_goroutine" && rs[0].Waits == 0 {
							t.Errorf("%s revision %d did not wait for its predecessor", ev.StreamID, ev.StreamRevision)
						}
					})
				}
				close(start)
				wg.Wait()
				if len(tl.errs) > 0 {
					t.Fatalf("%d failures, first: %v", len(tl.errs), tl.errs[0])
				}
				if tl.counts[projector.Applied] != len(all) {
					t.Fatalf("outcomes %v, want %d applied", tl.counts, len(all))
				}
				for id, evs := range lives {
					assertDocument(t, base, id, evs)
				}
				t.Logf("%d events, %d waits in the store gate", len(all), tl.waits)
			})
		}
	}
}

func TestGate_concurrent_duplicates_apply_once(t *testing.T) {
	s := newStore(t)
	e := newEngine(t, s, patient())
	log := projectortest.NewLog(cart.Registry())
	r := rand.New(rand.NewPCG(4, 4))
	evs := log.MustAppend(t, cart.StreamID("c"), cart.RandomLife(r, "c", "client", 8, t0)...)
	deliveries := projectortest.Shuffled(r, append(append([]projector.Event{}, evs...), evs...))
	var tl tally
	var wg sync.WaitGroup
	for _, ev := range deliveries {
		wg.Go(func() { rs, _ := e.Handle(t.Context(), ev); tl.add(rs) })
	}
	wg.Wait()
	if len(tl.errs) > 0 || tl.counts[projector.Applied] != len(evs) || tl.counts[projector.Duplicate] != len(evs) {
		t.Fatalf("outcomes %v, errors %v", tl.counts, tl.errs)
	}
	assertDocument(t, s, "c", evs)
}

func TestGate_a_predecessor_that_never_arrives_fails_within_the_policy(t *testing.T) {
	s := newStore(t)
	p := retry.Default()
	p.InitialDelay = 20 * time.Millisecond
	p.MaxRetries = 4
	e := newEngine(t, s, p)
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("c9"),
		cart.ShoppingCartOpened{ShoppingCartID: "c9", ClientID: "x", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "c9", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 2}},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "c9", ProductItem: cart.ProductItem{ProductID: "q", Quantity: 1}},
		cart.ShoppingCartConfirmed{ShoppingCartID: "c9", ConfirmedAt: t0},
	)
	handle(t, e, evs[0])
	handle(t, e, evs[1])
	// evs[2] (revision 2) is lost; revision 3 must give up.
	start := time.Now()
	res := handle(t, e, evs[3])[0]
	took := time.Since(start)

	var perr *projector.Error
	if res.Outcome != projector.Failed || !errors.As(res.Err, &perr) {
		t.Fatalf("result %+v, want a failure with *projector.Error", res)
	}
	if perr.Projection != cart.DetailsName || perr.Document != "c9" || perr.Stream != "shopping_cart-c9" ||
		perr.Revision != 3 || perr.Wanted != 2 || perr.Seen != 1 || perr.Attempts != p.MaxRetries+1 {
		t.Fatalf("error fields %+v", perr)
	}
	if !errors.Is(res.Err, projector.ErrPredecessorMissing) || !perr.Retryable() || res.Waits != p.MaxRetries {
		t.Fatalf("err %v, retryable %v, waits %d", res.Err, perr.Retryable(), res.Waits)
	}
	for _, part := range []string{`projection "cart_details"`, `document "c9"`, `stream "shopping_cart-c9"`, "revision 3", "wanted revision 2", "saw revision 1"} {
		if !strings.Contains(res.Err.Error(), part) {
			t.Errorf("message %q lacks %q", res.Err, part)
		}
	}
	var minWait time.Duration
	for _, w := range p.Schedule(0) {
		minWait += time.Duration(float64(w) * (1 - p.Jitter))
	}
	// The waits are bounded by the policy; the reads between them get a few seconds.
	if took < minWait || took > p.MaxWait()+5*time.Second {
		t.Fatalf("gave up after %v, the policy implies %v..%v of waiting", took, minWait, p.MaxWait())
	}
}

func TestGate_a_domain_error_fails_at_once_without_retries(t *testing.T) {
	s := newStore(t)
	p := retry.Default()
	p.InitialDelay = 30 * time.Second // any retry would show in the time taken
	p.MaxDelay = 30 * time.Second
	e := newEngine(t, s, p)
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("c1"),
		cart.ShoppingCartOpened{ShoppingCartID: "c1", ClientID: "x", OpenedAt: t0},
		cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: "c1", ProductItem: cart.ProductItem{ProductID: "ghost", Quantity: 1}},
	)
	handle(t, e, evs[0])
	start := time.Now()
	res := handle(t, e, evs[1])[0]
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %v: the domain error was retried", took)
	}
	var perr *projector.Error
	if res.Outcome != projector.Failed || !errors.As(res.Err, &perr) || res.Waits != 0 || perr.Attempts != 1 {
		t.Fatalf("result %+v", res)
	}
	if !errors.Is(res.Err, cart.ErrNotEnoughItems) || perr.Retryable() {
		t.Fatalf("err %v retryable %v", res.Err, perr.Retryable())
	}
	msg := res.Err.Error()
	for _, part := range []string{`projection "cart_details"`, `document "c1"`, "revision 1", `product "ghost"`, "not enough items"} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q lacks %q", msg, part)
		}
	}
	assertDocument(t, s, "c1", evs[:1]) // unchanged
}

func TestGate_event_types_the_projection_ignores_still_advance_the_revision(t *testing.T) {
	s := newStore(t)
	e := newEngine(t, s, retry.Default())
	log := projectortest.NewLog(cart.Registry())
	stream := cart.StreamID("c2")
	evs := log.MustAppend(t, stream, cart.ShoppingCartOpened{ShoppingCartID: "c2", ClientID: "x", OpenedAt: t0})
	evs = append(evs, log.MustAppend(t, stream, projector.Event{Type: "CartViewedByClient", Data: []byte(`{"at":"2026-11-02T10:00:00Z"}`)})[0])
	evs = append(evs, log.MustAppend(t, stream, cart.ProductItemAddedToShoppingCart{ShoppingCartID: "c2", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})...)
	var tl tally
	for _, ev := range evs {
		tl.add(handle(t, e, ev))
	}
	if tl.counts[projector.Applied] != 3 || tl.waits != 0 {
		t.Fatalf("outcomes %v waits %d errors %v", tl.counts, tl.waits, tl.errs)
	}
	assertDocument(t, s, "c2", evs)
}

func TestGate_a_payload_that_does_not_decode_fails_at_once(t *testing.T) {
	s := newStore(t)
	e := newEngine(t, s, retry.Default())
	log := projectortest.NewLog(cart.Registry())
	stream := cart.StreamID("c3")
	evs := log.MustAppend(t, stream, cart.ShoppingCartOpened{ShoppingCartID: "c3", ClientID: "x", OpenedAt: t0})
	handle(t, e, evs[0])
	bad := log.MustAppend(t, stream, projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"`)})[0]
	res := handle(t, e, bad)[0]
	var perr *projector.Error
	if res.Outcome != projector.Failed || !errors.As(res.Err, &perr) || perr.Retryable() || res.Waits != 0 {
		t.Fatalf("result %+v", res)
	}
	if !errors.Is(res.Err, projector.ErrUndecodable) || !strings.Contains(res.Err.Error(), cart.TypeAdded) {
		t.Fatalf("err %v", res.Err)
	}
}

type tally2 struct{ N int }

func TestGate_a_projection_that_panics_fails_the_event_not_the_process(t *testing.T) {
	s := newStore(t)
	p := projector.New[tally2]("panicky", projector.StreamSuffix(cart.StreamPrefix))
	projector.Create(p, func(cart.ShoppingCartOpened) (tally2, error) { return tally2{}, nil })
	projector.On(p, func(t tally2, e cart.ProductItemAddedToShoppingCart) (tally2, error) {
		var m map[string]int
		//lint:ignore SA5000 the handler must panic with a runtime error
		m[e.ProductItem.ProductID] = t.N // nil map: panics
		return t, nil
	})
	var logged bytes.Buffer
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(retry.Default()),
		projector.WithLogger(slog.New(slog.NewJSONHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("c4"),
		cart.ShoppingCartOpened{ShoppingCartID: "c4", ClientID: "x", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "c4", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
	)
	handle(t, e, evs[0])
	res := handle(t, e, evs[1])[0]
	var perr *projector.Error
	if res.Outcome != projector.Failed || !errors.Is(res.Err, projector.ErrPanic) || !errors.As(res.Err, &perr) || perr.Retryable() {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Err.Error(), "assignment to entry in nil map") {
		t.Fatalf("the panic value is missing from %q", res.Err)
	}
	// Logged, the error is its first line, and the stack an attribute of
	// its own.
	var rec struct{ Level, Msg, Err, Stack string }
	if err := json.Unmarshal(logged.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, logged.String())
	}
	if rec.Level != "ERROR" || rec.Msg != "event failed" || strings.Contains(rec.Err, "\n") || !strings.Contains(rec.Err, "assignment to entry in nil map") ||
		!strings.Contains(rec.Stack, "TestGate_a_projection_that_panics") || !strings.Contains(rec.Stack, "frames of the engine below)") {
		t.Fatalf("logged: level %s, msg %q, err %q, stack %.80q", rec.Level, rec.Msg, rec.Err, rec.Stack)
	}
}

func TestGate_a_creation_delivered_again_is_a_duplicate(t *testing.T) {
	s := newStore(t)
	e := newEngine(t, s, retry.Default())
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("c5"),
		cart.ShoppingCartOpened{ShoppingCartID: "c5", ClientID: "x", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "c5", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
	)
	deliveries := []struct {
		ev   projector.Event
		want projector.Outcome
	}{{evs[0], projector.Applied}, {evs[1], projector.Applied}, {evs[0], projector.Duplicate}}
	for i, d := range deliveries {
		if res := handle(t, e, d.ev)[0]; res.Outcome != d.want {
			t.Fatalf("delivery %d: %v, want %v (%v)", i, res.Outcome, d.want, res.Err)
		}
	}
	assertDocument(t, s, "c5", evs)
}

// An event that fails for a time (its predecessor has not come) is logged
// at Warn: it is tried again (a group delivers it again, a runner resumes
// at it), and only a failure for good is an error. Before, every such
// failure of a persistent group's consumers logged at Error.
func TestGate_a_failure_that_may_pass_logs_at_warn(t *testing.T) {
	s := newStore(t)
	var logged bytes.Buffer
	soon := patient()
	soon.MaxElapsed = 50 * time.Millisecond
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()}, projector.WithRetry(soon),
		projector.WithLogger(slog.New(slog.NewJSONHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("c5"),
		cart.ShoppingCartOpened{ShoppingCartID: "c5", ClientID: "x", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "c5", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
	)
	res := handle(t, e, evs[1])[0]
	var perr *projector.Error
	if res.Outcome != projector.Failed || !errors.As(res.Err, &perr) || !perr.Retryable() || !errors.Is(res.Err, projector.ErrPredecessorMissing) {
		t.Fatalf("result %+v", res)
	}
	var rec struct{ Level, Msg string }
	if err := json.Unmarshal(logged.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, logged.String())
	}
	if rec.Level != "WARN" || rec.Msg != "event failed" {
		t.Fatalf("logged: level %s, msg %q, want WARN \"event failed\"", rec.Level, rec.Msg)
	}
}
