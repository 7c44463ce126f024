package projector

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// run is the state of one Run.
type run struct {
	r      *Runner
	tr     *tracker
	bounds batchBounds // of a worker's batch
	parts  []chan item
	heads  []chan struct{} // a worker's batch is written now: the source reached its head
	// headAt is the tracker's next sequence number when the source reached
	// its head (0: not reached, or untracked): readiness waits for the
	// deliveries before it, not for events delivered since.
	headAt atomic.Uint64
	// untracked: an event of this subscription came without a checkpoint
	// (the reader's alone): readiness waits for nothing in flight then.
	untracked bool
	halt      atomic.Bool // stopping: queued events are left for the next run
	stopRead  context.CancelFunc
	// engine is the runner's engine as the workers handle events with it:
	// its waits for predecessors end at stopWaits (the run stops).
	engine    *Engine
	stopWaits context.CancelFunc
	workCtx   context.Context // what the workers handle events under
	apart     sync.WaitGroup  // the deliveries handled apart (handleApart)
	saveNow   chan struct{}
	open      Subscription // the subscription open when reading stopped
	cleared   bool         // the saver has cleared the recorded error
	log       string       // what identifies the source's log ([AnchoredSource]), "" when unknown
	settling  bool         // the source settles its deliveries (read by the reading goroutine only)
	fromStart bool         // the run reads the log from its beginning (no checkpoint stored)
	received  []item       // deliveries the source settles, received together: one batch (the reading goroutine's)
	// unsettled counts the deliveries whose settling failed since the
	// last drop: the first is logged, the others summed (see settle).
	unsettled atomic.Int64
	// heldApplied counts the events applied by writes the store may hold
	// back: they count as applied once written (flush). lostWrites: a
	// flush found some lost; no checkpoint is stored after it.
	heldApplied atomic.Uint64
	lostWrites  atomic.Bool

	failOnce sync.Once
	failure  error
	failMu   sync.Mutex
	// alsoFailed is the events that failed after the first while the run
	// stopped (in other workers, or later in the same batch): named with
	// it, so that a fix of the first does not meet the next on the run
	// after.
	alsoFailed []error
}

type item struct {
	d       Delivery
	key     string // what the runner spreads it over workers by (Engine.partitionKey)
	seq     uint64
	tracked bool
	queued  time.Time // when the reader queued it for its worker
}

// queue is how many events a worker's queue holds: the runner's buffer;
// for an engine spread by document, a whole batch of events, so that the
// reader fills a worker's next batch while it writes this one (its queue
// full, the reader would wait, and the other workers with it).
func (x *run) queue() int {
	if x.r.engine.byDocument() && x.r.batch > 1 {
		return max(x.r.buffer, x.bounds.events)
	}
	return x.r.buffer
}

// execute is one Run: the workers, the saver and the reader until ctx ends
// or the run fails, then the drain, the last checkpoint and the outcome.
func (x *run) execute(ctx context.Context) error {
	r := x.r
	readCtx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	x.stopRead = stopRead
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	waitStop, stopWaits := context.WithCancel(context.Background())
	defer stopWaits()
	x.stopWaits = stopWaits
	x.engine = r.engine.waitsEndAt(waitStop)
	x.workCtx = workCtx

	// What the store holds back of an earlier run's documents is written
	// and forgotten: this run reads them again, from its checkpoint.
	if err := x.engine.flush(ctx); err != nil && ctx.Err() == nil {
		r.logger.Warn("writing what an earlier run held back", "err", err)
	}
	workers := x.startWorkers(workCtx)
	defer r.busy.Store(nil)
	saverDone := make(chan struct{})
	stopSaver := make(chan struct{})
	go func() {
		defer close(saverDone)
		x.saver(workCtx, stopSaver)
	}()

	readErr := x.read(readCtx)

	x.stopping()
	defer func() {
		if x.open != nil {
			x.open.Close() // after the drain: a persistent group's acks go out on it
		}
		r.connected.Store(false)
	}()
	x.drain(workers, stopWork)
	x.noteUnsettled()
	// The stores after the drain take saveTimeout in all, so that a stop
	// on a MongoDB that does not answer ends within the drain timeout and
	// it. The saver's store call, if one is under way, ends (its own
	// timeout bounds it) before the last one: cancelled, it could still
	// reach the store after the last and, where conditional writes are not
	// atomic (FerretDB), store an older checkpoint over it.
	storeBy := time.Now().Add(saveTimeout)
	close(stopSaver)
	<-saverDone
	stopWork()
	saveCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), storeBy)
	defer cancel()
	saveErr := x.save(saveCtx)
	// Whatever is still held back (the checkpoint did not move) is written,
	// and the store forgets this run's documents.
	if err := x.flush(saveCtx, false); err != nil && saveErr == nil && x.failure == nil {
		saveErr = err
	}
	if r.checkpoints == nil {
		// A source that keeps its own position (a persistent group's is
		// the server's): there is no checkpoint to say.
		r.logger.Info("runner stops")
	} else {
		r.logger.Info("runner stops", "checkpoint", checkpointAttr(r.Stats().Checkpoint))
	}
	return x.outcome(saveCtx, readErr, saveErr)
}

