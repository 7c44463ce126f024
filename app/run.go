package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/internal/pace"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// runConfig is the command line of run.
type runConfig struct {
	servers
	projections, group, httpAddr     string
	logFormat, logLevel, onFailure   string
	checkpointInterval, drainTimeout time.Duration
	lease                            time.Duration
	segments                         int
	segmentsGiven                    bool // --segments (or its variable) was given: no projection follows its recorded number
	workers, checkpointEvery, batch  int
	batchMiB, eventSpans             int
	batchWindow                      time.Duration
	retry                            retry.Policy
	policy                           projector.FailurePolicy
	selected                         []Projection
}

func (x *cli) runFlags(c *runConfig, inv Invocation) *flag.FlagSet {
	fs := inv.FlagSet("[flags]  (every flag can also be set as " + inv.EnvPrefix + "<FLAG>, e.g. " + inv.EnvPrefix + "ESDB)")
	c.register(fs, x, "EventStoreDB or KurrentDB connection string: esdb://localhost:2113?tls=false, or kurrentdb:// (also kurrent://, kdb://) (required)")
	fs.StringVar(&c.projections, "projections", "", "comma-separated projections to run (default: all: "+strings.Join(x.cat.names(), ", ")+")")
	fs.StringVar(&c.group, "group", "", "consume persistent subscription groups instead of catch-up subscriptions: one per projection, named `GROUP`-<projection> (created if missing)")
	fs.StringVar(&c.httpAddr, "http", "localhost:9090", "address of /metrics, /healthz and /readyz (empty: no HTTP server)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.onFailure, "on-failure", "block", "an event that fails permanently: block (its document waits; catch-up stops), hold (its document waits and its later events are recorded behind it in projector_parked, the others go on; replay-parked applies them), park (recorded in projector_parked for replay-parked, the document moves past it) or skip (the document moves past it); a projection's own OnFailure wins")
	fs.DurationVar(&c.drainTimeout, "drain-timeout", 20*time.Second, "on SIGTERM, how long events being handled may take to finish (the stop then takes 20s more at most: the checkpoints' stores, the leases and heartbeat let go; a step that never returns is given up on 30s after it, exit 1)")
	fs.DurationVar(&c.lease, "lease", defaultLease, "each projection runs in one process at a time, which holds its lease in MongoDB and renews it; another process stands by and takes over within this time after the holder dies (0: no leases, for a single process; with --group, the consumers take none whatever it is, and stop while another process holds it: replay-parked, which they look for every second)")
	fs.IntVar(&c.segments, "segments", 1, "split each projection's documents into this many segments, by a hash of the document id, shared by the processes that run it, each holding the leases of its share (needs --lease; set once per projection: its first segmented run records it, and a process without --segments runs each projection in its recorded number)")
	fs.IntVar(&c.workers, "workers", projector.DefaultWorkers, "events handled at once per projection (one stream's events stay in order); a projection's own Workers wins")
	batchFlags(fs, &c.batch, &c.batchWindow, &c.batchMiB)
	eventSpansFlag(fs, &c.eventSpans)
	fs.IntVar(&c.checkpointEvery, "checkpoint-every", 500, "store the checkpoint after this many events")
	fs.DurationVar(&c.checkpointInterval, "checkpoint-interval", time.Second, "and at least this often while it moves")
	retryFlags(fs, &c.retry, "retry-", "revision gate retries")
	return fs
}

// checkRun reports settings that cannot work, before any I/O: the
// projections selected, the failure policy, the retries, and each
// projection's runner settings.
func (x *cli) checkRun(c *runConfig, inv Invocation) error {
	var err error
	if c.selected, err = x.cat.selected(c.projections); err != nil {
		return usageError("%v", err)
	}
	if c.policy, err = parsePolicy(c.onFailure); err != nil {
		return usageError("%v", err)
	}
	if err := c.retry.Validate(); err != nil {
		return usageError("--retry-*: %v", err)
	}
	if err := c.checkFlags(); err != nil {
		return err
	}
	for _, p := range c.selected {
		if err := c.checkProjection(p); err != nil {
			return err
		}
	}
	return c.servers.check(inv, true, x.Embedded != nil)
}

// checkFlags reports the flags' own values that cannot work, in their names
// (a projection's own settings are checked by checkProjection, in its
// name).
func (c *runConfig) checkFlags() error {
	if err := checkBatch(c.workers, c.batch, c.batchWindow, c.batchMiB); err != nil {
		return err
	}
	switch {
	case c.checkpointEvery < 1 || c.checkpointInterval <= 0:
		return usageError("--checkpoint-every %d, --checkpoint-interval %v: want at least 1 event and a duration above 0", c.checkpointEvery, c.checkpointInterval)
	case c.drainTimeout <= 0:
		return usageError("--drain-timeout %v: want a duration above 0", c.drainTimeout)
	}
	if err := checkEventSpans(c.eventSpans); err != nil {
		return err
	}
	if err := c.checkHTTP(); err != nil {
		return err
	}
	if err := checkLease(c.lease, "no leases"); err != nil {
		return err
	}
	return c.checkSegments()
}

// checkHTTP refuses an --http that is not an address to listen on (empty:
// no HTTP server).
func (c *runConfig) checkHTTP() error {
	if c.httpAddr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(c.httpAddr)
	if err != nil {
		return usageError("--http %q: want host:port or :port (%v)", c.httpAddr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usageError("--http %q: %v", c.httpAddr, err)
	}
	return nil
}

// checkProjection reports the settings of projection p that cannot work:
// its runner's, the failure policy, and its subscription's.
func (c *runConfig) checkProjection(p Projection) error {
	opts := c.runnerOptions(p)
	if err := projector.Check(p.Definition, c.policy, true, opts...); err != nil {
		if c.policy == projector.Hold && len(c.selected) > 1 && projector.Check(p.Definition, projector.Block, true, opts...) == nil {
			return usageError("%v (--on-failure is every projection's: name the others with --projections, "+
				"or give the projections that can hold it as their own, with OnFailure(projector.Hold))", err)
		}
		return usageError("%v", err)
	}
	if err := projector.Check(p.Definition, c.policy, c.group == "", opts...); err != nil {
		return usageError("--group %s: %v", c.group, err)
	}
	return nil
}

// runnerOptions are the settings of p's runner: its own, else the flags'.
func (c *runConfig) runnerOptions(p Projection) []projector.RunnerOption {
	return []projector.RunnerOption{
		projector.WithWorkers(p.workers(c.workers)), projector.WithCheckpointEvery(c.checkpointEvery, c.checkpointInterval),
		projector.WithBatch(orDefault(p.Batch, c.batch), c.batchWindow), projector.WithBatchBytes(c.batchMiB << 20), projector.WithDrainTimeout(c.drainTimeout),
	}
}

func parsePolicy(s string) (projector.FailurePolicy, error) {
	switch s {
	case "block":
		return projector.Block, nil
	case "skip":
		return projector.Skip, nil
	case "park":
		return projector.Park, nil
	case "hold":
		return projector.Hold, nil
	}
	return 0, fmt.Errorf("--on-failure %q: want block, hold, park or skip", s)
}

func (x *cli) runRun(ctx context.Context, inv Invocation) error {
	c := runConfig{retry: retry.Default()}
	fs := x.runFlags(&c, inv)
	if err := inv.Parse(fs); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { c.segmentsGiven = c.segmentsGiven || f.Name == "segments" })
	logger, err := newLogger(inv.Stderr, c.logFormat, c.logLevel)
	if err != nil {
		return usageError("%v", err)
	}
	if err := x.checkRun(&c, inv); err != nil {
		return err
	}
	client, err := openEventStore(c.dial, c.esdb, logger)
	if err != nil {
		return err
	}
	closeClient := client.Close
	defer func() { _ = closeClient() }()
	var listener net.Listener
	if c.httpAddr != "" {
		if listener, err = net.Listen("tcp", c.httpAddr); err != nil {
			return fmt.Errorf("--http %s: %w", c.httpAddr, err)
		}
		defer listener.Close()
	}
	opened, err := x.openStore(ctx, c.servers, logger.With("component", "ferretdb"))
	if err != nil {
		return startError(ctx, err)
	}
	defer opened.Close()
	if opened.Embedded != nil {
		fmt.Fprintf(inv.Stdout, "read models on %s: mongosh %q, database %s\n", opened.Embedded, opened.URI, c.database)
	}
	if err := probeESDB(ctx, client, c.timeout); err != nil {
		closeClient = func() error { closeAbandoned(client); return nil }
		return startError(ctx, err)
	}
	caps, err := opened.Capabilities(ctx)
	if err != nil {
		return startError(ctx, err)
	}
	warnCapabilities(logger, &c, caps)
	for _, p := range c.selected {
		if c.lease > 0 && c.group == "" && p.Definition.Strategy().String() == "none" {
			logger.Warn("this projection keeps no record of the events its documents have (the None strategy), so its writes are not conditional: "+
				"a process paused past its lease can write an older change over a newer one as it wakes; prefer a strategy that records them",
				"projection", p.Definition.Name())
		}
	}
	s := &session{cli: x, c: &c, client: client, store: opened.Store, mongo: neutral.Redact(opened.URI), logger: logger, latency: storeLatency(), holder: holderID(runRole), ownsData: opened.Embedded != nil,
		groupLeased: c.group != "" && c.lease > 0 && !caps.AtomicConditionalWrites, atomicWrites: caps.AtomicConditionalWrites}
	return s.project(ctx, listener)
}

// warnCapabilities says what the server's capabilities change for run c:
// on a server without atomic conditional writes, a group is consumed by
// one process at a time (or, with --lease 0, should be), and a segment's
// lease can be held by two processes for a moment.
func warnCapabilities(logger *slog.Logger, c *runConfig, caps mongostore.Capabilities) {
	switch {
	case caps.AtomicConditionalWrites:
	case c.group != "" && c.lease > 0:
		logger.Info("this server has no atomic conditional writes: one process at a time consumes the group, under a lease of the group's; "+
			"the others stand by", "server", caps.Server, "group", c.group)
	case c.group != "":
		logger.Warn("this server has no atomic conditional writes: run one projector process per group on it (with --lease 0 nothing keeps a second one out)",
			"server", caps.Server)
	case c.segments > 1:
		logger.Warn(notExclusive, "server", caps.Server)
	}
}

// notExclusive warns that a server without atomic conditional writes
// cannot keep a segment's lease to one process.
const notExclusive = "this server has no atomic conditional writes, so two processes can hold a segment's lease for a moment: " +
	"run the processes of a segmented projection on MongoDB"

// errStoppedStarting: run was stopped (a signal) while it started; it
// exits 0, as a stop does later.
var errStoppedStarting = errors.New("stopped while starting")

// startError is err, which run met while it started, or errStoppedStarting
// when ctx ended meanwhile: the stop is what made it fail.
func startError(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return errStoppedStarting
	}
	return err
}

