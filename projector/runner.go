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
// in parallel. An engine of one projection whose documents are fed by many
// streams (a strategy other than [StreamRevision]) has its events spread by
// document instead, so that a document's events meet in one worker's
// batches. The checkpoint moves only over a prefix of deliveries that are
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
	// idsWindow, when above 0, is the most deliveries that may follow the
	// stored checkpoint, and saveAt how many passed make the runner store
	// it (see smallestWindow).
	idsWindow, saveAt int
	reconnect         retry.Policy
	drain             time.Duration
	batch             int
	window            time.Duration
	batchBytes        int
	logger            *slog.Logger
	seed              maphash.Seed

	running   atomic.Bool
	caughtUp  atomic.Bool                    // the source said it reached the head
	ready     atomic.Bool                    // and everything up to there was handled
	halting   atomic.Bool                    // the run is stopping: what is queued is abandoned
	busy      atomic.Pointer[[]atomic.Int64] // the workers of the current run: since when each is busy
	connected atomic.Bool                    // a subscription is open
	inFlight  atomic.Int64                   // events dispatched and not yet handled
	latest    atomic.Int64                   // creation time (Unix ns) of the newest event handled
	counts    struct {
		events, checkpoints, applied, duplicates, skipped, parked, held, failed atomic.Uint64
		parkedLater                                                             atomic.Uint64
		waits                                                                   atomic.Uint64
		abandoned, saved, subscriptions, drops, batches, batched                atomic.Uint64
		unrouted                                                                atomic.Uint64
		// elsewhere: events passed over as other processes' documents' (a
		// checkpoint store of some documents only).
		elsewhere atomic.Uint64
	}
	unknown unknownTypes // events of types nobody registered, by type
	// setAside: the events skipped with no document (their projection
	// could not route them) or parked, by projection: counted so once, and
	// as duplicates when delivered again (a record parked again is the
	// same record).
	setAside eventsSeen
	saveMu   sync.Mutex // one save at a time
	savedMu  sync.Mutex // guards saved
	saved    *Checkpoint
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
// stores it. An engine with a [HandledIDs] projection has it stored, too,
// once it has passed half the smallest window of such a projection, so
// that what a crash replays stays within the window.
func WithCheckpointEvery(events int, interval time.Duration) RunnerOption {
	return func(r *Runner) { r.every, r.interval = events, interval }
}

// WithReconnect sets the policy for subscribing again after a drop or while
// the server is unreachable (default [DefaultReconnect]). When it runs out,
// Run returns the error.
func WithReconnect(p retry.Policy) RunnerOption { return func(r *Runner) { r.reconnect = p } }

// The runner's default batching: see [WithBatch] and [WithBatchBytes].
const (
	DefaultBatch       = 1000
	DefaultBatchWindow = 20 * time.Millisecond
	DefaultBatchBytes  = 16 << 20
)

// holdWindows bounds how long a batch is held while events keep coming, in
// windows: see [WithBatch].
const holdWindows = 10

// WithBatch sets how many queued events a worker folds and writes together
// (default 1000; 1 turns batching off), and, while the source is behind its
// head, how long a worker whose batch is not full waits for its next event
// before it writes what it has (default 20ms). A batch is never held longer
// than 10 windows in all. Behind the head, events keep coming and batches are
// large, so that each document is written once for many events. At the head
// events are handled as they arrive, one at a time, or as many as queued
// while a worker wrote; a worker whose next event waited in its queue
// longer than the window (a burst of appends coming faster than it writes)
// batches as while catching up, waiting up to the window for each next
// event, and in all no longer than that event has waited (at most 10
// windows): a late event is at most twice as late.
//
// An engine of one projection whose documents are fed by many streams (a
// strategy other than [StreamRevision]) gives each document's events to one
// worker, and its batches while catching up hold up to size documents
// rather than events (up to 20 times size in events, and the batch bytes),
// for up to 100 windows: a summary costs its writes, and one write can take
// thousands of its events.
func WithBatch(size int, window time.Duration) RunnerOption {
	return func(r *Runner) { r.batch, r.window = size, window }
}

// WithBatchBytes bounds a batch by the size of its events' data and
// metadata as well as by their number (default 16 MiB): a worker stops
// adding events once its batch holds this many bytes, so that the memory
// batches take depends on the settings, whatever the size of the events.
func WithBatchBytes(n int) RunnerOption { return func(r *Runner) { r.batchBytes = n } }

