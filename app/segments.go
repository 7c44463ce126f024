package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/revgate/projector/internal/pace"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/retry"
)

// maxSegments bounds run --segments.
const maxSegments = 1024

// checkSegments refuses a --segments that cannot work: out of range,
// without leases, or with --group.
func (c *runConfig) checkSegments() error {
	switch {
	case c.segments < 1 || c.segments > maxSegments:
		return usageError("--segments %d: want 1 (each projection in one process at a time) to %d", c.segments, maxSegments)
	case c.segments > 1 && c.group != "":
		return usageError("--segments %d does not go with --group: a persistent subscription group shares its events among its consumers itself", c.segments)
	case c.segments > 1 && c.lease == 0:
		return usageError("--segments %d needs leases: each process holds the leases of its segments (give --lease, e.g. 15s)", c.segments)
	}
	return nil
}

// errSegmentCount: a process was given another number of segments than the
// projection's collection was split into by its first segmented run.
var errSegmentCount = errors.New("the projection runs in segments, and not as this process would run it")

// followSegments sets how many segments this process runs slot sl's
// projection in: --segments; without it, the number the collection's first
// segmented run recorded, when this process takes leases and consumes no
// group, so that the processes of a segmented projection need not repeat
// the number, and one process runs projections of different numbers.
func (s *session) followSegments(ctx context.Context, sl *slot, collection string) error {
	sl.segments = s.c.segments
	if !s.followsSegments() {
		return nil // given, or left to segmentCount to refuse
	}
	n, err := segment.Count(ctx, s.store.Database(), collection)
	if err != nil || n <= 1 {
		return err
	}
	sl.segments = n
	s.logger.Info("the projection runs in segments, as its first segmented run recorded: this process shares them",
		"projection", sl.name, "collection", collection, "segments", n)
	if !s.atomicWrites {
		s.logger.Warn(notExclusive, "projection", sl.name)
	}
	return nil
}

// followsSegments reports whether this process runs each projection in the
// number of segments its collection records (followSegments), rather than
// in one it was given.
func (s *session) followsSegments() bool {
	return !s.c.segmentsGiven && s.c.segments <= 1 && s.c.lease > 0 && s.c.group == ""
}

// refollowSegments reports whether slot sl, whose run ended with err, is
// to run again in another number of segments: its collection is split in
// another number than it ran in (a rebuild switched to one it split
// anew), and this process follows the recorded number.
func (s *session) refollowSegments(ctx context.Context, sl *slot, err error) bool {
	if !errors.Is(err, errSegmentCount) || !s.followsSegments() || ctx.Err() != nil {
		return false
	}
	was := sl.segments
	var coll string
	// Read again while MongoDB does not answer (as runs start again after
	// a wait), rather than stop the projection for good.
	ferr := retry.Do(ctx, refollowRetries, func(ctx context.Context) error {
		c, err := s.store.ActiveCollection(ctx, sl.name, sl.projection.Definition.Collection())
		if err == nil {
			coll, err = c, s.followSegments(ctx, sl, c)
		}
		if err != nil {
			s.logger.Warn("reading the number of segments of the projection's collection", "projection", sl.name, "err", err)
		}
		return err
	})
	if ferr != nil || sl.segments == was {
		return false
	}
	s.logger.Info("the projection's collection is split in another number of segments (a rebuild switched to it): this process follows",
		"projection", sl.name, "collection", coll, "segments", sl.segments, "was", was)
	sl.setDown("")
	return true
}

// refollowRetries paces refollowSegments' reads on a MongoDB that does not
// answer: some minutes, as runs that fail again and again (maxRunFailures).
var refollowRetries = retry.Policy{InitialDelay: time.Second, Multiplier: 2, MaxDelay: 30 * time.Second, MaxElapsed: 5 * time.Minute, MaxRetries: -1}

