package projector_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// scripted is a source over a fixed list of events, ordered by position: a
// subscription delivers those after from, then waits. failures makes that
// many Subscribe calls fail first; dropAfter ends each subscription after
// that many deliveries (0: never).
type scripted struct {
	mu        sync.Mutex
	events    []projector.Event
	failures  int
	dropAfter int
	opened    int
}

func (s *scripted) Subscribe(ctx context.Context, from *projector.Checkpoint) (projector.Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures > 0 {
		s.failures--
		return nil, errors.New("server unreachable")
	}
	s.opened++
	var rest []projector.Event
	for _, ev := range s.events {
		if from == nil || ev.Position > from.Position {
			rest = append(rest, ev)
		}
	}
	return &scriptedSub{events: rest, dropAfter: s.dropAfter}, nil
}

type scriptedSub struct {
	events    []projector.Event
	sent      int
	dropAfter int
}

func (s *scriptedSub) Next(ctx context.Context) (projector.Delivery, error) {
	if s.dropAfter > 0 && s.sent == s.dropAfter {
		return projector.Delivery{}, errors.New("dropped")
	}
	if s.sent == len(s.events) {
		<-ctx.Done()
		return projector.Delivery{}, ctx.Err()
	}
	ev := s.events[s.sent]
	s.sent++
	return projector.Delivery{Event: &ev, Checkpoint: &projector.Checkpoint{Position: ev.Position}, CaughtUp: s.sent == len(s.events)}, nil
}

func (s *scriptedSub) Close() error { return nil }

// Ordered: a scripted log goes to one consumer in its order.
func (*scripted) Ordered() bool { return true }

// cartEvents appends carts lives to a log and returns them in log order, and by cart.
func cartEvents(t *testing.T, carts int, extra ...any) ([]projector.Event, map[string][]projector.Event) {
	t.Helper()
	log := projectortest.NewLog(cart.Registry())
	var all []projector.Event
	by := map[string][]projector.Event{}
	for i := range carts {
		id := "r" + string(rune('a'+i))
		evs := log.MustAppend(t, cart.StreamID(id),
			cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "x", OpenedAt: t0},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 2}},
			cart.ShoppingCartConfirmed{ShoppingCartID: id, ConfirmedAt: t0},
		)
		all = append(all, evs...)
		by[id] = evs
	}
	return all, by
}

func fastReconnect() retry.Policy {
	p := projector.DefaultReconnect()
	p.InitialDelay, p.MaxDelay, p.MaxElapsed = time.Millisecond, 5*time.Millisecond, 10*time.Second
	return p
}

// runUntil runs r until cond holds, then cancels it and returns Run's error.
// runInBackground runs r until the test ends.
func runInBackground(t *testing.T, r *projector.Runner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func runUntil(t *testing.T, r *projector.Runner, cond func(projector.RunnerStats) bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for !cond(r.Stats()) {
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Millisecond):
		}
		if ctx.Err() != nil {
			t.Fatalf("condition not reached: %+v", r.Stats())
		}
	}
	cancel()
	return <-done
}