// session is one run: its settings, its servers, and its projections'
// slots.
type session struct {
	cli     *cli
	c       *runConfig
	client  eventStore
	store   *mongostore.Store
	mongo   string // the store's hosts, for the log
	logger  *slog.Logger
	latency *prometheus.HistogramVec
	slots   []*slot
	holder  string // this process, in the leases it takes
	// groupLeased: the --group consumers of a projection take a lease of
	// the group's (groupLease), so that one process at a time consumes it:
	// the server has no atomic conditional writes (FerretDB), and two
	// consumers could each write a document over the other's change (see
	// lead).
	groupLeased bool
	// atomicWrites: the server's conditional writes are compare-and-swap
	// (MongoDB's; not the embedded server's).
	atomicWrites bool
	// ownsData: the store is the embedded server this process started, on
	// a data dir whose lock it holds (goneHolder).
	ownsData bool
}

// project runs the selected projections until ctx is done or one fails,
// serving /metrics, /healthz and /readyz on listener (when not nil).
func (s *session) project(ctx context.Context, listener net.Listener) error {
	views := make([]runnerView, len(s.c.selected))
	s.slots = make([]*slot, len(s.c.selected))
	for i, p := range s.c.selected {
		s.slots[i] = &slot{name: p.Definition.Name(), projection: p}
		if s.c.group != "" {
			s.slots[i].groupName = groupName(s.c.group, p.Definition.Name())
		}
		views[i] = s.slots[i]
	}
	// Each runner is built once before any runs, on the collection readers
	// read now, so that a store or a server that cannot do what a
	// projection needs, or another number of segments than that
	// collection's, stops them all. (The projection's first collection
	// keeps the number of segments it had before a rebuild changed it.)
	for _, sl := range s.slots {
		coll, err := s.store.ActiveCollection(ctx, sl.name, sl.projection.Definition.Collection())
		if err != nil {
			return startError(ctx, err)
		}
		if err := s.followSegments(ctx, sl, coll); err != nil {
			return startError(ctx, err)
		}
		if _, err := s.build(sl, nil)(ctx, coll); err != nil {
			return startError(ctx, err)
		}
	}
	// A rebuild in this database then knows the group is this
	// deployment's: recorded once the run is not refused, so that a
	// refused --group does not mark the projection fed by a group.
	for _, sl := range s.slots {
		if sl.groupName == "" {
			continue
		}
		if err := s.store.RecordGroup(ctx, sl.name, sl.groupName); err != nil {
			return startError(ctx, err)
		}
	}
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	head := &headSampler{}
	var sampler sync.WaitGroup
	sampler.Go(func() { head.run(runCtx, s.client, views, s.logger) })
	sampler.Go(func() { s.recordUnknownTypes(runCtx) })
	sampler.Go(func() { s.lookAtFirstHead(runCtx, head) })
	if s.c.group != "" {
		sampler.Go(func() { s.watchGroups(runCtx) })
	}
	if listener != nil {
		stop := s.serve(listener, views, head)
		defer stop()
	}
	s.logger.Info("projector runs", "esdb", s.client.String(), "mongo", s.mongo, "database", s.c.database, "projections", strings.Join(names(s.c.selected), ","), "group", s.c.group)
	defer context.AfterFunc(ctx, func() {
		s.logger.Info("stopping: the events being handled finish, then the checkpoints are stored", "drain_timeout", s.c.drainTimeout)
	})()
	errs, err := s.runSlotsBounded(ctx, runCtx, stopAll)
	if err != nil {
		return err
	}
	stopAll()
	samplerDone := make(chan struct{})
	go func() { sampler.Wait(); close(samplerDone) }()
	select {
	case <-samplerDone:
	case <-time.After(5 * time.Second):
		s.logger.Warn("the metrics sampler did not stop; leaving it")
	}
	for _, sl := range s.slots {
		st := sl.Stats()
		checkpoint := checkpointString(st.Checkpoint)
		if sl.groupName != "" {
			checkpoint = "the group's, on the server"
		}
		s.logger.Info("projection stopped", "projection", sl.name, "applied", st.Applied, "duplicates", st.Duplicates,
			"skipped", st.Skipped, "parked", st.Parked+st.ParkedLater, "held", st.Held, "failed", st.Failed, "checkpoint", checkpoint,
			"unknown_types", countsString(st.UnknownTypes))
	}
	return errors.Join(errs...)
}

