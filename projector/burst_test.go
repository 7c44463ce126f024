package projector_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// paced is a source at its head after its first event, that then delivers
// the rest as a burst of appends would come, one every 2 ms, once ready
// says the runner is caught up.
type paced struct {
	events []projector.Event
	ready  func() bool
}

func (p *paced) Subscribe(context.Context, *projector.Checkpoint) (projector.Subscription, error) {
	return &pacedSub{p: p}, nil
}

func (*paced) Ordered() bool { return true }

type pacedSub struct {
	p    *paced
	sent int
}

func (s *pacedSub) Next(ctx context.Context) (projector.Delivery, error) {
	if s.sent == len(s.p.events) {
		<-ctx.Done()
		return projector.Delivery{}, ctx.Err()
	}
	for s.sent == 1 && !s.p.ready() {
		select {
		case <-ctx.Done():
			return projector.Delivery{}, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	if s.sent > 1 {
		time.Sleep(2 * time.Millisecond)
	}
	ev := s.p.events[s.sent]
	s.sent++
	return projector.Delivery{Event: &ev, Checkpoint: &projector.Checkpoint{Position: ev.Position}, CaughtUp: s.sent == 1}, nil
}

func (*pacedSub) Close() error { return nil }

// burstCount counts a cart's events.
type burstCount struct {
	Events int `bson:"events"`
}

// At the head a worker handles events as they come; once its next event
// has waited in its queue longer than the batch window (here 200 ms: the
// first event of a burst of 500, one every 2 ms, took 300 ms to handle),
// it batches again, as while catching up: the burst is written in a few
// batches, and every document equals its fold. Before, a caught-up runner
// never waited: after the slow event it wrote what had queued, then each
// next event or two on its own, and a projector at the head drained a
// burst of appends several times slower than it caught up on them.
func TestRunner_batches_a_burst_at_the_head(t *testing.T) {
	s := newStore(t)
	all, by := cartEvents(t, 167)
	var slow sync.Once
	p := projector.New[burstCount]("burst_counts", projector.StreamSuffix(cart.StreamPrefix))
	count := func(c burstCount, _ any, ev projector.Event) (burstCount, error) {
		if ev.ID == all[1].ID {
			slow.Do(func() { time.Sleep(300 * time.Millisecond) })
		}
		c.Events++
		return c, nil
	}
	projector.OnEvent(p, func(c burstCount, e cart.ShoppingCartOpened, ev projector.Event) (burstCount, error) {
		return count(c, e, ev)
	})
	projector.OnEvent(p, func(c burstCount, e cart.ProductItemAddedToShoppingCart, ev projector.Event) (burstCount, error) {
		return count(c, e, ev)
	})
	projector.OnEvent(p, func(c burstCount, e cart.ShoppingCartConfirmed, ev projector.Event) (burstCount, error) {
		return count(c, e, ev)
	})
	src := &paced{events: all}
	r, err := projector.NewRunner("burst", newEngine(t, s, patient(), p), src, s,
		projector.WithWorkers(1), projector.WithBatch(1000, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	src.ready = r.CaughtUp
	if err := runUntil(t, r, func(st projector.RunnerStats) bool { return st.Applied == uint64(len(all)) }); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	alone := st.Applied - st.Batched
	t.Logf("%d events at the head: %d batches of %d events, and %d alone", len(all)-1, st.Batches, st.Batched, alone-1)
	if st.Batches+alone > 10 {
		t.Errorf("a burst of %d events at the head took %d batches and %d events alone, want at most 10 writes in all", len(all)-1, st.Batches, alone-1)
	}
	for id, evs := range by {
		if err := projectortest.CheckDocument(context.Background(), s, p, id, evs); err != nil {
			t.Error(err)
		}
	}
}