// segmentCount records the number of segments this process runs slot
// sl's projection in (followSegments) as the number of segments of
// collection, unless one is recorded, and refuses another number than the
// one recorded. In one process at a time nothing is recorded, and a
// collection recorded as segmented is refused: one a rebuild split since
// this process started, or one it cannot follow (without leases, or
// consumed by a group).
func (s *session) segmentCount(ctx context.Context, sl *slot, collection string) error {
	db := s.store.Database()
	var stored int
	var err error
	if sl.segments > 1 {
		stored, err = segment.Record(ctx, db, sl.name, collection, sl.segments)
	} else {
		stored, err = segment.Count(ctx, db, collection)
	}
	if err != nil {
		return err
	}
	if stored <= 1 || stored == sl.segments {
		return nil
	}
	bin := s.cli.name()
	head := fmt.Sprintf("projection %s (collection %s) runs in %d segments, as its first segmented run recorded in %s", sl.name, collection, stored, segment.CountCollection)
	var cure string
	switch {
	case s.c.segmentsGiven || s.c.segments > 1:
		cure = fmt.Sprintf("not %d: run it with --segments %d, or without --segments (a process then runs each projection in its recorded number)", s.c.segments, stored)
	case s.c.group != "":
		cure = "and a persistent group (--group) does not run a projection split in segments: run it without --group"
	case s.c.lease == 0:
		cure = "and its processes share the segments under leases: run it with --lease (e.g. 15s)"
	default:
		cure = "since this process started it: start the process again, and it runs the projection in its segments"
	}
	return fmt.Errorf("%w: %s, %s; to change the number, stop its processes, rebuild it (%s rebuild %s) and run the new collection with the new --segments",
		errSegmentCount, head, cure, bin, sl.name)
}

// segmentWork is what the processes sharing the segments of one collection
// do with those they hold: run --segments runs the projection's active
// collection for as long as it runs; rebuild --segments fills the building
// collection until every segment has caught up.
type segmentWork struct {
	// group names the segments' leases (segment.LeaseName) and the
	// heartbeats of the processes that share them.
	group string
	// run runs a runner over the segments held, its checkpoint store made
	// by cps (one for each runner it builds), until ctx is done or it
	// stops. A run that ends without an error before ctx is done has done
	// its segments (with done set): it is not started again until the set
	// of segments held changes.
	run func(ctx context.Context, cps func() *segmentCheckpoints) error
	// done reports that every segment is done: the processes stop. Nil
	// (run): never.
	done func(ctx context.Context) bool
}

// segments is what this process holds of a segmented projection (run
// --segments, rebuild --segments): the leases of its segments, renewed in
// the background, and, for the metrics, where it last stored each one's
// checkpoint.
type segments struct {
	s      *session
	sl     *slot
	work   segmentWork
	n      int
	logger *slog.Logger

	mu    sync.Mutex
	held  map[int]*heldLease
	saved map[int]savedSegment
	// changed is signalled when a held segment's checkpoint save was
	// refused: another process holds it now, and the run restarts
	// without it.
	changed chan struct{}
	// freeFor is, for each segment free at the last look (take), for how
	// many looks in a row it has been free.
	freeFor map[int]int
	// failures counts the runs in a row that failed for a reason that is
	// no event's (settle); a run that lasts resets it.
	failures int
	// standby is the holder of the projection's own lease, which this
	// process stands by for (take); "" when none holds it.
	standby string
	// retryAt is when a run that failed in a way that may pass runs again
	// (settle); zero when none waits.
	retryAt time.Time
	// away: this process waits for a rebuild's switch (another version
	// built the collection), counted out of the processes that share the
	// segments: its heartbeat stops meanwhile.
	away atomic.Bool
	// unanswered is why the last look at the processes failed (MongoDB
	// does not answer); nil when it did not.
	unanswered error
	// cut: this process cannot read the event store, and handed its
	// segments over (cutOff), counted out of the processes that share
	// them until it reads it again. unreadSince is since when its run has
	// not read it (zero: it does, or no run); the look that tells (reads)
	// is kept in read.
	cut         atomic.Bool
	unreadSince time.Time
	read        readLook
}

// readLook is the last look at whether a connected run reads the event
// store: when, how many events its runner had been delivered then, and
// what it found. answer, while not nil, brings whether the event store
// answered the look's read of the head, made on the side: the loop that
// balances the segments does not wait a lease for it.
type readLook struct {
	at     time.Time
	events uint64
	reads  bool
	answer chan bool
}

// segmentRun is one run of the runner over a set of segments.
type segmentRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	began  time.Time
}