// groupPoll is how often a --group projector asks the server how many
// events each group has parked.
const groupPoll = 2 * time.Second

// watchGroups keeps what the server says of each slot's group, until ctx
// is done: whether it feeds its consumers live (readiness: a group still
// reading the log's history is behind), and how many events it parked
// (under any policy: what kept failing), which leave documents behind,
// also after a restart. It keeps the projection's error record too (what status reads):
// why it is blocked, or none.
func (s *session) watchGroups(ctx context.Context) {
	recorded := map[*slot]string{} // the record each slot last wrote
	for {
		for _, sl := range s.slots {
			g, err := groupInfo(ctx, s.client, sl.groupName, s.c.timeout)
			if err != nil {
				if ctx.Err() == nil {
					s.logger.Debug("asking the server about the group", "group", sl.groupName, "err", err)
				}
				continue
			}
			sl.groupLive.Store(g.Live)
			if !sl.groupBlocks() {
				// Not blocked by what its group parks: a record an earlier
				// run under block left is over.
				s.recordGroupDown(ctx, sl, "", recorded)
				continue
			}
			n := g.Parked
			sl.groupParked.Store(n)
			down := ""
			if n > 0 {
				down = fmt.Sprintf("blocked: %d events that kept failing are parked in group %s; fix the projection, then replay them (replay-parked %s --group)",
					n, sl.groupName, sl.name)
			}
			s.recordGroupDown(ctx, sl, down, recorded)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(groupPoll):
		}
	}
}

