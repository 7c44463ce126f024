package projector

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// savedCheckpoints is a checkpoint store in memory that takes slow to
// store each.
type savedCheckpoints struct {
	mu    sync.Mutex
	saved []Checkpoint
	slow  time.Duration
}

func (m *savedCheckpoints) LoadCheckpoint(context.Context, string) (*Checkpoint, error) {
	return nil, nil
}

func (m *savedCheckpoints) SaveCheckpoint(_ context.Context, _ string, c Checkpoint) error {
	time.Sleep(m.slow)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saved = append(m.saved, c)
	return nil
}

func (m *savedCheckpoints) last() (Checkpoint, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.saved) == 0 {
		return Checkpoint{}, false
	}
	return m.saved[len(m.saved)-1], true
}

// windowRun is a run of a runner under a HandledIDs window of n, its
// saver running until the test ends, its reader's side called by the test.
func windowRun(t *testing.T, n int, cps *savedCheckpoints) *run {
	r := &Runner{name: "r", idsWindow: n, saveAt: max(n/2, 1), every: 500, interval: time.Second, checkpoints: cps,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	x := &run{r: r, tr: newTracker(nil), saveNow: make(chan struct{}, 1), engine: &Engine{core: &core{}}}
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); x.saver(ctx, stop) }()
	t.Cleanup(func() { close(stop); cancel(); <-done })
	return x
}

// One transaction of many events (written by the legacy TCP API): they
// share their commit position, and the checkpoint moves inside it by their
// prepare positions, so that the reader, waiting while a window of
// deliveries follow the stored checkpoint, goes on through a transaction
// larger than the window.
func TestWithinLag_goes_through_a_transaction_larger_than_the_window(t *testing.T) {
	cps := &savedCheckpoints{}
	x := windowRun(t, 40, cps)
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ok := x.withinLag(ctx)
		cancel()
		if !ok {
			last, _ := cps.last()
			t.Fatalf("the reader waited 10s at event %d of a transaction of 200, %d deliveries past the checkpoint stored last (%v)", i, x.tr.sinceTaken(), last)
		}
		x.completed(x.tr.add(&Checkpoint{Position: 1000, Prepare: uint64(1000 + i)}))
	}
}

// Deliveries that pass while a checkpoint is stored (slowly here) still
// count against the window once it is stored: however slow the stores,
// no more than a window of deliveries follow the stored checkpoint.
func TestWithinLag_counts_what_passed_while_the_checkpoint_was_stored(t *testing.T) {
	cps := &savedCheckpoints{slow: 20 * time.Millisecond}
	const window = 40
	x := windowRun(t, window, cps)
	worst := 0
	for i := range 600 {
		if !x.withinLag(context.Background()) {
			t.Fatal("withinLag ended without its context ending")
		}
		pos := uint64(i + 1)
		x.completed(x.tr.add(&Checkpoint{Position: pos}))
		last, _ := cps.last()
		worst = max(worst, int(pos-last.Position))
		if i%3 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	cps.mu.Lock()
	stored := len(cps.saved)
	cps.mu.Unlock()
	t.Logf("at most %d deliveries past the stored checkpoint; %d checkpoints", worst, stored)
	if worst > window {
		t.Errorf("%d deliveries past the stored checkpoint, more than the window of %d", worst, window)
	}
}