// WithDrainTimeout bounds how long a stopping runner waits for the events being
// handled (default 30s); past it they are abandoned, uncheckpointed: their
// context is cancelled, and [Runner.Run] returns once they return. A
// projection's step has no context: one that never returns holds Run (the
// runner says so at error level 5 s after the timeout; the projector
// command gives up on it 30 s after, and exits 1). A wait
// for a predecessor (the gate's) is not waited for: it ends as the runner
// starts stopping, and its event is left for the next run.
func WithDrainTimeout(d time.Duration) RunnerOption { return func(r *Runner) { r.drain = d } }

// Check reports, before anything connects, what [NewEngine] and [NewRunner]
// would refuse of projection p run under failure policy pol (the engine's,
// [WithFailurePolicy]; p's own, set with [Projection.OnFailure], wins), from
// a source that delivers the log in order to one consumer ([OrderedSource]; a
// catch-up subscription) or not (a persistent subscription group), with the
// runner options opts. A command line checks its flags with it.
//
// The global-position strategy needs an ordered source and one worker; the
// [Hold] policy needs an ordered source, since in a group a consumer cannot
// know that another holds a document, and a strategy that keeps the
// document's revision. Where the engine records parked or held events is
// checked by NewEngine only.
func Check(p Definition, pol FailurePolicy, ordered bool, opts ...RunnerOption) error {
	r := newRunner(opts)
	if err := r.checkSettings(); err != nil {
		return fmt.Errorf("projector: projection %q: runner: %w", p.Name(), err)
	}
	if err := checkFailurePolicy(p, pol); err != nil {
		return err
	}
	return checkSource(p, pol, ordered, r.workers)
}

// checkSource reports whether projection p, under failure policy pol, can
// run from an ordered source or not, with workers workers ([Check]).
func checkSource(p Definition, pol FailurePolicy, ordered bool, workers int) error {
	if own, ok := p.failurePolicy(); ok {
		pol = own
	}
	switch {
	case p.Strategy().NeedsOrderedSource() && !ordered:
		return fmt.Errorf("projection %q uses the %s strategy, which needs one consumer reading the log in order: "+
			"a catch-up subscription, not a persistent subscription group", p.Name(), p.Strategy())
	case p.Strategy().NeedsOrderedSource() && workers != 1:
		return fmt.Errorf("projection %q uses the %s strategy, which needs one consumer reading the log in order: "+
			"one worker, not %d", p.Name(), p.Strategy(), workers)
	case pol == Hold && !ordered:
		return fmt.Errorf("projection %q holds the documents of failed events (the hold policy), which needs one consumer "+
			"reading the log in order: a catch-up subscription, not a persistent subscription group, where a consumer "+
			"cannot know that another holds a document", p.Name())
	}
	return nil
}

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
// subscription); with an ordered source (a catch-up subscription), nil
// makes each start read the log from its beginning, and NewRunner warns. A checkpoint store whose checkpoints cover some of the
// projection's documents only, which it says with a method NeedsEvent(id
// string, at Checkpoint) bool (the store of one process's segments of a
// projection shared by several, each segment from its own checkpoint), has
// the runner hand its engine only the events it needs; the others pass as
// checkpoints. It logs with the engine's logger. It refuses settings that
// cannot work, and a projection that needs what the source does not give
// ([Check]: the log in order, one worker). An engine made without a stream
// reader ([WithStreamReader]) gets the source's, when the source reads its
// event store's streams (a [StreamHistory]: the catch-up sources of package
// subscription are): it must be given to NewRunner before it handles any
// event. Without one, NewRunner logs what the engine goes without.
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
	o, ok := source.(OrderedSource)
	ordered := ok && o.Ordered()
	for _, p := range engine.projections {
		if err := checkSource(p, engine.policyOf(p), ordered, r.workers); err != nil {
			return nil, fmt.Errorf("projector: runner %q: %w", name, err)
		}
	}
	if f, ok := source.(TypeFilteringSource); ok && f.FiltersEventTypes() {
		for _, p := range engine.projections {
			if p.Strategy().NeedsEveryRevision() {
				return nil, fmt.Errorf("projector: runner %q: the source filters events by type, which leaves holes in each stream's revisions; "+
					"the %s strategy of projection %q would wait for them forever: filter by stream name instead, "+
					"or use a strategy that needs no revision order (HandledIDs, Inbox, None)", name, p.Strategy(), p.Name())
			}
		}
	}
	r.logger = engine.logger.With("runner", name)
	if checkpoints == nil && ordered {
		r.logger.Warn("the runner has no checkpoint store, and its source resumes from the position the runner gives it: " +
			"each start reads the log from its beginning (give NewRunner a CheckpointStore; nil is for a source that keeps its own position, " +
			"a persistent subscription group)")
	}
	r.lendStreams(engine, source)
	if err := r.keepDocuments(); err != nil {
		return nil, fmt.Errorf("projector: runner %q: %w", name, err)
	}
	r.warnWindows()
	if n := smallestWindow(engine); n > 0 && checkpoints != nil {
		r.idsWindow, r.saveAt = n, max(n/2, 1)
	}
	return r, nil
}