// stop ends the run and waits for it: its runner stores the checkpoint
// under each of its segments still held (not under one whose lease was
// lost: see segmentCheckpoints.save). A nil run is stopped already.
func (r *segmentRun) stop() {
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
}

// doneChan is closed once the run has ended; nil (never ready) for no run.
func (r *segmentRun) doneChan() <-chan struct{} {
	if r == nil {
		return nil
	}
	return r.done
}

// keepSegments runs slot sl's projection split into --segments segments
// until ctx is done or it stops for good (shareSegments).
func (s *session) keepSegments(ctx context.Context, sl *slot) error {
	return s.shareSegments(ctx, sl, s.runWork(sl))
}

// runWork is the work of run --segments: slot sl's runner over the
// segments held, following the switches of its active collection.
func (s *session) runWork(sl *slot) segmentWork {
	return segmentWork{group: sl.name, run: func(ctx context.Context, cps func() *segmentCheckpoints) error {
		build := func(ctx context.Context, collection string) (*projector.Runner, error) {
			if err := s.segmentCount(ctx, sl, collection); err != nil {
				return nil, err
			}
			return s.cli.runner(ctx, s.c, sl, collection, s.client, timedStore{s.store, s.latency}, s.store, cps(), s.logger)
		}
		return sl.run(ctx, s.store, true, s.logger, s.cli.name(), build)
	}}
}

// shareSegments does work over slot sl's projection split into --segments
// segments until ctx is done, it stops for good, or every segment is done
// (work.done): this process keeps a heartbeat among the processes that
// share them, holds the leases of its fair share of the segments (taking
// free ones, letting go of those above its share), and runs one runner for
// the documents of the segments it holds, started again whenever that set
// changes. Stopping, it stores each segment's checkpoint and lets its
// leases and heartbeat go at once.
func (s *session) shareSegments(ctx context.Context, sl *slot, work segmentWork) error {
	g := &segments{s: s, sl: sl, work: work, n: sl.segments, logger: s.logger, held: map[int]*heldLease{}, saved: map[int]savedSegment{},
		changed: make(chan struct{}, 1)}
	sl.segs.Store(g)
	// The leases are renewed until they are let go, after the run has
	// stopped and stored its checkpoints, also once ctx is done.
	aliveCtx, stopAlive := context.WithCancel(context.WithoutCancel(ctx))
	alive := g.keepAlive(aliveCtx)
	var run *segmentRun
	defer func() {
		run.stop()
		g.releaseAll()
		stopAlive()
		<-alive
		g.leave()
	}()
	pacer := pace.New(restarts)
	poll := standbyPoll(s.c.lease)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	// Processes started together see each other before any takes a
	// segment, instead of the first taking them all and handing most of
	// them over a moment later (each hand-over restarts runs).
	st := sharing{joined: time.Now().Add(poll)}
	for ctx.Err() == nil {
		if run != nil && isClosed(run.done) {
			stop, err := g.ended(ctx, run, pacer)
			if st.idle, run = run.err == nil && work.done != nil, nil; stop {
				return err
			}
		}
		if g.finished(ctx) {
			return nil
		}
		var cut bool
		if run, cut = g.cutOff(ctx, run); !cut {
			run = g.tend(ctx, run, &st)
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		case <-g.changed:
		case <-run.doneChan():
		case <-g.retryDue(run):
		}
	}
	return nil
}

// rebalance brings the segments held to this process's share among the
// live processes (balance), and returns the run to go on with and the
// share; changed, when the set held changed (the run is then nil). When the
// processes cannot be read, the share stays as it was, but the segments
// whose lease was lost are dropped all the same.
func (g *segments) rebalance(ctx context.Context, run *segmentRun, want int) (_ *segmentRun, _ int, changed bool) {
	w, live, ok := g.want(ctx)
	if ok {
		run, changed = g.balance(ctx, w, live, run)
		return run, w, changed
	}
	if g.dropLost() {
		run.stop()
		return nil, want, true
	}
	return run, want, false
}

// sharing is where shareSegments's loop is: when this process may first
// take segments (joined), its share (want) and when the set it holds last
// changed (changedAt), and whether its run did every segment it holds
// (idle: work.done).
type sharing struct {
	joined, changedAt time.Time
	want              int
	idle              bool
}