func TestRunner_reconnects_and_resumes_from_its_checkpoint(t *testing.T) {
	s := newStore(t)
	all, by := cartEvents(t, 6)
	src := &scripted{events: all, failures: 3, dropAfter: 5}
	e := newEngine(t, s, retry.Default())
	r, err := projector.NewRunner("r1", e, src, s, projector.WithReconnect(fastReconnect()), projector.WithCheckpointEvery(2, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1].Position
	// Checkpoints are stored every 2 events (the interval is an hour): the
	// last event's may wait for the stop, which stores it.
	err = runUntil(t, r, func(st projector.RunnerStats) bool { return st.Applied == uint64(len(all)) && st.CaughtUp })
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	if st.Applied != uint64(len(all)) || st.Failed != 0 || st.Drops == 0 || st.Subscriptions != st.Drops+1 {
		t.Fatalf("stats %+v", st)
	}
	if st.Duplicates != st.Events-st.Applied-st.Abandoned {
		t.Fatalf("duplicates %d, want events - applied - abandoned = %d", st.Duplicates, st.Events-st.Applied-st.Abandoned)
	}
	for id, evs := range by {
		assertDocument(t, s, id, evs)
	}
	cp, err := s.LoadCheckpoint(context.Background(), "r1")
	if err != nil || cp == nil || cp.Position != last {
		t.Fatalf("stored checkpoint %v %v, want %d", cp, err, last)
	}
}

func TestRunner_stops_at_an_event_that_fails_under_Block_and_checkpoints_before_it(t *testing.T) {
	s := newStore(t)
	log := projectortest.NewLog(cart.Registry())
	good := log.MustAppend(t, cart.StreamID("rz"), cart.ShoppingCartOpened{ShoppingCartID: "rz", ClientID: "x", OpenedAt: t0})
	bad := log.MustAppend(t, cart.StreamID("rz"), projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": 12`)})[0]
	after := log.MustAppend(t, cart.StreamID("ry"), cart.ShoppingCartOpened{ShoppingCartID: "ry", ClientID: "x", OpenedAt: t0})
	src := &scripted{events: append(append(good, bad), after...)}
	r, err := projector.NewRunner("r2", newEngine(t, s, retry.Default()), src, s, projector.WithReconnect(fastReconnect()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.Run(ctx)
	if !errors.Is(err, projector.ErrUndecodable) || !strings.Contains(err.Error(), `runner "r2" stops`) || !strings.Contains(err.Error(), "revision 1") {
		t.Fatalf("Run: %v", err)
	}
	cp, _ := s.LoadCheckpoint(context.Background(), "r2")
	if cp == nil || cp.Position != good[0].Position {
		t.Fatalf("checkpoint %v, want %d (before the failed event)", cp, good[0].Position)
	}
	all, err := s.Checkpoints(context.Background())
	if st := all["r2"]; err != nil || !strings.Contains(st.LastError, "does not decode") || st.LastErrorAt.IsZero() {
		t.Fatalf("recorded error %+v (%v)", st, err)
	}
}

type typeFiltered struct{ scripted }

func (*typeFiltered) FiltersEventTypes() bool { return true }

func TestNewRunner_refuses_a_source_that_filters_by_event_type(t *testing.T) {
	s := newStore(t)
	_, err := projector.NewRunner("r3", newEngine(t, s, retry.Default()), &typeFiltered{}, s)
	if err == nil || !strings.Contains(err.Error(), "filter by stream name") {
		t.Fatalf("err %v", err)
	}
}

func TestNewRunner_refuses_bad_settings(t *testing.T) {
	s := newStore(t)
	e := newEngine(t, s, retry.Default())
	for name, opt := range map[string]projector.RunnerOption{
		"workers":    projector.WithWorkers(0),
		"checkpoint": projector.WithCheckpointEvery(0, time.Second),
		"reconnect":  projector.WithReconnect(retry.Policy{}),
		// Past what a process can hold: its workers' queues would take its
		// memory (an operator's typo crashed it).
		"100,000,000 workers":    projector.WithWorkers(100_000_000),
		"a buffer of 2^30":       projector.WithBuffer(1 << 30),
		"a batch of 10^11":       projector.WithBatch(100_000_000_000, time.Millisecond),
		"a batch of 100,000 MiB": projector.WithBatchBytes(100_000 << 20),
	} {
		if _, err := projector.NewRunner("r4", e, &scripted{}, s, opt); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := projector.NewRunner("", e, &scripted{}, s); err == nil {
		t.Error("no name: no error")
	}
}

// live is a source whose subscription delivers what the test sends it.
type live struct{ ch chan projector.Delivery }

func (l *live) Subscribe(context.Context, *projector.Checkpoint) (projector.Subscription, error) {
	return liveSub{l.ch}, nil
}

type liveSub struct{ ch chan projector.Delivery }

func (s liveSub) Next(ctx context.Context) (projector.Delivery, error) {
	select {
	case d := <-s.ch:
		return d, nil
	case <-ctx.Done():
		return projector.Delivery{}, ctx.Err()
	}
}

func (liveSub) Close() error { return nil }

// stalling holds updates while stall is set: a store that stopped answering.
type stalling struct {
	driver.Store
	stall   atomic.Bool
	release chan struct{}
}

func (s *stalling) Update(ctx context.Context, coll, id string, from uint64, head driver.Head, state any) (bool, error) {
	if s.stall.Load() {
		select {
		case <-s.release:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return s.Store.Update(ctx, coll, id, from, head, state)
}

// A runner at the head whose event is stuck longer than the gate's policy
// can wait is not caught up while it is (readiness says so), and is again
// once the event is through.
func TestRunner_an_event_stuck_longer_than_the_policy_can_wait_is_not_caught_up(t *testing.T) {
	base := newStore(t)
	store := &stalling{Store: base, release: make(chan struct{})}
	p := retry.Default()
	p.InitialDelay, p.MaxRetries = 10*time.Millisecond, 0
	e := newEngine(t, store, p)
	src := &live{ch: make(chan projector.Delivery)}
	r, err := projector.NewRunner("stuck", e, src, nil, projector.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("s"), cart.ShoppingCartOpened{ShoppingCartID: "s", ClientID: "x", OpenedAt: t0},
		cart.ShoppingCartConfirmed{ShoppingCartID: "s", ConfirmedAt: t0})
	runInBackground(t, r)
	src.ch <- projector.Delivery{Event: &evs[0], CaughtUp: true}
	waitFor(t, "caught up", r.CaughtUp)
	store.stall.Store(true)
	src.ch <- projector.Delivery{Event: &evs[1]}
	waitFor(t, "not caught up while the event is stuck", func() bool { return !r.CaughtUp() })
	close(store.release)
	waitFor(t, "caught up again", r.CaughtUp)
	assertDocument(t, base, "s", evs)
}

// A runner asked to stop does not wait out the gate's policy for a
// predecessor that may never come (the policy here would wait an hour, and
// so would the drain): the waiting event is left for the next run, as the
// events still queued are. It is not settled (a persistent group sends it
// again), not checkpointed, and no failure: no error is recorded.
func TestRunner_stopping_ends_a_wait_for_a_predecessor_and_leaves_the_event_for_the_next_run(t *testing.T) {
	for _, settles := range []bool{false, true} {
		name := map[bool]string{false: "checkpointed", true: "settled by its source"}[settles]
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			// Waits of an hour: a wait ends with the stop, or the test
			// times out.
			p := patient()
			p.InitialDelay, p.MaxDelay, p.MaxElapsed = time.Hour, time.Hour, 10*time.Hour
			var waiting atomic.Bool
			p.OnRetry = func(retry.Attempt) { waiting.Store(true) }
			e := newEngine(t, store, p)
			src := &live{ch: make(chan projector.Delivery)}
			var checkpoints projector.CheckpointStore
			if !settles {
				checkpoints = store
			}
			r, err := projector.NewRunner("stopping", e, src, checkpoints, projector.WithWorkers(1),
				projector.WithDrainTimeout(time.Hour), projector.WithCheckpointEvery(1, time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			log := projectortest.NewLog(cart.Registry())
			evs := log.MustAppend(t, cart.StreamID("w"), cart.ShoppingCartOpened{ShoppingCartID: "w", ClientID: "x", OpenedAt: t0},
				cart.ProductItemAddedToShoppingCart{ShoppingCartID: "w", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
				cart.ShoppingCartConfirmed{ShoppingCartID: "w", ConfirmedAt: t0})
			var settled sync.Map // revision -> outcomes
			deliver := func(ev projector.Event) projector.Delivery {
				d := projector.Delivery{Event: &ev, Checkpoint: &projector.Checkpoint{Position: ev.Position}, CaughtUp: true}
				if settles {
					d.Checkpoint = nil
					d.Settle = func(rs []projector.Result) error {
						settled.Store(ev.StreamRevision, rs)
						return nil
					}
				}
				return d
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			src.ch <- deliver(evs[0])
			waitFor(t, "the first event applied", func() bool { return r.Stats().Applied == 1 })
			src.ch <- deliver(evs[2]) // its predecessor never comes
			waitFor(t, "a wait for the predecessor", waiting.Load)
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the runner waited for the predecessor after it was asked to stop")
			}
			if err != nil {
				t.Fatalf("Run: %v, want nil: the waiting event is no failure", err)
			}
			st := r.Stats()
			if st.Abandoned != 1 || st.Failed != 0 || st.Applied != 1 {
				t.Fatalf("abandoned %d, failed %d, applied %d: want 1, 0, 1", st.Abandoned, st.Failed, st.Applied)
			}
			assertDocument(t, store, "w", evs[:1])
			if settles {
				if _, ok := settled.Load(uint64(2)); ok {
					t.Fatal("the waiting event was settled: its source would not send it again")
				}
				if _, ok := settled.Load(uint64(0)); !ok {
					t.Fatal("the applied event was not settled")
				}
				return
			}
			all, err := store.Checkpoints(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := all["stopping"]
			if got.Checkpoint == nil || got.Checkpoint.Position != evs[0].Position || got.LastError != "" {
				t.Fatalf("checkpoint %+v, error %q: want the first event's position %d and no error", got.Checkpoint, got.LastError, evs[0].Position)
			}
		})
	}
}

// Runners that share an engine (the consumers of a group, in one process)
// share its queue of each document's events: when one stops, its stopped
// wait does not end the wait of another runner's event queued behind it,
// which goes on and applies once its predecessors come.
func TestRunner_a_stopped_wait_does_not_end_a_wait_of_another_runner_on_the_same_engine(t *testing.T) {
	store := newStore(t)
	p := patient()
	p.InitialDelay, p.MaxDelay, p.MaxElapsed = 5*time.Millisecond, 20*time.Millisecond, 10*time.Hour
	var waits atomic.Int64
	p.OnRetry = func(retry.Attempt) { waits.Add(1) }
	e := newEngine(t, store, p)
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("q"), cart.ShoppingCartOpened{ShoppingCartID: "q", ClientID: "x", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "q", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "q", ProductItem: cart.ProductItem{ProductID: "r", Quantity: 2}},
		cart.ShoppingCartConfirmed{ShoppingCartID: "q", ConfirmedAt: t0})
	var settledB sync.Map // revision -> outcome, in B
	deliver := func(ev projector.Event, settled *sync.Map) projector.Delivery {
		return projector.Delivery{Event: &ev, CaughtUp: true, Settle: func(rs []projector.Result) error {
			if settled != nil {
				settled.Store(ev.StreamRevision, rs[0].Outcome)
			}
			return nil
		}}
	}
	start := func(name string, src *live) (*projector.Runner, context.CancelFunc, chan error) {
		r, err := projector.NewRunner(name, e, src, nil, projector.WithWorkers(1), projector.WithDrainTimeout(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		return r, cancel, done
	}
	srcA, srcB := &live{ch: make(chan projector.Delivery)}, &live{ch: make(chan projector.Delivery)}
	a, stopA, doneA := start("a", srcA)
	b, stopB, doneB := start("b", srcB)
	defer func() { stopB(); <-doneB }()
	srcA.ch <- deliver(evs[0], nil)
	waitFor(t, "the creation applied", func() bool { return a.Stats().Applied == 1 })
	srcA.ch <- deliver(evs[2], nil) // waits for revision 1
	waitFor(t, "A's wait", func() bool { return waits.Load() > 0 })
	srcB.ch <- deliver(evs[3], &settledB) // queued behind A's revision 2
	waitFor(t, "B's event in flight", func() bool { return b.Stats().Events == 1 })
	stopA()
	select {
	case err := <-doneA:
		if err != nil {
			t.Fatalf("A: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("A did not stop")
	}
	if st := a.Stats(); st.Abandoned != 1 {
		t.Fatalf("A abandoned %d events, want its waiting one", st.Abandoned)
	}
	// B's event is still waiting: none of it is settled or abandoned.
	time.Sleep(100 * time.Millisecond)
	if st := b.Stats(); st.Abandoned != 0 {
		t.Fatalf("B abandoned %d events when A stopped", st.Abandoned)
	}
	if _, ok := settledB.Load(uint64(3)); ok {
		t.Fatal("B settled its event before its predecessors came")
	}
	// The predecessors come to another consumer, A's successor.
	srcC := &live{ch: make(chan projector.Delivery)}
	_, stopC, doneC := start("c", srcC)
	defer func() { stopC(); <-doneC }()
	srcC.ch <- deliver(evs[1], nil)
	srcC.ch <- deliver(evs[2], nil)
	waitFor(t, "B's event settled", func() bool { _, ok := settledB.Load(uint64(3)); return ok })
	if outcome, _ := settledB.Load(uint64(3)); outcome != projector.Applied {
		t.Fatalf("B's event: %v, want applied", outcome)
	}
	assertDocument(t, store, "q", evs)
}

// Two events that fail for good at once, in two workers: the run's error
// (and the error it records) names both, not only the first, so that the
// fix of one does not meet the other on the next run.
func TestRunner_stopping_at_a_failed_event_names_the_others_that_failed_as_it_stopped(t *testing.T) {
	s := newStore(t)
	var entered atomic.Int32
	both := make(chan struct{})
	p := projector.New[counts]("two_bad", projector.StreamSuffix(cart.StreamPrefix))
	projector.Create(p, func(cart.ShoppingCartOpened) (counts, error) { return counts{N: map[string]int{}}, nil })
	projector.On(p, func(c counts, e cart.ProductItemAddedToShoppingCart) (counts, error) {
		// The first failing event of each worker waits for the other's:
		// both are being handled when the first fails.
		if entered.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(10 * time.Second):
		}
		return c, errors.New("bad item " + e.ShoppingCartID)
	})
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(retry.Default()))
	if err != nil {
		t.Fatal(err)
	}
	// Streams that the runner's two workers share out by a hash of their
	// names with a seed of the runner's own: with 64 of them, the chance
	// that one worker has none is 2^-63 (with 8 it was 1 in 128, and then
	// the one failing event waited for another that never came).
	log := projectortest.NewLog(cart.Registry())
	var all []projector.Event
	for i := range 64 {
		id := fmt.Sprintf("w%02d", i)
		all = append(all, log.MustAppend(t, cart.StreamID(id), cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "x", OpenedAt: t0},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})...)
	}
	r, err := projector.NewRunner("r_two", e, &scripted{events: all}, s, projector.WithWorkers(2), projector.WithBatch(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.Run(ctx)
	if err == nil || strings.Count(err.Error(), "bad item ") != 2 || !strings.Contains(err.Error(), "and, as it stopped, ") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run: %v, want both failures named on one line", err)
	}
	var fe *projector.Error
	if !errors.As(err, &fe) {
		t.Fatalf("Run: %v, want the first failure's *projector.Error", err)
	}
	st, _ := s.Checkpoints(context.Background())
	if rec := st["r_two"].LastError; strings.Count(rec, "bad item ") != 2 {
		t.Fatalf("recorded error %q, want both failures", rec)
	}
}

// A persistent group hands a stream's events out of order (a redelivery, a
// retry): an event delivered before its predecessor waits for it, and the
// predecessor, delivered next, is not held behind that wait. With one worker
// and a wait of up to an hour, both apply at once.
func TestRunner_a_settled_event_waiting_for_its_predecessor_does_not_hold_it_back(t *testing.T) {
	store := newStore(t)
	p := patient()
	p.InitialDelay, p.MaxDelay, p.MaxElapsed = 5*time.Millisecond, 50*time.Millisecond, time.Hour
	var waits atomic.Int64
	p.OnRetry = func(retry.Attempt) { waits.Add(1) }
	e := newEngine(t, store, p)
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("o"), cart.ShoppingCartOpened{ShoppingCartID: "o", ClientID: "x", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "o", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})
	var settled sync.Map // revision -> outcome
	deliver := func(ev projector.Event) projector.Delivery {
		return projector.Delivery{Event: &ev, Settle: func(rs []projector.Result) error {
			settled.Store(ev.StreamRevision, rs[0].Outcome)
			return nil
		}}
	}
	src := &live{ch: make(chan projector.Delivery)}
	r, err := projector.NewRunner("apart", e, src, nil, projector.WithWorkers(1), projector.WithDrainTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, r)
	src.ch <- deliver(evs[1]) // before its predecessor: waits
	waitFor(t, "the event waiting for its predecessor", func() bool { return waits.Load() > 0 })
	src.ch <- deliver(evs[0])
	waitFor(t, "both events settled", func() bool {
		_, first := settled.Load(uint64(0))
		_, second := settled.Load(uint64(1))
		return first && second
	})
	for rev := range uint64(2) {
		if o, _ := settled.Load(rev); o != projector.Applied {
			t.Errorf("revision %d: %v, want applied", rev, o)
		}
	}
	assertDocument(t, store, "o", evs)
}
