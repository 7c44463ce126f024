package app

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
)

// newMetrics is what /metrics serves: the store's latency, the Go runtime's
// and the process's figures, and the runners' counters. The dashboard and
// the alert rules of deploy/ name only metrics it exports (a test checks).
func newMetrics(latency *prometheus.HistogramVec, views []runnerView, head *headSampler, registry *projector.Registry) *prometheus.Registry {
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newRunnerCollector(views, head, registry))
	return metrics
}

// runnerCollector exports the runners' counters at scrape time.
type runnerCollector struct {
	runners []runnerView
	head    *headSampler

	outcomes, delivered, checkpoints, waits, subscriptions, drops *prometheus.Desc
	position, caughtUp, lagSeconds, lagEvents, headPosition       *prometheus.Desc
	parked, unrouted, up, leader, connected                       *prometheus.Desc
	unknown, state, batches, batched                              *prometheus.Desc
	segmentOwned, segmentPosition, segmentEvents                  *prometheus.Desc
	registry                                                      *projector.Registry
}

func newRunnerCollector(runners []runnerView, head *headSampler, registry *projector.Registry) *runnerCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("projector_"+name, help, append([]string{"projection"}, labels...), nil)
	}
	return &runnerCollector{
		runners:  runners,
		head:     head,
		registry: registry,
		unknown: d("unknown_events_total", "Events delivered of a type nobody registered, by type (an event delivered again counts once in a run of the projection; passed over, or failed in a projection that fails unknown types); "+
			"near is a registered type it is close to (case, a version): a rename or a new version without its upcaster, most likely.", "type", "near"),
		outcomes:      d("events_total", "Events handled, by outcome: applied, duplicate (skipped by the gate), skipped or parked (failed permanently, document moved past it; parked ones are recorded), failed.", "outcome"),
		delivered:     d("deliveries_total", "Events delivered by the subscription, redeliveries included."),
		unrouted:      d("unrouted_total", "Events delivered that the projection's IDFunc left alone (when they are all of the events delivered, the IDFunc does not match what the subscription reads)."),
		checkpoints:   d("checkpoints_saved_total", "Checkpoints stored."),
		waits:         d("gate_waits_total", "Times the revision gate waited, with backoff, for a document to reach an event's predecessor (its retries)."),
		subscriptions: d("subscriptions_total", "Subscriptions opened."),
		drops:         d("subscription_drops_total", "Subscriptions that dropped and were opened again."),
		position:      d("checkpoint_position", "Stored checkpoint: commit position in $all (a revision for a stream subscription)."),
		caughtUp:      d("caught_up", "1 when everything up to the head of the subscription has been handled; under --group, when the server feeds the group live (it has read $all to its end) and this consumer is connected, as /readyz tells it."),
		up:            d("up", "1 while the projection runs; 0 while it stands by (another process holds its lease) or is stopped at an event that failed (for good under the block policy, or until it is tried again), or, under --group and the block policy, while events that kept failing are parked in its group."),
		connected: d("connected", "1 while the projection runs with its subscription open on the event store (under --group, its consumer's); "+
			"0 while it is not open (the event store does not answer, the subscription is opening) or the projection is down here "+
			"(standing by, blocked, retrying: see projector_up). /readyz says not ready meanwhile."),
		leader:     d("lease_held", "1 while this process holds the projection's lease (--lease), or with --segments at least one of its segments; 0 while it stands by."),
		lagSeconds: d("lag_seconds", "Age of the newest event handled while events remain after the checkpoint; 0 when none remain; absent before the first event."),
		lagEvents:  d("lag_events", "Events after the stored checkpoint that the projection's filter reads, among the first 10000 of $all after it, counted every 5s (0 once the checkpoint passes the head counted to)."),
		parked:     d("parked_total", "Events this process parked in its persistent subscription group (--group), with their reason."),
		state: d("state", "1 for the projection's state in this process, 0 for the others: running; standby (another process holds its lease, "+
			"or another version of the projection built its collection: this process waits for a rebuild's switch to one its version builds); "+
			"blocked (stopped at an event that failed for good, or events parked in its group under the block policy: replay-parked); "+
			"retrying (stopped at an error, tried again with backoff).", "state"),
		batches:      d("batches_total", "Batches of events handled together (catch-up, rebuild)."),
		batched:      d("batched_events_total", "Events handled in those batches: batched_events_total / batches_total is the mean batch size."),
		segmentOwned: d("segment_owned", "With run --segments: 1 for each segment of the projection whose lease this process holds, 0 for the others.", "segment"),
		segmentPosition: d("segment_checkpoint_position", "With run --segments: the checkpoint this process last stored for each segment it holds "+
			"(commit position in $all).", "segment"),
		segmentEvents: d("segment_events_passed", "With run --segments: how many events of the documents of each segment this process holds "+
			"the checkpoint it last stored has passed, since the segment started from the collection's own checkpoint (split, or rebuilt in one process), counted once whichever process applied them (status shows every segment's).", "segment"),
		headPosition: prometheus.NewDesc("projector_head_position", "Commit position of the last event in $all, sampled every 5s.", nil, nil),
	}
}

