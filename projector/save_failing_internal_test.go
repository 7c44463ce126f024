package projector

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// refusingCheckpoints refuses every save, as a segment's checkpoint store
// does while a rebuild's lease left held covers it (errUnderAnotherLease,
// up to the rebuild's --lease, 15 s by default).
type refusingCheckpoints struct{ saves atomic.Int64 }

func (*refusingCheckpoints) LoadCheckpoint(context.Context, string) (*Checkpoint, error) {
	return nil, nil
}

func (m *refusingCheckpoints) SaveCheckpoint(context.Context, string, Checkpoint) error {
	m.saves.Add(1)
	time.Sleep(200 * time.Microsecond) // a round trip to the store
	return errors.New("its checkpoint is still under another lease")
}

// A store that refuses saves for a while (errUnderAnotherLease) is asked
// about once every WithCheckpointEvery events or every interval, as one
// that stores them is: not once per completed event, back to back, each
// failure logged as a warning.
func TestSaver_does_not_retry_a_refused_save_once_per_event(t *testing.T) {
	cps := &refusingCheckpoints{}
	var warnings atomic.Int64
	r := &Runner{name: "r", every: 500, interval: time.Second, checkpoints: cps,
		logger: slog.New(countingHandler{slog.NewTextHandler(io.Discard, nil), &warnings})}
	x := &run{r: r, tr: newTracker(nil), saveNow: make(chan struct{}, 1), engine: &Engine{core: &core{}}}
	ctx, cancel := context.WithCancel(context.Background())
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); x.saver(ctx, stop) }()
	const events = 20000
	began := time.Now()
	for i := range events {
		x.completed(x.tr.add(&Checkpoint{Position: uint64(i + 1)}))
		if i%20 == 0 {
			time.Sleep(50 * time.Microsecond) // a live stream's pace
		}
	}
	took := time.Since(began)
	close(stop)
	cancel()
	<-done
	n := cps.saves.Load()
	limit := int64(events/500) + int64(took/time.Second) + 3
	t.Logf("%d events in %v: %d saves refused, %d warnings", events, took.Round(time.Millisecond), n, warnings.Load())
	if n > limit {
		t.Errorf("%d saves (and %d warnings) for %d events in %v; want at most about %d (every 500 events or every interval)", n, warnings.Load(), events, took.Round(time.Millisecond), limit)
	}
}

type countingHandler struct {
	slog.Handler
	warnings *atomic.Int64
}

func (h countingHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		h.warnings.Add(1)
	}
	return h.Handler.Handle(ctx, rec)
}

// blockingCheckpoints holds each save until released: a store that does
// not answer.
type blockingCheckpoints struct {
	saves   atomic.Int64
	began   chan struct{}
	release chan struct{}
}

func (*blockingCheckpoints) LoadCheckpoint(context.Context, string) (*Checkpoint, error) {
	return nil, nil
}

func (b *blockingCheckpoints) SaveCheckpoint(ctx context.Context, _ string, _ Checkpoint) error {
	if b.saves.Add(1) == 1 {
		close(b.began)
	}
	<-b.release
	return errors.New("no answer")
}

// Told to stop while a store is under way, the saver begins no other once
// it ends, although its tick is due too: the stores of a stop are bounded
// (the last one's deadline counts from the drain), and one begun after the
// stop would outlast it.
func TestSaver_told_to_stop_during_a_store_begins_no_other(t *testing.T) {
	for i := range 20 {
		cps := &blockingCheckpoints{began: make(chan struct{}), release: make(chan struct{})}
		r := &Runner{name: "r", every: 1, interval: time.Millisecond, checkpoints: cps, logger: slog.New(slog.DiscardHandler)}
		x := &run{r: r, tr: newTracker(nil), saveNow: make(chan struct{}, 1), engine: &Engine{core: &core{}}}
		x.completed(x.tr.add(&Checkpoint{Position: 1}))
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { defer close(done); x.saver(context.Background(), stop) }()
		<-cps.began
		close(stop)
		time.Sleep(5 * time.Millisecond) // ticks come due meanwhile
		close(cps.release)
		<-done
		if n := cps.saves.Load(); n != 1 {
			t.Fatalf("round %d: %d stores, want the one under way only", i, n)
		}
	}
}
