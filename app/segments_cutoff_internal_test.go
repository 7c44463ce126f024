package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// headOnly is an event store of which this test reads only the head, and
// which answers or not.
type headOnly struct {
	eventStore
	answers atomic.Bool
}

func (h *headOnly) Head(ctx context.Context) (uint64, error) {
	if !h.answers.Load() {
		return 0, errors.New("context deadline exceeded")
	}
	return 1, nil
}

// A process whose run cannot read the event store (its runner is not
// connected, as when the event store is cut off from this process alone,
// MongoDB still answering) for two lease periods hands its segments over:
// it lets their leases go and counts itself out of the processes, so that
// the others take them, instead of renewing them while they wait; it says
// it is retrying. Once the event store answers it again, it takes its
// share again.
func TestSegments_a_process_cut_off_from_the_event_store_hands_its_segments_over(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	for name, src := range map[string]projector.Source{"its runner never connected": noSource{}, "its runner connected, nothing delivered": silentSource{}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cutOffHandsOver(t, src)
		})
	}
}

// silentSource subscribes at once, and delivers nothing: a subscription
// whose connection hangs (the network drops its packets without closing
// it) stays connected.
type silentSource struct{ projector.Source }

func (silentSource) Subscribe(context.Context, *projector.Checkpoint) (projector.Subscription, error) {
	return silent{}, nil
}

type silent struct{}

func (silent) Next(ctx context.Context) (projector.Delivery, error) {
	<-ctx.Done()
	return projector.Delivery{}, ctx.Err()
}

func (silent) Close() error { return nil }

func cutOffHandsOver(t *testing.T, src projector.Source) {
	const lease = time.Second
	es := &headOnly{}
	store := mongostore.New(mongotest.Database(t))
	sl, runs, held, log := sharedBy(t, store, es, src, lease)
	waitUntil(t, "A runs both segments", func() bool { return runs.Load() > 0 && held() == 2 })
	began := time.Now()
	waitUntil(t, "A lets the segments go", func() bool { return held() == 0 })
	if took := time.Since(began); took < 2*lease {
		t.Errorf("A let its segments go %v after its run began, before two lease periods unconnected", took)
	}
	if d := sl.Down(); !strings.Contains(d, "cannot read the event store") {
		t.Errorf("cut off: down %q; want retrying, saying why, by the time its leases are let go", d)
	}
	waitUntil(t, "A counts itself out", func() bool {
		live, err := segment.Live(context.Background(), store.Database(), "p")
		return err == nil && len(live) == 0 && !sl.Leader()
	})
	time.Sleep(2 * lease)
	if n := held(); n != 0 {
		t.Errorf("A took %d segments again while the event store does not answer it", n)
	}
	es.answers.Store(true)
	waitUntil(t, "A takes its share again", func() bool { return held() == 2 })
	if !strings.Contains(log.String(), "reads the event store again") {
		t.Errorf("A does not say it reads the event store again:\n%s", log.String())
	}
}

// slowHead answers the head after delay.
type slowHead struct {
	eventStore
	delay time.Duration
}

func (h *slowHead) Head(ctx context.Context) (uint64, error) {
	select {
	case <-time.After(h.delay):
		return 1, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// A healthy, quiet process (connected, nothing to deliver) keeps its
// segments, also while the event store is slow to give the head of $all
// (half a lease): slow is not cut off. (Leases of 2s: 1s ones went
// unrenewed on a loaded machine.)
func TestSegments_a_quiet_connected_process_keeps_its_segments(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	for _, delay := range []time.Duration{0, time.Second} {
		t.Run(delay.String(), func(t *testing.T) {
			t.Parallel()
			const lease = 2 * time.Second
			sl, runs, held, log := sharedBy(t, mongostore.New(mongotest.Database(t)), &slowHead{delay: delay}, silentSource{}, lease)
			waitUntil(t, "A runs both segments", func() bool { return runs.Load() > 0 && held() == 2 })
			deadline := time.Now().Add(6 * lease)
			for time.Now().Before(deadline) {
				if held() != 2 {
					t.Errorf("head delay %v: A let its segments go while connected and quiet; down %q", delay, sl.Down())
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if t.Failed() {
				t.Logf("runs %d; log:\n%s", runs.Load(), log.String())
			}
		})
	}
}

// sharedBy starts process A sharing the 2 segments of projection p in
// store with leases of lease, reading the event store through client, its
// runs over a runner on src; it returns A's slot, how many runs it began,
// how many segments' leases it holds now, and its log. A stops with the
// test.
func sharedBy(t *testing.T, store *mongostore.Store, client eventStore, src projector.Source, lease time.Duration) (sl *slot, runs *atomic.Int32, held func() int, log *lockedBuf) {
	eng, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()})
	if err != nil {
		t.Fatal(err)
	}
	log = &lockedBuf{}
	s := &session{c: &runConfig{lease: lease, segments: 2}, store: store, holder: "A", client: client, logger: slog.New(slog.NewTextHandler(log, nil))}
	sl, runs = &slot{name: "p", segments: s.c.segments}, &atomic.Int32{}
	work := segmentWork{group: "p", run: func(ctx context.Context, _ func() *segmentCheckpoints) error {
		r, err := projector.NewRunner("p", eng, src, nil)
		if err != nil {
			return err
		}
		sl.cur.Store(r)
		runs.Add(1)
		if _, ok := src.(silentSource); ok {
			return r.Run(ctx)
		}
		<-ctx.Done() // never subscribed: never connected
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { _ = s.shareSegments(ctx, sl, work) })
	held = func() int {
		leases, err := store.Leases(context.Background(), "p")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for k := range 2 {
			if l := leases[segment.LeaseName("p", k, 2)]; l.Held(time.Now()) && l.Holder == "A" {
				n++
			}
		}
		return n
	}
	return sl, runs, held, log
}