// states are the values of projector_state's state label; a projection's
// Down() starts with one of the last three.
var states = []string{"running", "standby", "blocked", "retrying"}

// runsElsewhere reports whether r's projection does not run in this
// process (a standby, or one that cannot take its lease): its last
// runner's position and lag are stale.
func runsElsewhere(r runnerView) bool {
	return stateOf(r.Down()) == "standby" || strings.HasPrefix(r.Down(), takingLease)
}

// stateOf is the state a projection is in, given why it is down ("": up).
func stateOf(down string) string {
	if down == "" {
		return "running"
	}
	for _, s := range states[1:] {
		if strings.HasPrefix(down, s) {
			return s
		}
	}
	return "blocked"
}

func (c *runnerCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c *runnerCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	head, lags := c.head.read()
	for _, r := range c.runners {
		st, name := r.Stats(), r.Name()
		counter(c.outcomes, st.Applied, name, "applied")
		counter(c.outcomes, st.Duplicates, name, "duplicate")
		counter(c.outcomes, st.Skipped, name, "skipped")
		counter(c.outcomes, st.Parked+st.ParkedLater, name, "parked")
		counter(c.outcomes, st.Held, name, "held")
		counter(c.outcomes, st.Failed, name, "failed")
		counter(c.delivered, st.Events, name)
		counter(c.unrouted, st.Unrouted, name)
		for typ, n := range st.UnknownTypes {
			near, _ := c.registry.Near(typ)
			counter(c.unknown, n, name, typ, near)
		}
		counter(c.checkpoints, st.Saved, name)
		counter(c.waits, st.Waits, name)
		counter(c.subscriptions, st.Subscriptions, name)
		counter(c.drops, st.Drops, name)
		// A standby does not run the projection: where its last runner
		// was, and how far behind, are another process's figures now.
		standby := runsElsewhere(r)
		if st.Checkpoint != nil && !standby {
			gauge(c.position, float64(st.Checkpoint.Position), name)
		}
		up := 0.0
		if r.Current() && r.Down() == "" { // as /readyz tells it
			up = 1
		}
		gauge(c.caughtUp, up, name)
		running := 1.0
		if r.Down() != "" {
			running = 0
		}
		gauge(c.up, running, name)
		now := stateOf(r.Down())
		for _, s := range states {
			gauge(c.state, boolValue(s == now), name, s)
		}
		counter(c.batches, st.Batches, name)
		counter(c.batched, st.Batched, name)
		held := 0.0
		if r.Leader() {
			held = 1
		}
		gauge(c.leader, held, name)
		gauge(c.connected, boolValue(r.Connected()), name)
		behind, sampled := lags[name]
		behind = counted(behind, head, st.Checkpoint)
		switch {
		case standby:
		case sampled && behind == 0, !sampled && up == 1:
			// Nothing after the checkpoint; or, the head unknown, caught
			// up. A runner caught up and then left behind by live appends
			// shows how far.
			gauge(c.lagSeconds, 0, name)
		case !st.Latest.IsZero():
			gauge(c.lagSeconds, time.Since(st.Latest).Seconds(), name)
		}
		if sampled && !standby {
			gauge(c.lagEvents, float64(behind), name)
		}
		c.collectSegments(ch, r)
		if p, ok := r.(interface{ Parked() (uint64, bool) }); ok {
			if n, group := p.Parked(); group {
				counter(c.parked, n, name)
			}
		}
	}
	if head > 0 {
		gauge(c.headPosition, float64(head))
	}
}

// counted is how many events are behind checkpoint cp: those counted
// behind it at the head sampled last, or none once cp has passed that head
// (a runner that has just caught up would show its whole catch-up for up
// to 5 s).
func counted(behind int, head uint64, cp *projector.Checkpoint) int {
	if cp != nil && cp.Position >= head {
		return 0
	}
	return behind
}