// tend brings the segments held to this process's share, and starts a run
// over them when one is due (see settled); it returns the run to go on with.
func (g *segments) tend(ctx context.Context, run *segmentRun, st *sharing) *segmentRun {
	if time.Now().After(st.joined) {
		var changed bool
		if run, st.want, changed = g.rebalance(ctx, run, st.want); changed {
			st.idle, st.changedAt = false, time.Now()
		}
	}
	if run == nil && !st.idle && g.count() > 0 && g.settled(st.want, st.changedAt) && ctx.Err() == nil {
		run = g.startDue(ctx)
	}
	g.show()
	return run
}

// cutOff hands the segments this process holds over to the processes that
// can read the event store, where its run has not read it for two lease
// periods (reads: a process cut off from the event store, not from
// MongoDB, keeps renewing its leases, and its segments would wait for it
// while the others stand idle): it stops the run, lets every lease go and
// counts itself out of the processes (its heartbeat stops), until the
// event store answers it again. It returns the run to go on with, and
// whether this process is cut off (it takes no segment then).
func (g *segments) cutOff(ctx context.Context, run *segmentRun) (*segmentRun, bool) {
	if g.cut.Load() {
		if !g.readsEventStore(ctx) {
			return run, true
		}
		g.cut.Store(false)
		g.logger.Info("reads the event store again: takes its share of the segments", "projection", g.sl.name)
		return run, false
	}
	r := g.sl.cur.Load()
	if run == nil || r == nil || time.Since(run.began) < g.s.c.lease || g.reads(ctx, r) {
		g.unreadSince = time.Time{}
		return run, false
	}
	if g.unreadSince.IsZero() {
		g.unreadSince = time.Now()
	}
	if time.Since(g.unreadSince) < 2*g.s.c.lease {
		return run, false
	}
	g.logger.Warn("cannot read the event store: hands its segments over to the processes that can", "projection", g.sl.name,
		"for", time.Since(g.unreadSince).Round(time.Second))
	// Said first: once the leases are let go, the others may look.
	g.sl.setDown("retrying: this process cannot read the event store; it handed its segments over, and takes its share again once it reads it")
	g.cut.Store(true)
	g.unreadSince = time.Time{}
	run.stop()
	for _, k := range g.keys() {
		g.release(k, "this process cannot read the event store")
	}
	g.sl.leader.Store(false)
	g.leave()
	return nil, true
}

// reads reports whether runner r reads the event store: it is connected
// to it, and, looked at once a lease period, it was delivered events (or
// checkpoints) since the last look, or the event store answers this
// process within the lease. A subscription whose connection hangs (a
// network that drops its packets without closing it) can stay connected
// while nothing comes. The read of the head runs on the side: until it
// answers, or a lease has passed, the last look stands.
func (g *segments) reads(ctx context.Context, r *projector.Runner) bool {
	if !r.Connected() {
		return false
	}
	if g.read.answer != nil {
		select {
		case ok := <-g.read.answer:
			g.read.reads, g.read.answer = ok, nil
		default:
		}
		return g.read.reads
	}
	if time.Since(g.read.at) < g.s.c.lease {
		return g.read.reads
	}
	st := r.Stats()
	events := st.Events + st.Checkpoints // a filtered subscription's checkpoints say it is alive too
	if events != g.read.events {
		g.read = readLook{at: time.Now(), events: events, reads: true}
		return true
	}
	answer := make(chan bool, 1)
	go func() { answer <- g.answers(ctx, g.s.c.lease) }()
	g.read = readLook{at: time.Now(), events: events, reads: g.read.reads, answer: answer}
	return g.read.reads
}

// readsEventStore reports whether the event store answers this process
// (it reads the head of $all) within a third of the lease.
func (g *segments) readsEventStore(ctx context.Context) bool {
	return g.answers(ctx, g.s.c.lease/3)
}

// answers reports whether the event store answers a read of the head of
// $all within wait. A connected run's look waits a whole lease: a slow
// event store is not a lost one.
func (g *segments) answers(ctx context.Context, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_, err := g.s.client.Head(ctx)
	return err == nil
}

// finished reports whether every segment is done (work.done; never for
// run --segments).
func (g *segments) finished(ctx context.Context) bool {
	return g.work.done != nil && g.work.done(ctx)
}

