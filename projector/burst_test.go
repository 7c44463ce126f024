package projector_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// pacedSource is a source that delivers its first catchUp events (1 when 0) at
// once, the last reaching the head, then the rest one every every, as
// live appends come, once ready (when set) says the runner is caught up.
// It records when each event went out, and how many have.
type pacedSource struct {
	events  []projector.Event
	catchUp int
	every   time.Duration
	ready   func() bool
	sent    atomic.Int64
	mu      sync.Mutex
	sentAt  map[string]time.Time
}

func (l *pacedSource) Subscribe(context.Context, *projector.Checkpoint) (projector.Subscription, error) {
	return &pacedSub{l: l}, nil
}

func (*pacedSource) Ordered() bool { return true }

type pacedSub struct {
	l    *pacedSource
	sent int
	next time.Time
}

func (s *pacedSub) Next(ctx context.Context) (projector.Delivery, error) {
	l, head := s.l, max(s.l.catchUp, 1)
	if s.sent == len(l.events) {
		<-ctx.Done()
		return projector.Delivery{}, ctx.Err()
	}
	for s.sent == head && l.ready != nil && !l.ready() {
		select {
		case <-ctx.Done():
			return projector.Delivery{}, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	switch {
	case s.sent == head:
		s.next = time.Now()
	case s.sent > head:
		s.next = s.next.Add(l.every)
		time.Sleep(time.Until(s.next))
	}
	ev := l.events[s.sent]
	s.sent++
	l.sent.Store(int64(s.sent))
	l.mu.Lock()
	if l.sentAt == nil {
		l.sentAt = map[string]time.Time{}
	}
	l.sentAt[ev.ID] = time.Now()
	l.mu.Unlock()
	return projector.Delivery{Event: &ev, Checkpoint: &projector.Checkpoint{Position: ev.Position}, CaughtUp: s.sent == head}, nil
}

func (*pacedSub) Close() error { return nil }

// burstCount counts a cart's events.
type burstCount struct {
	Events int `bson:"events"`
}

// burstCounts is a projection named name that counts each cart's events,
// calling hook on each first.
func burstCounts(name string, hook func(projector.Event)) *projector.Projection[burstCount] {
	p := projector.New[burstCount](name, projector.StreamSuffix(cart.StreamPrefix))
	count := func(c burstCount, ev projector.Event) (burstCount, error) {
		hook(ev)
		c.Events++
		return c, nil
	}
	projector.OnEvent(p, func(c burstCount, _ cart.ShoppingCartOpened, ev projector.Event) (burstCount, error) {
		return count(c, ev)
	})
	projector.OnEvent(p, func(c burstCount, _ cart.ProductItemAddedToShoppingCart, ev projector.Event) (burstCount, error) {
		return count(c, ev)
	})
	projector.OnEvent(p, func(c burstCount, _ cart.ShoppingCartConfirmed, ev projector.Event) (burstCount, error) {
		return count(c, ev)
	})
	return p
}

// At the head a worker handles events as they come. Once its next event
// has waited in its queue longer than the batch window (here the first
// event of a burst, one every 2 ms, took 300 ms to handle, and 150 or so
// queued behind it), it batches as while catching up, waiting for more for
// as long again as that event waited: the batch after the stall holds
// about twice the events that queued during it, rather than just those
// (then, the worker keeping up, events are written as they come again).
// Every document equals its fold.
func TestRunner_batches_a_burst_at_the_head(t *testing.T) {
	s := newStore(t)
	all, by := cartEvents(t, 167)
	src := &pacedSource{events: all, every: 2 * time.Millisecond}
	var slow sync.Once
	var queued int64 // events delivered while the slow one was handled
	p := burstCounts("burst_counts", func(ev projector.Event) {
		if ev.ID == all[1].ID {
			slow.Do(func() {
				time.Sleep(300 * time.Millisecond)
				queued = src.sent.Load() - 2
			})
		}
	})
	r, err := projector.NewRunner("burst", newEngine(t, s, patient(), p), src, s,
		projector.WithWorkers(1), projector.WithBatch(1000, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	src.ready = r.CaughtUp
	if err := runUntil(t, r, func(st projector.RunnerStats) bool { return st.Applied == uint64(len(all)) }); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	t.Logf("%d events at the head, %d of them queued during the stall: %d batches of %d events, and %d alone",
		len(all)-1, queued, st.Batches, st.Batched, st.Applied-st.Batched-1)
	if queued < 20 || len(all)-2-int(queued) < int(queued) {
		t.Fatalf("%d events of %d queued during the stall: the burst did not outlast it twice", queued, len(all)-1)
	}
	if want := queued * 3 / 2; int64(st.Batched) < want {
		t.Errorf("%d events queued during the stall, and %d were written in batches, want at least %d (a wait as long as the stall)", queued, st.Batched, want)
	}
	for id, evs := range by {
		if err := projectortest.CheckDocument(context.Background(), s, p, id, evs); err != nil {
			t.Error(err)
		}
	}
}

// eventCost is each event's cost in its fold.
var eventCost = 500 * time.Microsecond

// A runner that reaches the head with a queue behind it, while appends
// go on at a rate one worker writes event by event with room to spare,
// should report CaughtUp soon (app: /ready, a rebuild's swap wait for it).
func TestRunner_is_caught_up_soon_under_steady_live_traffic(t *testing.T) {
	s := newStore(t)
	all, _ := cartEvents(t, 500) // 1,500 events: 300 to catch up on, then one every 4 ms (4.8 s)
	src := &pacedSource{events: all, catchUp: 300, every: 4 * time.Millisecond}
	p := burstCounts("ready_counts", func(projector.Event) {
		time.Sleep(eventCost)
	})
	r, err := projector.NewRunner("ready", newEngine(t, s, patient(), p), src, s, projector.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	start := time.Now()
	var ready time.Duration
	for time.Since(start) < 4*time.Second { // live appends go on until ~4.8 s
		if r.CaughtUp() {
			ready = time.Since(start)
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	st := r.Stats()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("ready after %v; applied %d, batches %d of %d events", ready, st.Applied, st.Batches, st.Batched)
	if ready == 0 {
		t.Errorf("not CaughtUp after 4 s of steady live traffic (applied %d of %d delivered so far)", st.Applied, st.Events)
	}
}

// A stop while a worker holds a head batch (window 1 s: hold 10 s) returns
// at once: the drain closes the queue, and fill ends on it.
func TestRunner_stops_at_once_while_a_worker_waits_for_a_batch_at_the_head(t *testing.T) {
	s := newStore(t)
	all, _ := cartEvents(t, 200)
	src := &pacedSource{events: all, every: 50 * time.Millisecond}
	var slow sync.Once
	p := burstCounts("stop_counts", func(ev projector.Event) {
		if ev.ID == all[1].ID {
			slow.Do(func() { time.Sleep(1200 * time.Millisecond) })
		}
	})
	r, err := projector.NewRunner("stop", newEngine(t, s, patient(), p), src, s, projector.WithWorkers(1), projector.WithBatch(1000, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	src.ready = r.CaughtUp
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	time.Sleep(3 * time.Second) // the slow event ends at ~1.2 s; the hold from then lasts up to 10 s
	before := r.Stats()
	t0 := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	t.Logf("stop took %v; before: applied %d; after: applied %d abandoned %d batches %d checkpoint %v", time.Since(t0), before.Applied, st.Applied, st.Abandoned, st.Batches, st.Checkpoint)
	if time.Since(t0) > 2*time.Second {
		t.Errorf("stop took %v", time.Since(t0))
	}
}