// recordGroupDown writes down, why sl is blocked in its group, as its
// runner's error record, or clears the record ("" down), when that changed
// since the record it last wrote (recorded): status says a projection is
// down by that record, and a group has no checkpoint to say it runs again.
// The record is every consumer's of the group, so it says only what they
// all see alike: the events the server parked, not the documents one
// process holds back.
func (s *session) recordGroupDown(ctx context.Context, sl *slot, down string, recorded map[*slot]string) {
	r := sl.cur.Load()
	if last, wrote := recorded[sl]; r == nil || wrote && last == down {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.c.timeout)
	defer cancel()
	var err error
	if down != "" {
		err = s.store.RecordError(ctx, r.Name(), down)
	} else {
		err = s.store.ClearError(ctx, r.Name())
	}
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("keeping the record of a group's blocked projection", "projection", sl.name, "err", err)
		}
		return
	}
	recorded[sl] = down
}

// groupInfo returns what the server says of group (on $all), asking it
// for timeout at most.
func groupInfo(ctx context.Context, client eventStore, group string, timeout time.Duration) (neutral.GroupInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return client.groupInfo(ctx, group)
}

// build returns how slot sl makes its runner on a collection; its
// checkpoints are fenced by held, the projection's lease (nil: leases off).
func (s *session) build(sl *slot, held *heldLease) func(context.Context, string) (*projector.Runner, error) {
	var cps projector.CheckpointStore = s.store
	if held != nil {
		cps = leasedCheckpoints{s.store, held}
	}
	if s.c.group != "" {
		cps = nil // the server keeps the group's position
	}
	return func(ctx context.Context, collection string) (*projector.Runner, error) {
		// A collection a rebuild split in segments (switched to since
		// this process started) is refused, as at the start.
		if err := s.segmentCount(ctx, sl, collection); err != nil {
			return nil, err
		}
		return s.cli.runner(ctx, s.c, sl, collection, s.client, timedStore{s.store, s.latency}, s.store, cps, s.logger)
	}
}

// takingLease starts why a projection is down while taking its lease (or
// its group's) fails (MongoDB does not answer): it runs nowhere known, and
// its last runner's figures are stale.
const takingLease = "retrying: taking its lease"

// leadGiveUp is how long taking a projection's lease may fail in a row
// (MongoDB does not answer) before the projection stops with the error, for
// a supervisor to see, as a run gives up on an event store that does not
// answer.
var leadGiveUp = 10 * time.Minute