// startDue starts a run over the segments held, unless a run that failed
// waits to run again (retryAt) until later: nil then.
func (g *segments) startDue(ctx context.Context) *segmentRun {
	if time.Now().Before(g.retryAt) {
		return nil
	}
	if !g.retryAt.IsZero() {
		g.retryAt = time.Time{}
		g.sl.setDown("")
	}
	return g.start(ctx)
}

// retryDue fires when a run that failed may run again, while none runs;
// nil (never) otherwise.
func (g *segments) retryDue(run *segmentRun) <-chan time.Time {
	if run != nil || g.retryAt.IsZero() {
		return nil
	}
	return time.After(time.Until(g.retryAt))
}

// ended judges a run that has ended on its own (settle), after a new run
// of failures begins if it ran a while.
func (g *segments) ended(ctx context.Context, run *segmentRun, pacer *pace.Pacer) (stop bool, _ error) {
	if time.Since(run.began) > restarts.MaxDelay {
		g.failures = 0
		pacer.Reset()
	}
	return g.settle(ctx, run.err, pacer)
}

// settled reports whether a run over the segments held may start: this
// process holds its share (want), or what it holds has not changed for a
// while (since changedAt). A process short of its share takes the
// segments the others let go of one after the other as their runs stop:
// it starts one run once they have come, rather than a run at each.
func (g *segments) settled(want int, changedAt time.Time) bool {
	return g.count() >= want || time.Since(changedAt) >= settleSegments(g.s.c.lease)
}

// settleSegments is how long a process short of its share of the
// segments waits for more before it runs those it holds.
func settleSegments(lease time.Duration) time.Duration { return max(lease/4, 100*time.Millisecond) }

// balance brings the segments held to want: it drops those lost, lets go
// of those above want (once the run, which stores their checkpoint, has
// stopped) and takes free ones up to want. It returns the run to go on
// with: nil, for a new one, when the set changed (changed).
func (g *segments) balance(ctx context.Context, want int, live []string, run *segmentRun) (_ *segmentRun, changed bool) {
	changed = g.dropLost()
	if g.count() > want {
		run.stop()
		run, changed = nil, true
		g.releaseAbove(want)
	}
	if g.count() < want && g.take(ctx, want-g.count(), live) {
		changed = true
	}
	if changed {
		run.stop()
		return nil, true
	}
	return run, false
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// maxRunFailures is how many runs of a projection's segments in a row may
// fail for a reason that is no event's (the store, the event store) before
// the process stops: with the waits between them (restarts), some minutes.
const maxRunFailures = 8

// settle judges how a run ended on its own (not stopped by keepSegments):
// stop reports that the projection stops here, with err; otherwise it runs
// again, after a wait for an event that may succeed later.
func (g *segments) settle(ctx context.Context, err error, pacer *pace.Pacer) (stop bool, _ error) {
	sl := g.sl
	var failed *projector.Error
	switch {
	case err == nil || ctx.Err() != nil:
		return ctx.Err() != nil, nil
	case errors.Is(err, errOtherVersion) && g.work.group == sl.name:
		// As a run without segments does (afterRun): it lets its segments
		// go, for a process that can run them, and follows the switch of
		// a rebuild by its version, counted out of the processes that
		// share the segments while it waits, so that the others take its
		// share.
		for _, k := range g.keys() {
			g.release(k, "another version built the collection")
		}
		away := func(on bool) {
			g.away.Store(on)
			if on {
				g.leave()
			}
		}
		if g.s.followVersion(ctx, sl, err, away) != nil {
			return true, err
		}
		return false, nil
	case errors.Is(err, errSegmentCount) && g.s.followsSegments():
		return true, err // followed (refollowSegments)
	case errors.Is(err, projector.ErrForeignCheckpoint) || errors.Is(err, errOtherVersion) || errors.Is(err, errSegmentCount):
		sl.setDown("blocked: " + err.Error())
		g.logger.Error("projection stopped; the other projections go on", "projection", sl.name, "err", err)
		return true, err
	case !errors.As(err, &failed):
		// The store or the event store failed (a run starts and stops
		// whenever the set of segments changes, each time with reads):
		// tried again after a wait, for a few minutes of failures in a
		// row; then the process stops, for a supervisor to see.
		if g.failures++; g.failures > maxRunFailures {
			return true, err
		}
	case !failed.Retryable():
		sl.setDown("blocked: " + firstLine(err.Error(), "the log"))
		err = blockedHint(err, sl.projection, sl.blocks.Load(), "run", g.s.c.policy)
		g.logger.Error("projection stopped at an event that failed for good; the other projections go on", errAttrs(err, "projection", sl.name)...)
		return true, err
	}
	if failed == nil {
		g.logger.Warn("a run of the projection's segments failed; it runs again after a wait", "projection", sl.name, "failures", g.failures, "err", err)
	}
	sl.setDown("retrying: " + firstLine(err.Error(), "the log"))
	pacer.Failed()
	if failed != nil {
		g.logger.Warn("projection stopped at an event that may succeed later; it runs again from its checkpoints", errAttrs(err, "projection", sl.name)...)
	}
	// Waited for in the loop of shareSegments, which goes on balancing
	// meanwhile: a process that joins gets its share at once.
	d, werr := pacer.Delay()
	if werr != nil {
		return true, err
	}
	g.retryAt = time.Now().Add(d)
	return false, nil
}

// keepAlive keeps this process's heartbeat among the projection's
// processes until ctx is done: once now, then every third of the lease.
// (Each segment's lease renews itself, as a projection's does.) The
// returned channel is closed once it has stopped.
func (g *segments) keepAlive(ctx context.Context) <-chan struct{} {
	ttl := g.s.c.lease
	db := g.s.store.Database()
	beats := 0
	once := func() {
		if g.away.Load() || g.cut.Load() {
			return // waiting for a switch, or cut off from the event store: counted out (see settle, cutOff)
		}
		bctx, cancel := context.WithTimeout(ctx, ttl/3)
		defer cancel()
		if err := segment.Beat(bctx, db, g.work.group, g.s.holder, ttl); err != nil && ctx.Err() == nil {
			g.logger.Warn("heartbeat", "projection", g.sl.name, "err", err)
		}
		if beats++; beats%30 == 1 {
			if err := segment.Forget(bctx, db, g.work.group, 10*ttl); err != nil && ctx.Err() == nil {
				g.logger.Warn("forgetting the heartbeats of processes gone", "projection", g.sl.name, "err", err)
			}
		}
	}
	once()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				once()
			}
		}
	}()
	return done
}