// collectSegments exports, for a projection run in segments (run
// --segments), which segments this process holds and where it stored their
// checkpoints.
func (c *runnerCollector) collectSegments(ch chan<- prometheus.Metric, r runnerView) {
	v, ok := r.(interface {
		Segments() (int, map[int]*savedSegment)
	})
	if !ok {
		return
	}
	n, held := v.Segments()
	for k := range n {
		seg := strconv.Itoa(k)
		saved, owned := held[k]
		ch <- prometheus.MustNewConstMetric(c.segmentOwned, prometheus.GaugeValue, boolValue(owned), r.Name(), seg)
		if saved != nil {
			ch <- prometheus.MustNewConstMetric(c.segmentPosition, prometheus.GaugeValue, float64(saved.position), r.Name(), seg)
			ch <- prometheus.MustNewConstMetric(c.segmentEvents, prometheus.GaugeValue, float64(saved.events), r.Name(), seg)
		}
	}
}

// headSampler reads the head of $all and counts each runner's events behind
// it, every few seconds, off the scrape path.
type headSampler struct {
	mu   sync.Mutex
	head uint64
	lags map[string]int
}

func (h *headSampler) read() (uint64, map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.head, h.lags
}

func (h *headSampler) run(ctx context.Context, client eventStore, runners []runnerView, logger *slog.Logger) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		h.sample(ctx, client, runners, logger)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (h *headSampler) sample(ctx context.Context, client eventStore, runners []runnerView, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	lags := map[string]int{}
	pos, err := client.Head(ctx)
	for _, r := range runners {
		if err != nil {
			break
		}
		switch cp := r.Stats().Checkpoint; {
		case cp == nil, runsElsewhere(r):
		case cp.Position < pos:
			if n, _, err := countAfter(ctx, client, &cp.Position, cp.Prepare, r.Reads()); err == nil {
				lags[r.Name()] = n
			}
		default:
			lags[r.Name()] = 0
		}
	}
	if err != nil {
		// Stale figures are worse than none: drop them until the next sample.
		logger.Debug("sampling the head of $all", "err", err)
		pos = 0
	}
	h.mu.Lock()
	h.head, h.lags = pos, lags
	h.mu.Unlock()
}

// timedStore measures the store's calls for the write-latency histogram. It
// embeds the store itself, so that what the strategies need of it (guarded
// writes, transactions, parking) stays reachable.
type timedStore struct {
	*mongostore.Store
	latency *prometheus.HistogramVec
}

func (s timedStore) LoadGuarded(ctx context.Context, collection, id string, state any) (driver.Meta, bool, error) {
	defer s.observe("load", collection, time.Now())
	return s.Store.LoadGuarded(ctx, collection, id, state)
}

func (s timedStore) PutGuarded(ctx context.Context, collection, id string, expected int64, meta driver.Meta, state any) (bool, error) {
	defer s.observe("put", collection, time.Now())
	return s.Store.PutGuarded(ctx, collection, id, expected, meta, state)
}

func (s timedStore) Insert(ctx context.Context, collection, id string, head driver.Head, state any) error {
	defer s.observe("insert", collection, time.Now())
	return s.Store.Insert(ctx, collection, id, head, state)
}

func (s timedStore) Update(ctx context.Context, collection, id string, from uint64, head driver.Head, state any) (bool, error) {
	defer s.observe("update", collection, time.Now())
	return s.Store.Update(ctx, collection, id, from, head, state)
}

func (s timedStore) Load(ctx context.Context, collection, id string, minRevision uint64, state any) (driver.Head, bool, error) {
	defer s.observe("load", collection, time.Now())
	return s.Store.Load(ctx, collection, id, minRevision, state)
}

func (s timedStore) LoadMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]driver.Loaded, error) {
	defer s.observe("load_many", collection, time.Now())
	return s.Store.LoadMany(ctx, collection, ids, newState)
}

func (s timedStore) WriteMany(ctx context.Context, collection string, writes []driver.Write) ([]bool, error) {
	defer s.observe("write_many", collection, time.Now())
	return s.Store.WriteMany(ctx, collection, writes)
}

func (s timedStore) LoadGuardedMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]driver.Guarded, error) {
	defer s.observe("load_many", collection, time.Now())
	return s.Store.LoadGuardedMany(ctx, collection, ids, newState)
}

func (s timedStore) PutGuardedMany(ctx context.Context, collection string, puts []driver.Put) ([]bool, error) {
	defer s.observe("write_many", collection, time.Now())
	return s.Store.PutGuardedMany(ctx, collection, puts)
}

func (s timedStore) observe(op, collection string, start time.Time) {
	s.latency.WithLabelValues(collection, op).Observe(time.Since(start).Seconds())
}

func storeLatency() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "projector_store_seconds",
		Help:    "Latency of the engine's calls to MongoDB, by collection and operation (load, insert, update, put; load_many and write_many for a batch).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"collection", "op"})
}

// boolValue is 1 for true, 0 for false.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