// lead waits, as a standby, until this process holds the lease of slot sl's
// projection, and returns it; nil with leases off (--lease 0, --group on a
// server with atomic conditional writes) or when ctx is done, or with the
// error once taking it has failed for leadGiveUp. A --group consumer
// stands by while another process holds the projection's lease
// (replay-parked) first, and then, where the group is leased
// (groupLeased), takes the group's lease instead (groupLease).
func (s *session) lead(ctx context.Context, sl *slot) (*heldLease, error) {
	name, whose := sl.name, "projection's"
	if s.c.group != "" {
		s.waitForLeaseHolder(ctx, sl)
		if !s.groupLeased || ctx.Err() != nil {
			return nil, nil
		}
		name, whose = groupLease(sl.groupName), "group's"
	}
	if s.c.lease == 0 {
		return nil, nil
	}
	said := ""
	var failing time.Time // since when taking it fails
	var released mongostore.Lease
	for {
		held, l, err := holdLease(ctx, s.store, name, s.holder, s.c.lease, s.logger)
		if err == nil && !held.confirm(ctx) {
			held.release()
			err = fmt.Errorf("%w: another process took it at the same moment", mongostore.ErrLeaseHeld)
			l = mongostore.Lease{Holder: "another process", Expires: time.Now().Add(s.c.lease)}
		}
		switch {
		case err == nil && s.groupLeased && s.replayHolds(ctx, sl):
			// A replay took the projection's lease while this process
			// waited for the group's (the consumer it stood by for stood
			// down for the replay): stand by for the replay too.
			held.release()
			s.waitForLeaseHolder(ctx, sl)
			if ctx.Err() != nil {
				return nil, nil
			}
			continue
		case err == nil:
			sl.leader.Store(true)
			sl.setDown("")
			s.logger.Info("holds the "+whose+" lease", "projection", sl.name, "token", held.token())
			return held, nil
		case ctx.Err() != nil:
			return nil, nil
		case errors.Is(err, mongostore.ErrLeaseHeld):
			failing = time.Time{}
			if s.releaseGone(ctx, sl, l, &released) {
				continue
			}
			s.standBy(sl, name, l, &said)
		default:
			// MongoDB does not answer: no other process is known to run
			// the projection, so it is not a standby.
			if failing.IsZero() {
				failing = time.Now()
			}
			if time.Since(failing) >= leadGiveUp {
				return nil, fmt.Errorf("taking the %s lease failed for %v: %w", whose, leadGiveUp, err)
			}
			sl.setDown(takingLease + ": " + firstLine(err.Error(), "the log"))
			s.logger.Warn("taking the "+whose+" lease", "projection", sl.name, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(standbyPoll(s.c.lease)):
		}
	}
}

// releaseGone lets go of lease l, held by another process, for it when
// that process ran on the embedded server this process runs now, on the
// same data dir, and is gone (killed, crashed): its lease is not waited
// out. It reports whether it did; released is the lease it let go of
// last, which it does not try again.
func (s *session) releaseGone(ctx context.Context, sl *slot, l mongostore.Lease, released *mongostore.Lease) bool {
	if l == *released || !takeOverGone(ctx, s.store, s.ownsData, l) {
		return false
	}
	*released = l
	s.logger.Info("took over the lease of a process that is gone", "projection", sl.name, "lease", l.Name, "holder", l.Holder)
	return true
}

// standBy says that slot sl stands by while l's holder holds lease name;
// said is what it said last, not said again.
func (s *session) standBy(sl *slot, name string, l mongostore.Lease, said *string) {
	why := fmt.Sprintf("standby: %s holds its lease", l.Holder)
	sl.setDown(fmt.Sprintf("%s until %s", why, l.Expires.Format(time.RFC3339)))
	if why != *said {
		s.logger.Info("standing by: another process runs the projection", "projection", sl.name, "lease", name, "holder", l.Holder, "until", l.Expires)
		*said = why
	}
}

// waitForLeaseHolder stands a --group consumer by while another process
// holds the projection's lease or a segment's (see otherHolder):
// replay-parked or a catch-up run, whose writes beside the consumers'
// could be lost. The consumers take no lease themselves (the
// server shares the events among them), also with --lease 0; a lease that
// cannot be read does not hold them up.
func (s *session) waitForLeaseHolder(ctx context.Context, sl *slot) {
	said := ""
	for {
		l, held := s.otherHolder(ctx, sl)
		if !held {
			if said != "" {
				sl.setDown("")
			}
			return
		}
		why := fmt.Sprintf("standby: %s holds its lease (%s)", l.Holder, l.Name)
		sl.setDown(fmt.Sprintf("%s until %s", why, l.Expires.Format(time.RFC3339)))
		if why != said {
			s.logger.Info("standing by: a process holds the projection's lease", "projection", sl.name, "holder", l.Holder, "until", l.Expires)
			said = why
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(groupLeasePoll):
		}
	}
}

// watchLeaseHolder stops a --group consumer's run (cancel, of runCtx)
// when another process takes the projection's lease while it runs: a
// replay-parked started while its subscription was away (the runner
// subscribes again on its own). stoodDown reports whether it did.
func (s *session) watchLeaseHolder(runCtx context.Context, sl *slot, cancel context.CancelFunc) (stoodDown func() bool) {
	var took atomic.Bool
	go func() {
		// A look at once, then every groupLeasePoll: a replay that took
		// the lease as the run began is found before its count of the
		// group's consumers.
		for wait := time.Duration(0); ; wait = groupLeasePoll {
			select {
			case <-runCtx.Done():
				return
			case <-time.After(wait):
			}
			if l, held := s.otherHolder(runCtx, sl); held {
				took.Store(true)
				s.logger.Info("standing down: a process took the projection's lease", "projection", sl.name, "holder", l.Holder, "until", l.Expires)
				cancel()
				return
			}
		}
	}()
	return took.Load
}

// replayHolds reports whether another process holds the lease of slot
// sl's projection (replay-parked, for a --group consumer).
func (s *session) replayHolds(ctx context.Context, sl *slot) bool {
	_, held := s.otherHolder(ctx, sl)
	return held
}

// otherHolder returns the lease of slot sl's projection when another
// process holds it (replay-parked, or a catch-up run), or the lease of one
// of its segments (a run --segments): a --group consumer stands down
// for either, whose writes beside its own could be lost.
func (s *session) otherHolder(ctx context.Context, sl *slot) (mongostore.Lease, bool) {
	leases, err := s.store.Leases(ctx, sl.name)
	if err != nil {
		return mongostore.Lease{}, false
	}
	now := time.Now()
	for name, l := range leases {
		if (name == sl.name || segment.IsLease(sl.name, name)) && l.Held(now) && l.Holder != s.holder {
			return l, true
		}
	}
	return mongostore.Lease{}, false
}

// serve serves /metrics, /healthz and /readyz on listener until the
// returned func is called, which shuts the server down: requests in
// progress finish (up to httpShutdown). A server that stops serving before
// then says why at Error.
func (s *session) serve(listener net.Listener, views []runnerView, head *headSampler) (stop func()) {
	mux := healthHandler(views)
	mux.Handle("GET /metrics", promhttp.HandlerFor(newMetrics(s.latency, views, head, s.cli.Registry), promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("http stopped serving /metrics, /healthz and /readyz", "addr", listener.Addr().String(), "err", err)
		}
	}()
	s.logger.Info("http", "addr", listener.Addr().String(), "paths", "/metrics /healthz /readyz")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), httpShutdown)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			s.logger.Warn("http shutdown", "err", err)
			srv.Close()
		}
		<-served
	}
}

