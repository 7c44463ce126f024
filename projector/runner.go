package projector

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/revgate/projector/retry"
)

// Runner drives an [Engine] from a [Source]: it subscribes, hands each event
// to the engine, and stores a checkpoint once the writes it covers are done,
// so that a restart resumes from it. After a drop it subscribes again from
// the stored checkpoint; the gate makes the replayed overlap harmless (the
// events come back as duplicates).
//
// Events are handled by workers, each owning the streams that hash to it, so
// the events of one stream are handled in order and those of different streams
// in parallel. The checkpoint moves only over a prefix of deliveries that are
// all handled, whichever worker had them.
type Runner struct {
	name        string
	engine      *Engine
	source      Source
	checkpoints CheckpointStore
	workers     int
	buffer      int
	every       int
	interval    time.Duration
	reconnect   retry.Policy
	drain       time.Duration
	batch       int
	window      time.Duration
	logger      *slog.Logger
	seed        maphash.Seed

	running   atomic.Bool
	caughtUp  atomic.Bool  // the source said it reached the head
	ready     atomic.Bool  // and everything up to there was handled
	connected atomic.Bool  // a subscription is open
	inFlight  atomic.Int64 // events dispatched and not yet handled
	latest    atomic.Int64 // creation time (Unix ns) of the newest event handled
	counts    struct {
		events, checkpoints, applied, duplicates, skipped, parked, failed atomic.Uint64
		waits                                                             atomic.Uint64
		abandoned, saved, subscriptions, drops, batches, batched          atomic.Uint64
		unrouted                                                          atomic.Uint64
	}
	saveMu  sync.Mutex // one save at a time
	savedMu sync.Mutex // guards saved
	saved   *Checkpoint
}

// RunnerOption configures a [Runner].
type RunnerOption func(*Runner)

// DefaultWorkers is how many workers a runner has unless [WithWorkers] says.
const DefaultWorkers = 4

// WithWorkers sets how many events are handled at once (default 4); events of
// one stream always go to the same worker, in order.
func WithWorkers(n int) RunnerOption { return func(r *Runner) { r.workers = n } }

// WithBuffer sets how many events may wait for each worker (default 1024). When
// the workers are that far behind, the runner stops reading the subscription:
// a slow store slows the subscription instead of filling memory.
func WithBuffer(n int) RunnerOption { return func(r *Runner) { r.buffer = n } }

// WithCheckpointEvery stores the checkpoint once it has passed events
// deliveries, and at least every interval while it moves (defaults: 500 and 1s).
// Fewer stores cost less; more replay after a crash. A clean stop always
// stores it.
func WithCheckpointEvery(events int, interval time.Duration) RunnerOption {
	return func(r *Runner) { r.every, r.interval = events, interval }
}

// WithReconnect sets the policy for subscribing again after a drop or while
// the server is unreachable (default [DefaultReconnect]). When it runs out,
// Run returns the error.
func WithReconnect(p retry.Policy) RunnerOption { return func(r *Runner) { r.reconnect = p } }

// The runner's default batching: see [WithBatch].
const (
	DefaultBatch       = 1000
	DefaultBatchWindow = 20 * time.Millisecond
)

// holdWindows bounds how long a batch is held while events keep coming, in
// windows: see [WithBatch].
const holdWindows = 10

// WithBatch sets how many queued events a worker folds and writes together
// (default 1000; 1 turns batching off), and, while the source is behind its
// head, how long a worker whose batch is not full waits for its next event
// before it writes what it has (default 20ms). A batch is never held longer
// than 10 windows in all. Behind the head, events keep coming and batches are
// large, so that each document is written once for many events; at the head
// nothing queues, nothing waits, and events are handled as they arrive.
func WithBatch(size int, window time.Duration) RunnerOption {
	return func(r *Runner) { r.batch, r.window = size, window }
}

