package projector

import (
	"context"
	"time"
)

func (x *run) completed(seq uint64) {
	if x.tr.done(seq) >= x.r.every {
		select {
		case x.saveNow <- struct{}{}:
		default:
		}
	}
}

// saver stores the checkpoint every interval, and sooner when it has passed
// enough events.
func (x *run) saver(ctx context.Context, stop <-chan struct{}) {
	tick := time.NewTicker(x.r.interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		case <-x.saveNow:
		}
		sctx, cancel := context.WithTimeout(ctx, saveTimeout)
		if err := x.save(sctx); err != nil && ctx.Err() == nil {
			x.r.logger.Warn("storing the checkpoint", "err", err)
		}
		x.clearError(sctx)
		cancel()
	}
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
	mark, _ := x.tr.peek()
	r.savedMu.Lock()
	stale := mark == nil || (r.saved != nil && mark.Position <= r.saved.Position)
	r.savedMu.Unlock()
	if r.checkpoints == nil || stale {
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
	x.tr.take()
	r.savedMu.Lock()
	r.saved = mark
	r.savedMu.Unlock()
	r.counts.saved.Add(1)
	return nil
}