// smallestWindow is the smallest [HandledIDs] window of e's projections
// (0: none). A document under HandledIDs may be written with events past
// the stored checkpoint (a batch's write; one held back, written by a
// flush of its store at its limit, or before an event handled alone), and
// after a crash those events come again: the window must still hold them.
// So a runner with a checkpoint store stores its checkpoint once half the
// window has passed, as it does every [WithCheckpointEvery] events (and
// holds none back past that while catching up: see behindSave), and its
// reader waits while a window of deliveries follow the stored checkpoint
// (withinLag).
func smallestWindow(e *Engine) int {
	n := 0
	for _, p := range e.projections {
		if h, ok := keeperOf(p).(handledIDs); ok && (n == 0 || h.window < n) {
			n = h.window
		}
	}
	return n
}

// warnWindows warns of a [HandledIDs] window that the runner's workers can
// overrun. An engine that does not spread its events by document (of
// several projections, or on a store without guarded batch writes)
// spreads them over the workers by stream, so a document fed by streams
// of several workers sees their events out of log order, by up to about
// what the workers hold; past its window, an event is refused as older
// than the window (ErrOutsideWindow) and the runner stops, typically early
// in a catch-up. A document fed by one stream meets its events in one
// worker, in order, so this is a warning, not a refusal. One worker, or an
// engine that spreads its events by document, hands each document its
// events in log order.
func (r *Runner) warnWindows() {
	e := r.engine
	if r.workers == 1 || e.byDocument() {
		return
	}
	held := r.buffer + 1 // a worker's queue, and the event it handles
	if r.batch > 1 && e.batchable() {
		held = r.buffer + r.batch
	}
	inFlight := r.workers * held
	for _, p := range e.projections {
		h, ok := keeperOf(p).(handledIDs)
		if !ok || h.window >= inFlight {
			continue
		}
		fix := "give the projection an engine of its own (a document's events then meet in one worker), or the runner one worker (WithWorkers(1))"
		if !e.batchable() {
			fix = "its store writes no guarded batches, so the engine cannot give a document's events to one worker: give the runner one worker (WithWorkers(1))"
		}
		r.logger.Warn("a handled-ids window smaller than the events the workers can hold: a document fed by several streams would meet events "+
			"out of log order by more than its window, refuse them (ErrOutsideWindow) and stop the runner; "+fix+", or a larger window",
			"projection", p.Name(), "window", h.window, "workers", r.workers, "in_flight", inFlight)
	}
}