// httpShutdown bounds how long the HTTP server's shutdown waits for the
// requests in progress.
const httpShutdown = 5 * time.Second

// runSlots runs every slot until ctx is done, each on its own: a projection
// that stops at an event does not stop the others ([session.keepRunning]).
// Any other failure (the event store unreachable for the reconnect policy's
// time, the store failing its checkpoints) stops them all (stopAll), for a
// supervisor to see.
func (s *session) runSlots(ctx context.Context, stopAll context.CancelFunc) []error {
	errs := make([]error, len(s.slots))
	var wg sync.WaitGroup
	for i, sl := range s.slots {
		wg.Go(func() {
			for {
				keep := s.keepRunning
				if sl.segments > 1 {
					keep = s.keepSegments
				}
				errs[i] = keep(ctx, sl)
				if !s.refollowSegments(ctx, sl, errs[i]) {
					break
				}
			}
			if errors.Is(errs[i], errSegmentCount) && sl.down.Load() == nil {
				// Met on a switch to a collection split anew, by a run
				// without segments: said as a run in segments says it.
				sl.setDown("blocked: " + errs[i].Error())
				s.logger.Error("projection stopped; the other projections go on", "projection", sl.name, "err", errs[i])
			}
			if errs[i] != nil && !stopsItsOwn(errs[i]) {
				s.logger.Error("the process stops: a projection stopped for a reason that is no event's", "projection", sl.name, "err", errs[i])
				stopAll()
			}
		})
	}
	wg.Wait()
	return errs
}

// stopGrace is how much longer than --drain-timeout a stop may take before
// the projector gives up on it: the checkpoints' stores take 10 s at most,
// the segments' leases let go 5 s and the heartbeat 5 s (letGoWait each),
// and 10 s spare.
const stopGrace = 30 * time.Second

// errStopUnbounded: a stop that did not end in time.
var errStopUnbounded = errors.New("the stop did not end in time: a projection's step, or a call to the store, does not return; " +
	"leaving it unfinished (the events being handled are delivered again from the checkpoint)")

// runSlotsBounded is runSlots, bounded once ctx is done (a SIGTERM) by
// --drain-timeout and stopGrace: a runner waits for the events being
// handled to return, and a projection's step that does not return (it has
// no context to end it), or a store call that ignores its context, would
// hold the process past any grace period an orchestrator gives it, and
// then be killed without a word.
func (s *session) runSlotsBounded(ctx, runCtx context.Context, stopAll context.CancelFunc) ([]error, error) {
	done := make(chan []error, 1)
	go func() { done <- s.runSlots(runCtx, stopAll) }()
	select {
	case errs := <-done:
		return errs, nil
	case <-ctx.Done():
	}
	bound := s.c.drainTimeout + stopGrace
	select {
	case errs := <-done:
		return errs, nil
	case <-time.After(bound):
		// Said at once, before what closes after it (the HTTP server, the
		// store) takes its own time.
		err := fmt.Errorf("%w (%v after it began: --drain-timeout %v and %v)", errStopUnbounded, bound, s.c.drainTimeout, stopGrace)
		s.logger.Error("giving up on the stop", "err", err)
		return nil, err
	}
}

// restarts paces the runs again of a projection whose event failed in a way
// that may pass (a store that did not answer, a predecessor not there in
// time): from 1 s doubling to a minute, for as long as the process runs.
var restarts = retry.Policy{InitialDelay: time.Second, Multiplier: 2, MaxDelay: time.Minute, MaxRetries: -1}

// keepRunning runs slot sl until ctx is done or it stops for good. An event
// that failed permanently (under the block policy) stops this projection
// alone: it stays down, /readyz and the metrics say so, and its error is the
// result. An event that may succeed later is tried again: the runner runs
// again from its checkpoint after a wait. A failure that is no event's ends
// the slot with it.
func (s *session) keepRunning(ctx context.Context, sl *slot) error {
	pacer := pace.New(restarts)
	for {
		held, err := s.lead(ctx, sl)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// MongoDB did not answer for minutes: the process stops
			// (runSlots), for a supervisor to see.
			sl.setDown("blocked: " + firstLine(err.Error(), "the log"))
			return err
		}
		runCtx, cancel := context.WithCancel(ctx)
		stoodDown := func() bool { return false }
		if s.c.group != "" {
			stoodDown = s.watchLeaseHolder(runCtx, sl, cancel)
		}
		if held != nil {
			go watchLost(runCtx, sl, held, cancel)
		}
		began := time.Now()
		// A group's position is the server's, not a checkpoint: a --group
		// projector does not follow a rebuild's switch.
		err = sl.run(runCtx, s.store, s.c.group == "", s.logger, s.cli.name(), s.build(sl, held))
		cancel()
		if held != nil {
			lost := held.isLost()
			held.release()
			sl.leader.Store(false)
			if lost && ctx.Err() == nil {
				sl.setDown("standby: lost its lease")
				continue
			}
		}
		if stoodDown() && ctx.Err() == nil {
			continue // it stands by until the lease is released
		}
		if time.Since(began) > restarts.MaxDelay {
			pacer.Reset() // it ran a while: a new run of failures
		}
		again, result := s.afterRun(ctx, sl, err, pacer)
		if !again {
			return result
		}
	}
}