// WithDrainTimeout bounds how long a stopping runner waits for the events being
// handled (default 30s); past it they are abandoned, uncheckpointed.
func WithDrainTimeout(d time.Duration) RunnerOption { return func(r *Runner) { r.drain = d } }

// DefaultReconnect is the default resubscription policy: 250 ms doubling to
// 10 s, with jitter, for up to 10 minutes of an unreachable server; then Run
// returns, so that a supervisor sees the outage.
func DefaultReconnect() retry.Policy {
	return retry.Policy{
		InitialDelay: 250 * time.Millisecond,
		Multiplier:   2,
		Jitter:       0.5,
		MaxDelay:     10 * time.Second,
		MaxRetries:   -1,
		MaxElapsed:   10 * time.Minute,
	}
}

// NewRunner returns a runner named name (its checkpoint's key) that feeds
// engine from source and stores checkpoints in checkpoints. checkpoints may
// be nil for a source that keeps its own position (a persistent
// subscription). It logs with the engine's logger.
func NewRunner(name string, engine *Engine, source Source, checkpoints CheckpointStore, opts ...RunnerOption) (*Runner, error) {
	r := newRunner(opts)
	r.name, r.engine, r.source, r.checkpoints = name, engine, source, checkpoints
	switch {
	case name == "":
		return nil, errors.New("projector: a runner needs a name")
	case engine == nil || source == nil:
		return nil, fmt.Errorf("projector: runner %q needs an engine and a source", name)
	}
	if err := r.checkSettings(); err != nil {
		return nil, fmt.Errorf("projector: runner %q: %w", name, err)
	}
	for _, p := range engine.projections {
		if !p.Strategy().NeedsOrderedSource() {
			continue
		}
		o, ok := source.(interface{ Ordered() bool })
		if !ok || !o.Ordered() || r.workers != 1 {
			return nil, fmt.Errorf("projector: runner %q: projection %q uses the global-position strategy, which needs one consumer "+
				"reading the log in order: a catch-up subscription with one worker (not a persistent subscription group, "+
				"not %d workers)", name, p.Name(), r.workers)
		}
	}
	if f, ok := source.(interface{ FiltersEventTypes() bool }); ok && f.FiltersEventTypes() {
		for _, p := range engine.projections {
			if p.Strategy().NeedsEveryRevision() {
				return nil, fmt.Errorf("projector: runner %q: the source filters events by type, which leaves holes in each stream's revisions; "+
					"the %s strategy of projection %q would wait for them forever: filter by stream name instead, "+
					"or use a strategy that needs no revision order (HandledIDs, Inbox, None)", name, p.Strategy(), p.Name())
			}
		}
	}
	r.logger = engine.logger.With("runner", name)
	return r, nil
}