// newRunner returns a runner with the default settings and opts applied.
func newRunner(opts []RunnerOption) *Runner {
	r := &Runner{
		workers: DefaultWorkers, buffer: 1024, every: 500, interval: time.Second,
		reconnect: DefaultReconnect(), drain: 30 * time.Second, batch: DefaultBatch, window: DefaultBatchWindow, batchBytes: DefaultBatchBytes,
		seed: maphash.MakeSeed(),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// The largest settings a runner takes: past them its queues and workers
// would take the process's memory, not speed it up.
const (
	maxWorkers    = 1024
	maxBuffer     = 1 << 20 // events queued a worker
	maxBatch      = 100_000 // events a batch (documents, for an engine spread by document)
	maxBatchBytes = 1 << 30
)

// checkSettings reports settings a runner cannot work with.
func (r *Runner) checkSettings() error {
	switch {
	case r.workers < 1 || r.buffer < 1:
		return fmt.Errorf("workers and buffer must be >= 1, got %d and %d", r.workers, r.buffer)
	case r.workers > maxWorkers:
		return fmt.Errorf("workers must be at most %d, got %d", maxWorkers, r.workers)
	case r.buffer > maxBuffer:
		return fmt.Errorf("buffer must be at most %d events, got %d", maxBuffer, r.buffer)
	case r.batch > maxBatch:
		return fmt.Errorf("a batch must be at most %d events, got %d", maxBatch, r.batch)
	case r.batchBytes > maxBatchBytes:
		return fmt.Errorf("a batch must be at most %d MiB, got %d MiB", maxBatchBytes>>20, r.batchBytes>>20)
	case r.every < 1 || r.interval <= 0:
		return fmt.Errorf("checkpoint every %d events / %v: both must be > 0", r.every, r.interval)
	case r.drain <= 0:
		return errors.New("drain timeout must be > 0")
	case r.batch < 1 || r.window < 0 || r.batchBytes < 1:
		return errors.New("batch size and bytes must be >= 1 and its window >= 0")
	}
	if err := r.reconnect.Validate(); err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	return nil
}

// Name returns the runner's name.
func (r *Runner) Name() string { return r.name }

// CaughtUp reports whether the runner has handled everything up to the head
// of its source's log since it last subscribed: the source has said it
// reached the head, and every event delivered up to that one has been
// handled (events delivered since, while live appends go on, are not
// waited for). Live events in flight afterwards do not make it false; a
// drop does.
// An event (or batch) that has been handled for longer than the engine's
// retry policy can wait, plus a second, is stuck: the runner is not caught
// up while it is.
func (r *Runner) CaughtUp() bool { return r.ready.Load() && r.stuck() == 0 }

// stuck returns for how long the longest-busy worker has been on what it
// handles, when that is longer than the engine's retry policy can wait plus
// a second; 0 otherwise.
func (r *Runner) stuck() time.Duration {
	busy := r.busy.Load()
	if busy == nil {
		return 0
	}
	limit := r.engine.policy.MaxWait() + time.Second
	now := time.Now().UnixNano()
	for i := range *busy {
		if since := (*busy)[i].Load(); since != 0 && time.Duration(now-since) > limit {
			return time.Duration(now - since)
		}
	}
	return 0
}

// Connected reports whether a subscription is open. For a source that never
// says it has reached a head (a persistent subscription group), this is what
// readiness can mean.
func (r *Runner) Connected() bool { return r.connected.Load() }

// settled latches readiness once the source is at the head and every
// delivery up to the one that reached it is handled (or nothing is in
// flight): events delivered since, while live appends go on, do not hold
// it back.
func (x *run) settled() {
	r := x.r
	if r.halting.Load() {
		return // events left alone are not handled: not caught up
	}
	if !r.caughtUp.Load() {
		return
	}
	at := x.headAt.Load()
	if !(r.inFlight.Load() == 0 || at > 0 && x.tr.passed(at)) || r.ready.Load() {
		return
	}
	// What was held back behind the head is written before the runner says
	// it is caught up: its readers then see every event up to the head.
	if err := x.flush(x.workCtx, false); err != nil { // (its own timeout)
		r.logger.Warn("caught up, but writing the documents held back failed: not ready yet", "err", err)
		return
	}
	if !r.ready.Swap(true) {
		if !r.caughtUp.Load() {
			r.ready.Store(false) // a drop came in between: behind again
			return
		}
		r.logger.Info("caught up")
		// Said of a run that read the log from its beginning only: one
		// resumed near the head may meet a few events its projections
		// leave alone, and nothing else, rightly.
		if n := r.counts.events.Load(); x.fromStart && n > 0 && r.counts.unrouted.Load() == n && r.counts.elsewhere.Load() == 0 {
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
	// (queued, or waiting for a predecessor; the checkpoint stayed before
	// them, and a persistent group's were not settled).
	Abandoned uint64
	// Unrouted: events delivered that no projection of the engine wanted
	// (its IDFunc left them alone).
	Unrouted uint64
	// Results of the events, summed over projections.
	Applied, Duplicates, Skipped, Parked, Held, Failed uint64
	// ParkedLater: events parked after their delivery, which passed them
	// over (counted in Unrouted, or with the results of other projections,
	// then): the events of a tied stream that its router declined before
	// any of its events named a document, parked once a later one named it
	// and it moved past them (under park and hold). Parked events all the
	// same: add them to Parked to count every event parked.
	ParkedLater uint64
	// Waits of the gate, summed over events.
	Waits uint64
	// Saved is how many checkpoints were stored; Checkpoint is the last one.
	Saved      uint64
	Checkpoint *Checkpoint
	// Subscriptions opened, and how many of them dropped.
	Subscriptions, Drops uint64
	// CaughtUp is [Runner.CaughtUp] when the stats were taken: false once
	// Run has returned (a runner that does not run is behind whatever
	// comes); whether it ever caught up is in its log.
	CaughtUp bool
	// Latest is the creation time of the newest event handled: how far the
	// runner has got, in the source's time.
	Latest time.Time
	// Batches handled together (catching up, or in a burst at the head), and
	// the events in them.
	Batches, Batched uint64
	// UnknownTypes counts the events delivered of types nobody registered,
	// by type, each once in this runner (by its id, among the last 16,384
	// counted: not a redelivery; a runner started again counts again the
	// events it reads again; nil when none): the projections pass
	// over them, or fail them ([Projection.FailUnknownTypes]). A type close
	// to a registered one ([Registry.Near]) is said in the log.
	UnknownTypes map[string]uint64
}

// Stats returns the runner's counters.
func (r *Runner) Stats() RunnerStats {
	c := &r.counts
	s := RunnerStats{
		Events: c.events.Load(), Checkpoints: c.checkpoints.Load(), Abandoned: c.abandoned.Load(), Unrouted: c.unrouted.Load(),
		Applied: c.applied.Load(), Duplicates: c.duplicates.Load(), Skipped: c.skipped.Load(), Parked: c.parked.Load(), Held: c.held.Load(), Failed: c.failed.Load(),
		ParkedLater: c.parkedLater.Load(),
		Waits:       c.waits.Load(), Saved: c.saved.Load(),
		Subscriptions: c.subscriptions.Load(), Drops: c.drops.Load(), CaughtUp: r.CaughtUp(),
		Batches: c.batches.Load(), Batched: c.batched.Load(), UnknownTypes: r.unknown.snapshot(),
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
// lets the events being handled finish (bounded by the drain timeout; a wait
// for a predecessor ends at once, and its event is left for the next run),
// stores the checkpoint, and returns: nil when ctx was canceled, else the
// error. A runner runs once at a time.
func (r *Runner) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return fmt.Errorf("projector: runner %q is already running", r.name)
	}
	defer r.running.Store(false)
	r.engine.ran.Store(true)
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
	r.halting.Store(false)
	x := &run{r: r, tr: newTracker(from), saveNow: make(chan struct{}, 1), bounds: r.boundsOf(), fromStart: from == nil}
	if err := x.anchor(ctx, from); err != nil || ctx.Err() != nil {
		if rec, ok := r.checkpoints.(ErrorRecorder); ok && err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
			if rerr := rec.RecordError(rctx, r.name, err.Error()); rerr != nil {
				r.logger.Warn("recording the error", "err", rerr)
			}
			cancel()
		}
		return err
	}
	r.logger.Info("runner starts", "from", checkpointAttr(from), "workers", r.workers)
	return x.execute(ctx)
}

// anchor finds what identifies the source's log, and checks that the stored
// checkpoint from is a position of it; reads are retried under the
// reconnect policy while the server does not answer.
func (x *run) anchor(ctx context.Context, from *Checkpoint) error {
	r := x.r
	a, ok := r.source.(AnchoredSource)
	if !ok {
		return nil
	}
	log, err := retry.DoValue(ctx, r.reconnect, a.Log)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("projector: runner %q: reading the start of the log: %w", r.name, err)
	}
	x.log = log
	if from == nil {
		return nil
	}
	err = retry.Do(ctx, r.reconnect, func(ctx context.Context) error {
		err := a.Check(ctx, *from)
		if errors.Is(err, ErrForeignCheckpoint) {
			return retry.Permanent(err)
		}
		return err
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("projector: runner %q: checkpoint %s: %w; nothing was projected. "+
			"Rebuild the projection, or, to start it over in place, delete its checkpoint "+
			"(the %q record of projector_checkpoints) and its collection", r.name, from, err, r.name)
	}
	return nil
}

func checkpointAttr(c *Checkpoint) string {
	if c == nil {
		return "start"
	}
	return c.String()
}

// lendStreams gives engine the stream history of source when the engine has
// no stream reader, no runner has run it yet, and the source reads streams;
// else it logs what the engine goes without.
func (r *Runner) lendStreams(engine *Engine, source Source) {
	if engine.streamReader() != nil {
		return
	}
	if h, ok := source.(StreamHistory); ok && !engine.ran.Load() && engine.readers.CompareAndSwap(nil, &streamReaders{h, h}) {
		r.logger.Debug("the engine reads the source's streams: stream folds and holes")
		return
	}
	for _, p := range engine.projections {
		if _, gated := keeperOf(p).(streamRevision); gated {
			r.logger.Info("the engine has no stream reader (WithStreamReader), and the source reads no streams: "+
				"a catch-up writes each document once per batch that holds its events, not once, and a stream's "+
				"missing or deleted events are waited for until the retries run out", "projection", p.Name())
			return
		}
	}
}