// watchLost stops slot sl's run (cancel, of runCtx) when its lease held
// is lost, and says so at once (not leader, retrying), not once the run
// has drained: its writes may hang on a MongoDB that does not answer.
func watchLost(runCtx context.Context, sl *slot, held *heldLease, cancel context.CancelFunc) {
	select {
	case <-held.lost:
		sl.leader.Store(false)
		sl.setDown("retrying: lost its lease (not renewed in time: MongoDB does not answer, or another process took it)")
		cancel() // stop writing: another process may run it now
	case <-runCtx.Done():
	}
}

// afterRun says what becomes of slot sl, whose runner ended with err: it
// runs again (again), after a wait for a failure that may pass, or ends
// with result.
func (s *session) afterRun(ctx context.Context, sl *slot, err error, pacer *pace.Pacer) (again bool, result error) {
	var failed *projector.Error
	switch {
	case (err == nil || ctx.Err() != nil) && sl.groupDown() != "":
		return false, errors.Join(err, fmt.Errorf("projection %s %s", sl.name, sl.groupDown()))
	case err == nil:
		return false, nil
	case ctx.Err() != nil && errors.As(err, &failed) && failed.Retryable():
		// Stopped while an event that may succeed later failed: it was
		// not stopped for good (it would run again), whichever came first.
		return false, nil
	case ctx.Err() != nil && !errors.As(err, &failed) && !errors.Is(err, context.Canceled):
		// Stopped, and a call failed by itself as it stopped (the last
		// checkpoint's store, on a MongoDB that did not answer): said, and
		// the exit status says it.
		s.logger.Error("projection stopped, but not cleanly: the next run resumes from its last stored checkpoint (and applies nothing twice)",
			errAttrs(err, "projection", sl.name)...)
		return false, err
	case ctx.Err() != nil && !errors.As(err, &failed):
		// Stopped while it started or stored (its indexes, its version,
		// a checkpoint): the stop is what made the call fail, as
		// startError says of run's own start.
		return false, nil
	case ctx.Err() != nil:
		// Stopped as it ended (a signal while its failure drained): an
		// event that failed for good says how to go on past it all the
		// same.
		return false, blockedHint(err, sl.projection, sl.blocks.Load(), "run", s.c.policy)
	case errors.Is(err, projector.ErrForeignCheckpoint):
		err = fmt.Errorf("%w (to rebuild it: %s rebuild %s)", err, s.cli.name(), sl.name)
		sl.setDown("blocked: " + err.Error())
		s.logger.Error("projection stopped: its checkpoint does not belong to this event store; the other projections go on",
			"projection", sl.name, "err", err)
		return false, err
	case errors.Is(err, errOtherVersion):
		if s.followVersion(ctx, sl, err, nil) != nil {
			return false, err
		}
		return true, nil
	case !errors.As(err, &failed):
		return false, err
	case !failed.Retryable():
		sl.setDown("blocked: " + firstLine(err.Error(), "the log"))
		err = blockedHint(err, sl.projection, sl.blocks.Load(), "run", s.c.policy)
		s.logger.Error("projection stopped at an event that failed for good; the other projections go on",
			errAttrs(err, "projection", sl.name)...)
		return false, err
	}
	sl.setDown("retrying: " + firstLine(err.Error(), "the log"))
	pacer.Failed()
	s.logger.Warn("projection stopped at an event that may succeed later; it runs again from its checkpoint",
		errAttrs(err, "projection", sl.name)...)
	if werr := pacer.Wait(ctx); werr != nil {
		return false, err // stopped while waiting: it did not end well
	}
	sl.setDown("")
	return true, nil
}

// followVersion stops slot sl, refused by why (another version built its
// active collection), and waits for the switch of a rebuild by its version
// (awaitSwitch), away(true) called before and away(false) after (nil: none;
// the segments' processes count this one out meanwhile): nil once the slot
// may run again, else why it may not (a --group projector does not follow
// a rebuild's switch).
func (s *session) followVersion(ctx context.Context, sl *slot, why error, away func(bool)) error {
	// Standing by: another version's binary runs the projection (or is to,
	// once its rebuild switches readers); nothing here is to fix, and this
	// process's last position and lag are not the projection's.
	sl.setDown("standby: " + why.Error())
	// What the error says to do is this line's: stop this binary (a newer
	// version built the collection), or rebuild with it (an older one).
	s.logger.Error("projection stopped: another version of it built its collection; it runs again once a rebuild by this binary's version switches readers, and the other projections go on",
		"projection", sl.name, "err", why)
	if s.c.group != "" {
		return why
	}
	if away != nil {
		away(true)
		defer away(false)
	}
	if err := s.awaitSwitch(ctx, sl, why); err != nil {
		return err
	}
	sl.setDown("")
	return nil
}