// startWorkers starts the run's workers, one a partition, handling events
// under workCtx; they end once their partitions are closed (drain).
func (x *run) startWorkers(workCtx context.Context) *sync.WaitGroup {
	r := x.r
	var workers sync.WaitGroup
	busy := make([]atomic.Int64, r.workers) // when each worker took what it handles (Unix ns; 0: idle)
	r.busy.Store(&busy)
	x.parts = make([]chan item, r.workers)
	x.heads = make([]chan struct{}, r.workers)
	for i := range x.parts {
		x.parts[i] = make(chan item, x.queue())
		x.heads[i] = make(chan struct{}, 1)
		workers.Go(func() { x.work(countingParkedBeside(workCtx, &r.counts.parkedLater), x.parts[i], x.heads[i], &busy[i]) })
	}
	return &workers
}

// drain closes the workers' partitions and waits for them and for the
// deliveries handled apart, up to the drain timeout; past it, stopWork
// abandons what they handle.
func (x *run) drain(workers *sync.WaitGroup, stopWork context.CancelFunc) {
	r := x.r
	for _, p := range x.parts {
		close(p)
	}
	drained := make(chan struct{})
	go func() { workers.Wait(); x.apart.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(r.drain):
		r.logger.Warn("drain timeout: abandoning the events being handled", "timeout", r.drain)
		stopWork()
		select {
		case <-drained:
		case <-time.After(abandonWait):
			// Said now: a process killed while it waits says why.
			r.logger.Error("the events being handled have not returned since they were abandoned: a projection's step, or a call to the store, "+
				"does not return; the runner waits for it", "waited", abandonWait)
			<-drained
		}
	}
}

// abandonWait is how long after abandoning the events being handled a
// runner says that they have not returned (their store calls end with
// their context; a step has none).
const abandonWait = 5 * time.Second

// outcome is what Run returns once the run has stopped: its first failure,
// else the reader's error, else the last checkpoint's store error; a
// failure or a reader's error is recorded beside the checkpoint.
func (x *run) outcome(ctx context.Context, readErr, saveErr error) error {
	r := x.r
	x.nameAlsoFailed()
	if x.failure != nil || readErr != nil {
		if rec, ok := r.checkpoints.(ErrorRecorder); ok {
			msg := fmt.Sprint(x.failure)
			if x.failure == nil {
				msg = readErr.Error()
			}
			if err := rec.RecordError(ctx, r.name, msg); err != nil {
				r.logger.Warn("recording the error", "err", err)
			}
		}
	}
	switch {
	case x.failure != nil:
		return x.failure
	case readErr != nil:
		return fmt.Errorf("projector: runner %q: %w", r.name, readErr)
	case saveErr != nil:
		return fmt.Errorf("projector: runner %q: storing the checkpoint: %w", r.name, saveErr)
	}
	return nil
}