// want is how many segments this process aims to hold: its share among
// the live processes (segment.Share), which it returns too; false when
// they cannot be read.
func (g *segments) want(ctx context.Context) (int, []string, bool) {
	live, err := segment.Live(ctx, g.s.store.Database(), g.work.group)
	if err != nil {
		if ctx.Err() == nil {
			g.unanswered = err
			g.logger.Warn("reading the projection's processes", "projection", g.sl.name, "err", err)
		}
		return 0, nil, false
	}
	g.unanswered = nil
	rank, found := slices.BinarySearch(live, g.s.holder)
	p := len(live)
	if !found {
		p++ // its own heartbeat is not seen yet
	}
	return segment.Share(g.n, p, rank), live, true
}

// count is how many segments this process holds.
func (g *segments) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

// keys are the segments held, in order.
func (g *segments) keys() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(maps.Keys(g.held))
}

// dropLost forgets the segments whose lease was lost, and reports whether
// there were any.
func (g *segments) dropLost() bool {
	g.mu.Lock()
	var lost []*heldLease
	for k, h := range g.held {
		if h.isLost() {
			lost = append(lost, h)
			delete(g.held, k)
			delete(g.saved, k)
			g.logger.Warn("lost a segment's lease (another process took it, or it was not renewed in time): this process stops running it", "projection", g.sl.name, "segment", k, "token", h.token())
		}
	}
	g.mu.Unlock()
	for _, h := range lost {
		h.release() // stops renewing
	}
	return len(lost) > 0
}

// releaseAbove lets go of the segments held past the first want; the run
// that stored their checkpoints has stopped.
func (g *segments) releaseAbove(want int) {
	for _, k := range g.keys()[want:] {
		g.release(k, "above this process's share")
	}
}

// release lets go of the lease of segment k.
func (g *segments) release(k int, why string) {
	g.mu.Lock()
	h := g.held[k]
	delete(g.held, k)
	delete(g.saved, k)
	g.mu.Unlock()
	if h == nil {
		return
	}
	g.logger.Info("releases a segment's lease", "projection", g.sl.name, "segment", k, "token", h.token(), "why", why)
	h.release()
}

