package projector_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/projector"
)

// hungCheckpoints is a checkpoint store on a MongoDB that stopped
// answering: every store waits until its context ends.
type hungCheckpoints struct {
	projector.CheckpointStore
	began atomic.Int64
}

func (h *hungCheckpoints) SaveCheckpoint(ctx context.Context, _ string, _ projector.Checkpoint) error {
	h.began.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// A runner stopped while its checkpoint store does not answer (one store
// under way when it stops, the last one after it) spends the store's
// timeout (10 s) in all on them, not that of each, so that a stop ends
// within the drain timeout and it (docs/running.md); and it says that the
// checkpoint was not stored.
func TestRunner_stopped_on_a_store_that_does_not_answer_spends_one_store_timeout_on_its_stores(t *testing.T) {
	t.Parallel() // mostly waiting
	s := newStore(t)
	all, _ := cartEvents(t, 20)
	src := &pacedSource{events: all, every: time.Millisecond}
	cps := &hungCheckpoints{CheckpointStore: s}
	r, err := projector.NewRunner("hung", newEngine(t, s, patient()), src, cps, projector.WithCheckpointEvery(1, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	src.ready = r.CaughtUp
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for deadline := time.Now().Add(time.Minute); cps.began.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint store began in a minute")
		}
	}
	time.Sleep(time.Second) // the saver's store is under way, and waits
	t0 := time.Now()
	cancel()
	err = <-done
	took := time.Since(t0)
	t.Logf("stop took %v; %d stores began; %v", took, cps.began.Load(), err)
	if err == nil || !strings.Contains(err.Error(), "storing the checkpoint") {
		t.Errorf("Run: %v, want it to say the checkpoint was not stored", err)
	}
	// The saver's store ends 10 s after it began (9 s after the stop), and
	// the last one may take what remains of the 10 s after the drain: two
	// timeouts would be 19 s.
	if took > 15*time.Second {
		t.Errorf("the stop took %v: want the stores after it bounded by one store timeout (10 s) in all", took)
	}
}