// newRunner returns a runner with the default settings and opts applied.
func newRunner(opts []RunnerOption) *Runner {
	r := &Runner{
		workers: DefaultWorkers, buffer: 1024, every: 500, interval: time.Second,
		reconnect: DefaultReconnect(), drain: 30 * time.Second, batch: DefaultBatch, window: DefaultBatchWindow,
		seed: maphash.MakeSeed(),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// checkSettings reports settings a runner cannot work with.
func (r *Runner) checkSettings() error {
	switch {
	case r.workers < 1 || r.buffer < 1:
		return fmt.Errorf("workers and buffer must be >= 1, got %d and %d", r.workers, r.buffer)
	case r.every < 1 || r.interval <= 0:
		return fmt.Errorf("checkpoint every %d events / %v: both must be > 0", r.every, r.interval)
	case r.drain <= 0:
		return errors.New("drain timeout must be > 0")
	case r.batch < 1 || r.window < 0:
		return errors.New("batch size must be >= 1 and its window >= 0")
	}
	if err := r.reconnect.Validate(); err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	return nil
}

// CheckRunnerOptions reports, without building a runner, options that
// [NewRunner] would refuse: what a command line checks before it connects
// to anything.
func CheckRunnerOptions(opts ...RunnerOption) error {
	if err := newRunner(opts).checkSettings(); err != nil {
		return fmt.Errorf("projector: runner: %w", err)
	}
	return nil
}

// Name returns the runner's name.
func (r *Runner) Name() string { return r.name }

// CaughtUp reports whether the runner has handled everything up to the head
// of its source's log since it last subscribed: the source has said it
// reached the head, and later nothing was left waiting or being handled.
// Live events in flight afterwards do not make it false; a drop does.
func (r *Runner) CaughtUp() bool { return r.ready.Load() }

// Connected reports whether a subscription is open. For a source that never
// says it has reached a head (a persistent subscription group), this is what
// readiness can mean.
func (r *Runner) Connected() bool { return r.connected.Load() }

// settled latches readiness once the source is at the head with nothing in
// flight.
func (r *Runner) settled() {
	if r.caughtUp.Load() && r.inFlight.Load() == 0 && !r.ready.Swap(true) {
		r.logger.Info("caught up")
		if n := r.counts.events.Load(); n > 0 && r.counts.unrouted.Load() == n {
			r.logger.Warn("none of the events delivered went to a document: does each projection's IDFunc want "+
				"what its subscription reads?", "events", n)
		}
	}
}

// RunnerStats are a runner's counters since it was made.
type RunnerStats struct {
	// Events delivered (redeliveries included) and checkpoint-only deliveries.
	Events, Checkpoints uint64
	// Abandoned: events delivered but left unhandled when the runner stopped
	// (they were queued; the checkpoint stayed before them).
	Abandoned uint64
	// Unrouted: events delivered that no projection of the engine wanted
	// (its IDFunc left them alone).
	Unrouted uint64
	// Results of the events, summed over projections.
	Applied, Duplicates, Skipped, Parked, Failed uint64
	// Waits of the gate, summed over events.
	Waits uint64
	// Saved is how many checkpoints were stored; Checkpoint is the last one.
	Saved      uint64
	Checkpoint *Checkpoint
	// Subscriptions opened, and how many of them dropped.
	Subscriptions, Drops uint64
	CaughtUp             bool
	// Latest is the creation time of the newest event handled: how far the
	// runner has got, in the source's time.
	Latest time.Time
	// Batches handled together while catching up, and the events in them.
	Batches, Batched uint64
}

// Stats returns the runner's counters.
func (r *Runner) Stats() RunnerStats {
	c := &r.counts
	s := RunnerStats{
		Events: c.events.Load(), Checkpoints: c.checkpoints.Load(), Abandoned: c.abandoned.Load(), Unrouted: c.unrouted.Load(),
		Applied: c.applied.Load(), Duplicates: c.duplicates.Load(), Skipped: c.skipped.Load(), Parked: c.parked.Load(), Failed: c.failed.Load(),
		Waits: c.waits.Load(), Saved: c.saved.Load(),
		Subscriptions: c.subscriptions.Load(), Drops: c.drops.Load(), CaughtUp: r.ready.Load(),
		Batches: c.batches.Load(), Batched: c.batched.Load(),
	}
	r.savedMu.Lock()
	if r.saved != nil {
		cp := *r.saved
		s.Checkpoint = &cp
	}
	r.savedMu.Unlock()
	if ns := r.latest.Load(); ns != 0 {
		s.Latest = time.Unix(0, ns).UTC()
	}
	return s
}

// Run consumes the source until ctx is done or an event fails in a way
// nobody settles (a catch-up source under the [Block] policy). Stopping, it
// lets the events being handled finish (bounded by the drain timeout), stores
// the checkpoint, and returns: nil when ctx was canceled, else the error. A
// runner runs once at a time.
func (r *Runner) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return fmt.Errorf("projector: runner %q is already running", r.name)
	}
	defer r.running.Store(false)
	var from *Checkpoint
	if r.checkpoints != nil {
		c, err := r.checkpoints.LoadCheckpoint(ctx, r.name)
		if err != nil {
			return fmt.Errorf("projector: runner %q: loading its checkpoint: %w", r.name, err)
		}
		from = c
	}
	r.savedMu.Lock()
	r.saved = from
	r.savedMu.Unlock()
	r.caughtUp.Store(false)
	r.ready.Store(false)
	r.logger.Info("runner starts", "from", checkpointAttr(from), "workers", r.workers)
	x := &run{r: r, tr: newTracker(from), saveNow: make(chan struct{}, 1)}
	return x.execute(ctx)
}

