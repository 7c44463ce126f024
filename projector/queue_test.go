package projector_test

import (
	"context"
	"errors"
	"math/rand/v2"
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

// countingLoads counts reads and holds the first one until released.
type countingLoads struct {
	driver.Store
	loads   atomic.Int64
	holding chan struct{} // closed when the first read is held
	release chan struct{}
	once    sync.Once
}

func (c *countingLoads) Load(ctx context.Context, coll, id string, min uint64, state any) (driver.Head, bool, error) {
	if c.loads.Add(1) == 1 {
		c.once.Do(func() { close(c.holding) })
		<-c.release
	}
	return c.Store.Load(ctx, coll, id, min, state)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGate_events_queued_behind_a_missing_predecessor_wait_once_and_fail_together(t *testing.T) {
	base := newStore(t)
	setup := newEngine(t, base, retry.Default())
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("q"), cart.RandomLife(rand.New(rand.NewPCG(9, 9)), "q", "client", 7, t0)...)
	handle(t, setup, evs[0])
	handle(t, setup, evs[1])
	// Revision 2 never arrives; 3 waits for it in the store, 4..6 queue behind 3.

	p := retry.Default()
	p.InitialDelay, p.Jitter, p.MaxRetries = 50*time.Millisecond, 0, 3
	store := &countingLoads{Store: base, holding: make(chan struct{}), release: make(chan struct{})}
	e := newEngine(t, store, p)

	results := make([]projector.Result, 7)
	var wg sync.WaitGroup
	start := func(rev int) {
		wg.Go(func() {
			rs, _ := e.Handle(t.Context(), evs[rev])
			results[rev] = rs[0]
		})
	}
	start(3)
	<-store.holding
	for rev := 4; rev <= 6; rev++ {
		start(rev)
	}
	waitFor(t, "4 events in flight", func() bool { return projector.InFlight(e) == 4 })
	began := time.Now()
	close(store.release)
	wg.Wait()
	took := time.Since(began)

	if r := results[3]; r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrPredecessorMissing) || r.Waits != p.MaxRetries {
		t.Fatalf("revision 3: %+v", r)
	}
	for rev := 4; rev <= 6; rev++ {
		r := results[rev]
		var perr *projector.Error
		if r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrPredecessorFailed) || r.Waits != 0 || !errors.As(r.Err, &perr) || perr.Revision != uint64(rev) {
			t.Fatalf("revision %d: %+v", rev, r)
		}
		if !perr.Retryable() {
			t.Fatalf("revision %d: a missing predecessor may still arrive; the failure should be retryable", rev)
		}
		// Each names the event that failed first, once: not each one in
		// between (a message that grew with every event behind it).
		if msg := r.Err.Error(); strings.Count(msg, "of this document failed") != 1 || !strings.Contains(msg, "event at revision 3 of this document failed") {
			t.Errorf("revision %d: %s\nwant it to name revision 3's failure, once", rev, msg)
		}
	}
	// Revision 3 read the store once per attempt and once more for the error
	// message; the queued events did not read it at all.
	if got, want := store.loads.Load(), int64(p.MaxRetries+2); got != want {
		t.Fatalf("%d reads, want %d", got, want)
	}
	// One retry budget in all, not one per queued event.
	if took > 2*p.MaxWait()+5*time.Second {
		t.Fatalf("took %v, the policy waits at most %v", took, p.MaxWait())
	}
	if projector.InFlight(e) != 0 {
		t.Fatalf("%d events still in flight", projector.InFlight(e))
	}
}