// awaitSwitch waits, for slot sl refused by why (another version built its
// active collection), until the active collection is one its version
// builds (a rebuild by this version switched readers to it), which the slot
// then runs: a binary deployed before its rebuild, as a rollout does,
// follows the switch instead of staying down until restarted. Meanwhile the
// refusal is the refused collection's error record, for status to say that
// the process does not run it (a process that runs it, of the version that
// built it, stores checkpoints after the record, which then counts no
// more). The active collection is read anew each time, so a switch made
// before the first read counts. It returns ctx's error when ctx ends first.
func (s *session) awaitSwitch(ctx context.Context, sl *slot, why error) error {
	def := sl.projection.Definition.Collection()
	recorded := false
	refused := "" // the active collection last found another version's
	t := time.NewTicker(followInterval)
	defer t.Stop()
	for {
		if coll, err := s.store.ActiveCollection(ctx, sl.name, def); err == nil && coll != refused {
			switch err := claimVersion(ctx, s.store, sl.projection, coll, s.cli.name()); {
			case err == nil:
				s.logger.Info("readers use a collection this version builds: the projection runs on it", "projection", sl.name, "collection", coll)
				return nil
			case errors.Is(err, errOtherVersion):
				refused = coll // its version stays another's: not asked again
				if !recorded {
					if err := s.store.RecordError(ctx, coll, why.Error()); err != nil && ctx.Err() == nil {
						s.logger.Warn("recording why the projection does not run", "projection", sl.name, "err", err)
					}
					recorded = true
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// stopsItsOwn reports an error that stops one projection alone: an event
// failed, its checkpoint is from another event store, another version of
// it built its collection, or its collection is split in another number of
// segments than this process runs.
func stopsItsOwn(err error) bool {
	var failed *projector.Error
	return errors.As(err, &failed) || errors.Is(err, projector.ErrForeignCheckpoint) || errors.Is(err, errOtherVersion) ||
		errors.Is(err, errSegmentCount)
}

// runner makes the runner of one projection writing to collection; its
// checkpoint is named after the collection, so that a rebuild's carries over
// when readers switch to it.
func (x *cli) runner(ctx context.Context, c *runConfig, sl *slot, collection string, client eventStore,
	engineStore driver.Store, store *mongostore.Store, cps projector.CheckpointStore, logger *slog.Logger) (*projector.Runner, error) {
	p := sl.projection
	def := projector.Copy(p.Definition, collection)
	eng, err := projector.NewEngine(engineStore, x.Registry, []projector.Definition{def},
		projector.WithRetry(c.retry), projector.WithLogger(logger),
		projector.WithFailurePolicy(c.policy), projector.WithParker(store), projector.WithStreamReader(client),
		projector.WithEventSpans(c.eventSpans))
	if err != nil {
		return nil, err
	}
	if err := eng.Prepare(ctx); err != nil {
		return nil, err
	}
	policy, _ := eng.FailurePolicy(def.Name())
	sl.blocks.Store(policy == projector.Block)
	src, err := source(client, c.group, p, policy, logger)
	if err != nil {
		return nil, err
	}
	if g, ok := src.(groupSource); ok {
		sl.group.Store(&g)
	}
	return projector.NewRunner(collection, eng, src, cps, c.runnerOptions(p)...)
}

// orDefault is v, or def when v is 0.
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func names(ps []Projection) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Definition.Name()
	}
	return out
}

// workers is how many workers p's runner has: its own setting, else one
// for a strategy that needs the log in order, else flag.
func (p Projection) workers(flag int) int {
	switch {
	case p.Workers > 0:
		return p.Workers
	case p.Definition.Strategy().NeedsOrderedSource():
		return 1
	}
	return flag
}

func checkpointString(c *projector.Checkpoint) string {
	if c == nil {
		return "none"
	}
	return c.String()
}

// source is the subscription of one projection: $all filtered to what it
// reads, or a persistent group on $all with the same filter. In a group, an
// event that fails for good under the block policy is handed back to be
// redelivered, a bounded number of times, then parked in the group: its
// document stays behind it, and the projection is blocked (not ready) until
// the group's parked events are replayed. Under skip and park the document
// has moved past it: the consumer acknowledges an event the engine parked
// (its record is in the store) and tells the server a skipped one skipped.
func source(client eventStore, group string, p Projection, policy projector.FailurePolicy, logger *slog.Logger) (projector.Source, error) {
	opts := p.Reads.options()
	if group == "" {
		opts.Logger = logger
		return client.all(opts)
	}
	return client.group(groupName(group, p.Definition.Name()), opts, policy == projector.Block, logger)
}

// groupMaxDeliveries is how many times an event that keeps failing is
// delivered in a group before the projector parks it.
const groupMaxDeliveries = 10

// groupName is the persistent subscription group of a projection under
// --group.
func groupName(group, projection string) string { return group + "-" + projection }

// groupLease is the name of the lease of group (groupName) that its
// consumers take where the server has no atomic conditional writes
// (session.groupLeased); no projection's name has a space.
func groupLease(group string) string { return "group " + group }

// healthHandler serves /healthz (the process is alive) and /readyz (every
// projection has caught up with the head of its subscription; for a
// persistent group, which has no head to reach, every consumer is connected).
// Not ready, it says why, per projection: down (and why), not connected to
// the event store (it does not answer, or the subscription is opening), or
// catching up.
func healthHandler(runners []runnerView) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		var behind, down, unconnected []string
		for _, r := range runners {
			switch {
			case r.Down() != "":
				down = append(down, r.Name()+" "+r.Down())
			case !r.Connected():
				unconnected = append(unconnected, r.Name())
			case !r.Current():
				behind = append(behind, r.Name())
			}
		}
		if len(behind)+len(down)+len(unconnected) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			for _, d := range down {
				fmt.Fprintf(w, "down: %s\n", d)
			}
			if len(unconnected) > 0 {
				fmt.Fprintf(w, "not connected (the event store does not answer, or the subscription is opening): %s\n", strings.Join(unconnected, ", "))
			}
			if len(behind) > 0 {
				fmt.Fprintf(w, "catching up: %s\n", strings.Join(behind, ", "))
			}
			return
		}
		io.WriteString(w, "ready\n")
	})
	return mux
}