// take takes up to need free segments (not held, or expired) and reports
// whether it took any. A segment is tried by the live processes in turns
// (segment.Rank): the process of rank r once it has been free for r of its
// looks, so that processes looking at the same moment seldom try the same
// segment. It confirms those it took together a moment later: on a store
// whose conditional writes are not atomic (the embedded server) two takers
// can both match, and the one whose write did not stick lets go before it
// runs anything.
func (g *segments) take(ctx context.Context, need int, live []string) bool {
	leases, err := g.s.store.Leases(ctx, g.work.group)
	if err != nil {
		if ctx.Err() == nil {
			g.logger.Warn("reading the leases", "projection", g.sl.name, "err", err)
		}
		return false
	}
	now := time.Now()
	if g.standsBy(leases, now) {
		return false
	}
	free := map[int]int{}
	type turn struct{ k, rank int }
	var turns []turn
	for k := range g.n {
		// A lease this process lost and no other took is its own to take.
		if l := leases[segment.LeaseName(g.work.group, k, g.n)]; g.holds(k) || (l.Held(now) && l.Holder != g.s.holder) {
			continue
		}
		free[k] = g.freeFor[k] + 1
		if rank := segment.Rank(live, g.s.holder, k); rank < free[k] {
			turns = append(turns, turn{k, rank})
		}
	}
	g.freeFor = free
	slices.SortStableFunc(turns, func(a, b turn) int { return a.rank - b.rank })
	var taken []*heldLease
	var ks []int
	for _, tr := range turns {
		if len(taken) == need {
			break
		}
		if h, _, err := holdLease(ctx, g.s.store, segment.LeaseName(g.work.group, tr.k, g.n), g.s.holder, g.s.c.lease, g.logger); err == nil {
			taken, ks = append(taken, h), append(ks, tr.k)
		}
	}
	if !g.confirm(ctx, taken, ks) {
		return false
	}
	// Looked at again, now that the segments are held: a replay-parked
	// that took the projection's lease after the look above looks at the
	// segments' leases after it took its own, and finds these; this one
	// finds its lease. Either way they do not both run.
	again, err := g.s.store.Leases(ctx, g.work.group)
	why := "the projection's own lease is held"
	switch {
	case err != nil:
		why = "the projection's lease could not be read again: " + err.Error()
	case !g.standsBy(again, time.Now()):
		return true
	}
	for _, k := range ks {
		g.release(k, why)
	}
	return false
}

// standsBy reports whether another process holds the projection's own
// lease, among leases: a run without --segments (started before the
// projection was split), or replay-parked. It runs every document, and
// this process stands by until it ends.
func (g *segments) standsBy(leases map[string]mongostore.Lease, now time.Time) bool {
	if l := leases[g.sl.name]; g.work.group == g.sl.name && l.Held(now) && l.Holder != g.s.holder {
		if g.standby != l.Holder {
			g.logger.Info("standing by: a process holds the projection's own lease", "projection", g.sl.name, "holder", l.Holder, "until", l.Expires)
		}
		g.standby = l.Holder
		if g.count() == 0 {
			g.sl.setDown(fmt.Sprintf("standby: %s holds the projection's own lease (a run without --segments, or replay-parked)", l.Holder))
		}
		return true
	}
	if g.standby != "" {
		g.standby = ""
		g.sl.setDown("")
	}
	return false
}

// confirm confirms the leases just taken, together (heldLease.confirm),
// and keeps those still held; it reports whether it kept any.
func (g *segments) confirm(ctx context.Context, taken []*heldLease, ks []int) bool {
	ok := make([]bool, len(taken))
	var wg sync.WaitGroup
	for i, h := range taken {
		wg.Go(func() { ok[i] = h.confirm(ctx) })
	}
	wg.Wait()
	took := false
	for i, h := range taken {
		if !ok[i] {
			h.release()
			continue
		}
		g.mu.Lock()
		g.held[ks[i]] = h
		g.mu.Unlock()
		took = true
		g.logger.Info("holds a segment's lease", "projection", g.sl.name, "segment", ks[i], "of", g.n, "token", h.token())
	}
	return took
}

