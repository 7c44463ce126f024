package projector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

func (x *run) completed(seq uint64) {
	if n := x.tr.done(seq); n >= x.r.every || (x.r.saveAt > 0 && n >= x.r.saveAt) {
		select {
		case x.saveNow <- struct{}{}:
		default:
		}
	}
}

// saver stores the checkpoint every interval, and sooner when it has passed
// enough events. After a store that failed, it tries again at the next
// interval: the events completed meanwhile, each of which asks for a
// store while the checkpoint lags, would otherwise have it tried, and
// logged, once an event (a store that refuses it at once, as a segment's
// under another lease does).
func (x *run) saver(ctx context.Context, stop <-chan struct{}) {
	tick := time.NewTicker(x.r.interval)
	defer tick.Stop()
	last := time.Now()
	failed := false
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		case <-x.saveNow:
			if failed {
				continue
			}
		}
		select {
		case <-stop:
			// Told to stop while a tick was due too (select picks either):
			// a store begun now would outlast the stop's bound on them.
			return
		default:
		}
		if x.holdsSave(last) {
			continue
		}
		last = time.Now()
		sctx, cancel := context.WithTimeout(ctx, saveTimeout)
		err := x.save(sctx)
		failed = err != nil
		if err != nil && ctx.Err() == nil {
			x.r.logger.Warn("storing the checkpoint", "err", err)
		}
		x.settled() // at the head, once a flush that failed there has been done
		x.clearError(sctx)
		cancel()
	}
}

// holdsSave reports whether the saver, which last stored the checkpoint
// at last, lets this turn go by: behind the head with events queued,
// writes held back wait for fewer, larger flushes, up to behindSave, and,
// under a HandledIDs window, up to half of it (smallestWindow). (Idle, as
// behind a source that never says it reached its head, they wait an
// interval.)
func (x *run) holdsSave(last time.Time) bool {
	r := x.r
	if !x.engine.holdsBack() || r.caughtUp.Load() || r.inFlight.Load() == 0 || time.Since(last) >= max(r.interval, behindSave) {
		return false
	}
	_, passed := x.tr.peek()
	return r.saveAt == 0 || passed < r.saveAt
}

// clearError clears, once the runner has caught up, the error an earlier
// run recorded: it has recovered.
func (x *run) clearError(ctx context.Context) {
	rec, ok := x.r.checkpoints.(ErrorRecorder)
	if x.cleared || !ok || !x.r.ready.Load() {
		return
	}
	if err := rec.ClearError(ctx, x.r.name); err != nil {
		x.r.logger.Warn("clearing the recorded error", "err", err)
		return
	}
	x.cleared = true
}

// saveTimeout bounds one store of the checkpoint.
const saveTimeout = 10 * time.Second

// save stores the tracker's mark if it is past the stored checkpoint.
func (x *run) save(ctx context.Context) error {
	r := x.r
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	mark, passed := x.tr.peek()
	r.savedMu.Lock()
	stale := mark == nil || (r.saved != nil && !mark.After(*r.saved))
	r.savedMu.Unlock()
	if stale {
		// What the mark passed since is at or before the stored
		// checkpoint (delivered again after a resubscription): a run
		// started from it would not get it again.
		x.tr.taken(passed)
		return nil
	}
	if x.lostWrites.Load() {
		return errors.New("projector: the checkpoint is not stored: writes held back were lost")
	}
	// Every write of the deliveries the mark covers was made (or held
	// back) before the mark was read: written now, the checkpoint covers
	// durable effects only.
	if err := x.flush(ctx, !r.ready.Load() && !x.halt.Load()); err != nil {
		return err
	}
	if r.checkpoints == nil {
		return nil
	}
	if a, ok := r.source.(AnchoredSource); ok && x.log == "" {
		// The log was empty when the run began.
		if log, err := a.Log(ctx); err == nil {
			x.log = log
		}
	}
	mark.Log = x.log
	if err := r.checkpoints.SaveCheckpoint(ctx, r.name, *mark); err != nil {
		return err
	}
	x.tr.taken(passed)
	r.savedMu.Lock()
	r.saved = mark
	r.savedMu.Unlock()
	r.counts.saved.Add(1)
	return nil
}

// flusher is a store that may hold batches' writes back
// ([driver.HoldBack]), and writes them when flushed.
type flusher interface {
	Flush(ctx context.Context, collections ...string) error
}

// holdsBack reports whether the engine's store may hold batches' writes
// back (a flusher): those of documents fed by many streams, which a
// batch writes each time it meets them (under the revision gate, stream
// folds write a document about once already).
func (e *Engine) holdsBack() bool {
	if _, ok := e.store.(flusher); !ok || !e.batchable() {
		return false
	}
	for _, p := range e.projections {
		if guardedBatches(e.keeperOf(p)) {
			return true
		}
	}
	return false
}

// flush writes what the engine's store holds back of its projections'
// documents, if it holds writes back.
func (e *Engine) flush(ctx context.Context) error {
	if !e.holdsBack() {
		return nil
	}
	f := e.store.(flusher)
	collections := make([]string, len(e.projections))
	for i, p := range e.projections {
		collections[i] = p.Collection()
	}
	if err := f.Flush(ctx, collections...); err != nil {
		return fmt.Errorf("projector: writing the documents held back: %w", err)
	}
	return nil
}

// behindSave is how often a runner behind the head with events queued,
// whose store holds writes back, stores its checkpoint (each store writes
// what is held back first), rather than every interval or every events
// (under a HandledIDs window, also every half window: smallestWindow): held
// back, a document fed by events spread over the catch-up is written once
// a checkpoint, not once a batch.
const behindSave = 10 * time.Second

// flush writes what the engine's store holds back, and counts the events
// those writes applied; behind: the run goes on behind the head, and the
// store keeps the documents it writes for the batches to come (otherwise,
// at a run's start and end and as it catches up, it forgets them). A flush
// that found documents held back changed by another writer stops the run,
// and no checkpoint is stored after it: their events are applied again
// from the checkpoint, by the next run. Any other error is the store's,
// tried again at the next flush.
func (x *run) flush(ctx context.Context, behind bool) error {
	// Its own time: up to 32 MiB of documents, past a save's timeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if behind {
		ctx = driver.HoldBack(ctx)
	}
	n := x.heldApplied.Swap(0)
	err := x.engine.flush(ctx)
	switch {
	case err == nil:
		x.r.counts.applied.Add(n)
	case retry.IsPermanent(err):
		x.lostWrites.Store(true) // and n are applied again by the next run
		x.fail(err)
	default:
		x.heldApplied.Add(n)
	}
	return err
}

// flushTimeout bounds one flush of what a store holds back.
const flushTimeout = 2 * time.Minute