func checkpointAttr(c *Checkpoint) string {
	if c == nil {
		return "start"
	}
	return c.String()
}

// run is the state of one Run.
type run struct {
	r        *Runner
	tr       *tracker
	parts    []chan item
	heads    []chan struct{} // a worker's batch is written now: the source reached its head
	halt     atomic.Bool     // stopping: queued events are left for the next run
	stopRead context.CancelFunc
	saveNow  chan struct{}
	open     Subscription // the subscription open when reading stopped

	failOnce sync.Once
	failure  error
}

type item struct {
	d       Delivery
	seq     uint64
	tracked bool
}

func (x *run) execute(ctx context.Context) error {
	r := x.r
	readCtx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	x.stopRead = stopRead
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()

	var workers sync.WaitGroup
	x.parts = make([]chan item, r.workers)
	x.heads = make([]chan struct{}, r.workers)
	for i := range x.parts {
		x.parts[i] = make(chan item, r.buffer)
		x.heads[i] = make(chan struct{}, 1)
		workers.Go(func() { x.work(workCtx, x.parts[i], x.heads[i]) })
	}
	saverDone := make(chan struct{})
	stopSaver := make(chan struct{})
	go func() {
		defer close(saverDone)
		x.saver(workCtx, stopSaver)
	}()

	readErr := x.read(readCtx)

	x.halt.Store(true)
	defer func() {
		if x.open != nil {
			x.open.Close() // after the drain: a persistent group's acks go out on it
		}
		r.connected.Store(false)
	}()
	for _, p := range x.parts {
		close(p)
	}
	drained := make(chan struct{})
	go func() { workers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(r.drain):
		r.logger.Warn("drain timeout: abandoning the events being handled", "timeout", r.drain)
		stopWork()
		<-drained
	}
	close(stopSaver)
	stopWork() // the saver's store call, if one is stuck
	<-saverDone
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	saveErr := x.save(saveCtx)
	r.logger.Info("runner stops", "checkpoint", checkpointAttr(r.Stats().Checkpoint))
	if x.failure != nil || readErr != nil {
		if rec, ok := r.checkpoints.(ErrorRecorder); ok {
			msg := fmt.Sprint(x.failure)
			if x.failure == nil {
				msg = readErr.Error()
			}
			if err := rec.RecordError(saveCtx, r.name, msg); err != nil {
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

// read subscribes, and subscribes again after every drop, until ctx is done.
func (x *run) read(ctx context.Context) error {
	r := x.r
	quick := 0 // drops in a row that delivered nothing
	var quickSince time.Time
	for {
		if quick > 0 {
			if r.reconnect.MaxElapsed > 0 && time.Since(quickSince) > r.reconnect.MaxElapsed {
				return fmt.Errorf("every subscription for %v dropped before delivering anything", r.reconnect.MaxElapsed)
			}
			if !sleep(ctx, r.reconnect.Schedule(quick)[quick-1].Nominal) {
				return nil
			}
		}
		sub, err := retry.DoValue(ctx, r.reconnect, func(ctx context.Context) (Subscription, error) {
			return r.source.Subscribe(ctx, x.resumeFrom())
		})
		if ctx.Err() != nil {
			if sub != nil {
				sub.Close()
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("subscribing: %w", err)
		}
		r.counts.subscriptions.Add(1)
		r.connected.Store(true)
		n, err := x.consume(ctx, sub)
		if ctx.Err() != nil {
			x.open = sub // closed after the drain
			return nil
		}
		sub.Close()
		r.connected.Store(false)
		r.counts.drops.Add(1)
		r.caughtUp.Store(false)
		r.ready.Store(false)
		for _, h := range x.heads {
			select {
			case <-h: // behind again: a head signal not taken is stale
			default:
			}
		}
		if n == 0 {
			if quick == 0 {
				quickSince = time.Now()
			}
			quick = min(quick+1, 30)
		} else {
			quick = 0
		}
		if err := x.save(ctx); err != nil {
			r.logger.Warn("storing the checkpoint after a drop", "err", err)
		}
		r.logger.Warn("subscription dropped; subscribing again", "from", checkpointAttr(x.resumeFrom()), "delivered", n, "err", err)
	}
}

// resumeFrom is where a new subscription starts: the stored checkpoint, or,
// with no checkpoint store, the furthest handled prefix.
func (x *run) resumeFrom() *Checkpoint {
	if x.r.checkpoints == nil {
		mark, _ := x.tr.peek()
		return mark
	}
	x.r.savedMu.Lock()
	defer x.r.savedMu.Unlock()
	if x.r.saved == nil {
		return nil
	}
	c := *x.r.saved
	return &c
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// consume hands every delivery of sub to the workers until sub ends.
func (x *run) consume(ctx context.Context, sub Subscription) (int, error) {
	n := 0
	for {
		d, err := sub.Next(ctx)
		if err != nil {
			return n, err
		}
		n++
		if !x.dispatch(ctx, d) {
			return n, ctx.Err()
		}
	}
}

func (x *run) dispatch(ctx context.Context, d Delivery) bool {
	r := x.r
	if d.CaughtUp && !r.caughtUp.Swap(true) {
		r.logger.Info("subscription reached the head", "queued", r.inFlight.Load())
		for _, h := range x.heads {
			select {
			case h <- struct{}{}: // a batch filling need not wait for more
			default:
			}
		}
		r.settled()
	}
	if d.Event == nil {
		r.counts.checkpoints.Add(1)
		if d.Checkpoint != nil {
			x.completed(x.tr.add(d.Checkpoint))
		}
		return true
	}
	r.counts.events.Add(1)
	it := item{d: d}
	if d.Checkpoint != nil {
		it.seq, it.tracked = x.tr.add(d.Checkpoint), true
	}
	part := x.parts[maphash.String(r.seed, d.Event.StreamID)%uint64(len(x.parts))]
	r.inFlight.Add(1)
	select {
	case part <- it:
		return true
	case <-ctx.Done():
		r.inFlight.Add(-1)
		return false
	}
}

func (x *run) completed(seq uint64) {
	if x.tr.done(seq) >= x.r.every {
		select {
		case x.saveNow <- struct{}{}:
		default:
		}
	}
}

// work handles the events of one partition in order, in batches of what has
// queued up: large while the source is behind its head (catching up, a
// rebuild), one event at a time at the head, where nothing queues.
func (x *run) work(ctx context.Context, part <-chan item, head <-chan struct{}) {
	r := x.r
	batching := r.batch > 1 && r.engine.batchable()
	for it := range part {
		batch := []item{it}
		if batching && it.d.Settle == nil {
			batch = x.fill(batch, part, head)
		}
		if len(batch) == 1 {
			x.handle(ctx, it)
		} else {
			x.handleBatch(ctx, batch)
		}
		r.inFlight.Add(-int64(len(batch)))
		r.settled()
	}
}

// fill adds to batch what the partition has queued, up to the batch size.
// While the source is behind its head it waits for more: up to the window for
// each next event, up to holdWindows windows in all, and no longer once the
// source reaches its head.
func (x *run) fill(batch []item, part <-chan item, head <-chan struct{}) []item {
	r := x.r
	wait := r.window > 0 && !r.caughtUp.Load() // at the head, no waiting
	var hold <-chan time.Time
	var gap *time.Timer
	if wait {
		t := time.NewTimer(holdWindows * r.window)
		defer t.Stop()
		hold = t.C
		gap = time.NewTimer(r.window)
		defer gap.Stop()
	}
	for len(batch) < r.batch {
		select {
		case it, ok := <-part:
			if !ok {
				return batch
			}
			batch = append(batch, it)
			continue
		default:
		}
		if !wait {
			return batch
		}
		gap.Reset(r.window)
		select {
		case it, ok := <-part:
			if !ok {
				return batch
			}
			batch = append(batch, it)
		case <-gap.C:
			return batch
		case <-hold:
			return batch
		case <-head:
			return batch
		}
	}
	return batch
}

func (x *run) handle(ctx context.Context, it item) {
	if x.halt.Load() {
		x.r.counts.abandoned.Add(1)
		return // left for the next run: the checkpoint stays before it
	}
	results, err := x.r.engine.Handle(ctx, *it.d.Event)
	x.settle(ctx, it, results, err)
}

// handleBatch handles the events of batch together (none is settled by its
// source: batches are for catch-up).
func (x *run) handleBatch(ctx context.Context, batch []item) {
	if x.halt.Load() {
		x.r.counts.abandoned.Add(uint64(len(batch)))
		return
	}
	events := make([]Event, len(batch))
	for i, it := range batch {
		events[i] = *it.d.Event
	}
	x.r.counts.batches.Add(1)
	x.r.counts.batched.Add(uint64(len(batch)))
	all := x.r.engine.HandleBatch(ctx, events)
	for i, it := range batch {
		results, left := handledOnly(all[i])
		if err := joinFailures(results); err != nil || !left {
			x.settle(ctx, it, results, err)
			continue
		}
		// Left alone (in some projection) after an earlier event failed: the
		// run stops, and the checkpoint stays before this event.
		x.r.counts.abandoned.Add(1)
	}
}

// settle counts an event's results and completes it, or fails the run.
func (x *run) settle(ctx context.Context, it item, results []Result, err error) {
	r := x.r
	if ctx.Err() != nil {
		r.counts.abandoned.Add(1)
		return // abandoned at the drain timeout: not a failure of the event
	}
	if created := it.d.Event.Created; !created.IsZero() {
		for ns := created.UnixNano(); ; {
			old := r.latest.Load()
			if old >= ns || r.latest.CompareAndSwap(old, ns) {
				break
			}
		}
	}
	if len(results) == 0 {
		r.counts.unrouted.Add(1)
	}
	for _, res := range results {
		r.counts.waits.Add(uint64(res.Waits))
		switch res.Outcome {
		case Applied:
			r.counts.applied.Add(1)
		case Duplicate:
			r.counts.duplicates.Add(1)
		case Skipped:
			r.counts.skipped.Add(1)
		case Parked:
			r.counts.parked.Add(1)
		case Failed:
			r.counts.failed.Add(1)
		}
	}
	if it.d.Settle != nil {
		if serr := it.d.Settle(results); serr != nil {
			r.logger.Warn("settling an event", "stream", it.d.Event.StreamID, "revision", it.d.Event.StreamRevision, "err", serr)
		}
		err = nil // the source owns the failure
	}
	if err != nil {
		x.fail(err)
		return
	}
	if it.tracked {
		x.completed(it.seq)
	}
}

// fail stops the run at its first failed event.
func (x *run) fail(err error) {
	x.failOnce.Do(func() {
		x.failure = fmt.Errorf("projector: runner %q stops: %w", x.r.name, err)
		x.halt.Store(true)
		x.stopRead()
	})
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
		cancel()
	}
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