// holds reports whether this process holds segment k.
func (g *segments) holds(k int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.held[k]
	return ok
}

// start starts a run over the segments held now.
func (g *segments) start(ctx context.Context) *segmentRun {
	g.mu.Lock()
	held := maps.Clone(g.held)
	g.mu.Unlock()
	keys := slices.Sorted(maps.Keys(held))
	rctx, cancel := context.WithCancel(ctx)
	r := &segmentRun{cancel: cancel, done: make(chan struct{}), began: time.Now()}
	g.logger.Info("runs segments", "projection", g.sl.name, "segments", intsString(keys), "of", g.n)
	cps := func() *segmentCheckpoints { return &segmentCheckpoints{g: g, held: held, keys: keys} }
	go func() {
		defer close(r.done)
		r.err = g.work.run(rctx, cps)
	}()
	return r
}

// show tells the slot's readiness and metrics whether this process runs
// any segment: none while MongoDB does not answer its looks is retrying,
// not standing by.
func (g *segments) show() {
	n := g.count()
	g.sl.leader.Store(n > 0 && !g.lostAll()) // as projector_segment_owned, which counts no lost lease
	down := g.sl.down.Load()
	switch {
	case n == 0 && g.unanswered != nil:
		g.sl.setDown("retrying: MongoDB does not answer, so this process holds none of the segments: " + firstLine(g.unanswered.Error(), "the log"))
	case n == 0:
		g.sl.setDown(fmt.Sprintf("standby: this process holds none of the %d segments", g.n))
	case down != nil && (strings.HasPrefix(*down, "standby") || strings.HasPrefix(*down, "retrying: MongoDB does not answer")):
		g.sl.setDown("")
	}
}

// lostAll reports whether this process has lost the lease of every
// segment it holds (none renewed in time: MongoDB does not answer it, or
// another process took them) before its look drops them (dropLost), which
// waits on MongoDB too.
func (g *segments) lostAll() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, h := range g.held {
		if !h.isLost() {
			return false
		}
	}
	return len(g.held) > 0
}

// releaseAll lets go of every segment held, at once, so that the other
// processes take them without waiting for their leases to expire. The run
// has stopped.
func (g *segments) releaseAll() {
	var wg sync.WaitGroup
	for _, k := range g.keys() {
		wg.Go(func() { g.release(k, "stopping") }) // together: a stop waits letGoWait at most
	}
	wg.Wait()
	g.sl.leader.Store(false)
}

// leave lets go of this process's heartbeat: the others count it out at
// once.
func (g *segments) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), min(g.s.c.lease, letGoWait))
	defer cancel()
	if err := segment.Leave(ctx, g.s.store.Database(), g.work.group, g.s.holder); err != nil {
		g.logger.Warn("leaving the projection's processes", "projection", g.sl.name, "err", err)
	}
}

// savedSegment is what this process last stored of a segment it holds:
// its checkpoint's position, and how many events of its documents that
// checkpoint has passed (segmentCheckpoints).
type savedSegment struct{ position, events uint64 }

// noteSaved records that segment k's checkpoint was stored at position,
// having passed events of its documents.
func (g *segments) noteSaved(k int, position, events uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.held[k]; !ok {
		return
	}
	// A save below the stored checkpoint leaves it where it is (it never
	// moves back): a run resumes from the lowest of its segments.
	if cur, ok := g.saved[k]; !ok || position > cur.position {
		g.saved[k] = savedSegment{position, events}
	}
}

// Segments is what the metrics show of the segments: how many the
// projection has, and of those this process holds, what it last stored of
// each one (absent before the first store).
func (g *segments) Segments() (n int, held map[int]*savedSegment) {
	g.mu.Lock()
	defer g.mu.Unlock()
	held = make(map[int]*savedSegment, len(g.held))
	for k, h := range g.held {
		if h.isLost() {
			continue // not run here any more, though not dropped yet (dropLost)
		}
		if p, ok := g.saved[k]; ok {
			held[k] = &p
		} else {
			held[k] = nil
		}
	}
	return g.n, held
}

// intsString is "1,4,7".
func intsString(ks []int) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = strconv.Itoa(k)
	}
	return strings.Join(parts, ",")
}
