package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/embedded"
	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/subscription"
)

// runBench measures catch-up three ways on the same events, one after the
// other in one process: A the projector, B the seed article's per-event code,
// L the least work that yields the same read model. It reports ratios.
func runBench(ctx context.Context, inv app.Invocation) error {
	c := &benchCommand{stdout: inv.Stdout, stderr: inv.Stderr}
	if err := c.parseFlags(inv); err != nil {
		return err
	}
	return c.run(ctx)
}

// benchCommand is the bench command: its flags, and the servers and
// expected documents a run sets up on them.
type benchCommand struct {
	stdout, stderr io.Writer

	// The flags.
	carts, events               int
	mongoURI                    string // --mongo; the embedded server's URI once it has started
	postgres                    string
	interleave                  string
	liveEvents                  int
	liveRate                    float64
	skipB, warmup, tracedEvents bool
	memoryScale, documentsScale int
	bSample, rounds             int
	groupConsumers              int // G's consumers (0: no G)
	traceRounds                 int
	cpuProfile                  string // of this process, during A's first round
	cpuProfileA, memProfileA    string // of A's process, in its first round
	tune                        catchUpSettings

	// model is the read model --projection names.
	model benchModel

	// What run sets up, and close stops.
	dir    string           // the embedded server's data, in a temporary directory
	server *embedded.Server // the embedded server (none with --mongo)
	where  string           // where the documents are, for the report
	client *mongo.Client
	elog   *eventLog
	// want is what A's documents must be; details, for a read model other
	// than the details, what D's must be.
	want    benchExpected
	details *benchExpected
}

// parseFlags parses the command's arguments into c and checks them.
func (c *benchCommand) parseFlags(inv app.Invocation) error {
	fs := inv.FlagSet("[flags]")
	c.register(fs)
	if err := app.ParseFlags(fs, inv.Args); err != nil {
		return err
	}
	return c.check()
}

// register makes the command's flags of fs, into c.
func (c *benchCommand) register(fs *flag.FlagSet) {
	fs.IntVar(&c.carts, "carts", 200, "carts")
	fs.IntVar(&c.events, "events", 20, "events per cart")
	fs.StringVar(&c.mongoURI, "mongo", "", "MongoDB URI (default: the embedded Mongo-wire server, in a temporary directory)")
	fs.StringVar(&c.postgres, "postgres", "", "PostgreSQL URL for the embedded server's PostgreSQL backend (default: its SQLite backend)")
	fs.IntVar(&c.liveEvents, "live-events", 200, "events appended at a steady rate for the live latency (0: skip)")
	fs.Float64Var(&c.liveRate, "live-rate", 50, "events per second of the live latency run")
	fs.StringVar(&c.interleave, "interleave", "shuffled", "how the carts' events interleave in the log: shuffled (over the whole log) or clustered (each cart active over a short window, as real carts are)")
	fs.IntVar(&c.bSample, "b-sample", 0, "run B on the first this many cart events of the log only, and report its rate (0: all)")
	fs.BoolVar(&c.skipB, "skip-b", false, "leave out B, the per-event way (slow on large runs)")
	fs.IntVar(&c.rounds, "rounds", 3, "time A, L and R this many times, in turns, and report the medians (A's peak memory is the highest of its rounds)")
	fs.IntVar(&c.memoryScale, "memory-scale", 10, "run A again on this many times the events over the same carts, for its peak memory and time (0: skip)")
	fs.IntVar(&c.documentsScale, "documents-scale", 0, "run A again on this many times the carts (and clients), each of as many events, for its time (0: skip)")
	fs.BoolVar(&c.tracedEvents, "traced-events", false, "every event's metadata carries a trace context, as a traced writer's does (with tracing on, each event is then a span of its own)")
	fs.IntVar(&c.traceRounds, "trace-rounds", 0, "run A this many times with tracing on (every span sampled, exported to a discarding exporter) and off, in turns, and print the medians and their ratio (0: skip)")
	fs.IntVar(&c.groupConsumers, "group-consumers", 0, "G: project the log with this many competing consumers of a persistent subscription group on $all as well, in each round, as run --group does (0: skip)")
	fs.BoolVar(&c.warmup, "warmup", true, "run A once, untimed, on another database before the timed ways (the embedded server opens its PostgreSQL connections then)")
	c.tune = defaultCatchUp
	c.tune.register(fs)
	fs.BoolVar(&c.tune.traced, "trace", false, "run A with tracing on (every span sampled, exported to a discarding exporter), as the tracing rounds do: with --cpuprofile-a, to see what tracing costs")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (the servers' side) during A to this file")
	fs.StringVar(&c.cpuProfileA, "cpuprofile-a", "", "write a CPU profile of A's process (the projector) to this file")
	fs.StringVar(&c.memProfileA, "memprofile-a", "", "write a heap profile of A's process at its peak to this file")
}

// check checks the flags, and finds the read model --projection names. A
// bad flag is one line on stderr, and ErrUsage.
func (c *benchCommand) check() error {
	if c.outOfRange() {
		fmt.Fprintln(c.stderr, "--carts, --events, --rounds and --live-rate must be > 0, --workers, --batch and --batch-mib >= 1 (--batch-mib <= 1024), --live-events, --memory-scale, --documents-scale, --b-sample, --trace-rounds, --group-consumers and --batch-window >= 0")
		return app.ErrUsage
	}
	if c.interleave != "shuffled" && c.interleave != "clustered" {
		fmt.Fprintf(c.stderr, "--interleave: want shuffled or clustered, got %q\n", c.interleave)
		return app.ErrUsage
	}
	model, ok := benchModels[c.tune.projection]
	if !ok {
		fmt.Fprintf(c.stderr, "--projection: want details, client or shop, got %q\n", c.tune.projection)
		return app.ErrUsage
	}
	c.model = model
	if c.mongoURI != "" {
		if err := mongostore.CheckURI(c.mongoURI); err != nil {
			fmt.Fprintf(c.stderr, "--mongo: %v\n", err)
			return app.ErrUsage
		}
	}
	return nil
}

// outOfRange reports whether a number flag is out of its range.
func (c *benchCommand) outOfRange() bool {
	t := c.tune
	return c.carts < 1 || c.events < 1 || c.liveEvents < 0 || !(c.liveRate > 0) || t.workers < 1 || t.batch < 1 || t.batchMiB < 1 || t.batchMiB > 1024 || t.window < 0 ||
		c.memoryScale < 0 || c.documentsScale < 0 || c.bSample < 0 || c.traceRounds < 0 || c.rounds < 1 || c.groupConsumers < 0
}

// run sets up the servers and the events, times A, L and R (and D) in
// rounds, then B, reports, and runs A again on more events, and live.
func (c *benchCommand) run(ctx context.Context) error {
	defer c.close()
	if err := c.startDocuments(ctx); err != nil {
		return err
	}
	if err := c.startEvents(ctx); err != nil {
		return err
	}
	c.printHeader()
	if err := c.expectDetails(); err != nil {
		return err
	}
	if err := c.warmUp(ctx); err != nil {
		return err
	}
	rs, err := c.runRounds(ctx)
	if err != nil {
		return err
	}
	resA := rs.breakdownOfA()
	if err := c.traceOverhead(ctx); err != nil {
		return err
	}
	b, err := c.runB(ctx)
	if err != nil {
		return err
	}
	c.report(rs, b, resA)
	if err := c.runScaled(ctx, resA); err != nil {
		return err
	}
	if err := c.runLive(ctx); err != nil {
		return err
	}
	if rs.wrong > 0 {
		return fmt.Errorf("%d of %d documents of A differ from the fold", rs.wrong, len(c.want.docs))
	}
	return c.errGroupWrong(rs)
}

// close stops what run started, the last first.
func (c *benchCommand) close() {
	if c.elog != nil {
		c.elog.Close()
	}
	if c.client != nil {
		if c.server == nil || c.postgres != "" {
			// On a server of the user's, or on the PostgreSQL the embedded
			// server stores in, which outlives this process: the next
			// bench's databases have the same names, and a checkpoint
			// left in one belongs to another log.
			dropBenchDBs(context.Background())
		}
		c.client.Disconnect(context.Background())
	}
	if c.server != nil {
		c.server.Close()
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

// startDocuments starts the embedded Mongo-wire server, unless --mongo
// names a MongoDB, and connects to the one the documents go to.
func (c *benchCommand) startDocuments(ctx context.Context) error {
	c.where = "MongoDB at --mongo"
	if c.mongoURI == "" {
		if err := c.startEmbedded(); err != nil {
			return err
		}
	}
	client, err := mongostore.Connect(ctx, c.mongoURI, 10*time.Second)
	if err != nil {
		return err
	}
	c.client = client
	return nil
}

// startEmbedded starts the embedded Mongo-wire server in a temporary
// directory, on its PostgreSQL backend with --postgres.
func (c *benchCommand) startEmbedded() error {
	dir, err := os.MkdirTemp("", "projector-bench-")
	if err != nil {
		return err
	}
	c.dir = dir
	cfg := embedded.Config{Dir: dir}
	if c.postgres != "" {
		cfg.PostgresURL = c.postgres
	}
	srv, err := embedded.Start(cfg)
	if err != nil {
		return err
	}
	c.server = srv
	c.mongoURI, c.where = srv.URI(), srv.String()
	return nil
}

// startEvents starts the event server with the carts' events, appended
// through the official client, and folds every cart into the documents A
// must make.
func (c *benchCommand) startEvents(ctx context.Context) error {
	appended := time.Now()
	elog, err := startEventLog(ctx, c.carts, c.events, c.interleave, c.tracedEvents)
	if err != nil {
		return err
	}
	c.elog = elog
	fmt.Fprintf(c.stderr, "  appended %d events: %v\n", elog.total, time.Since(appended).Round(time.Millisecond))
	c.want, err = expectedOf(c.model, elog.lives)
	return err
}

// printHeader prints what the run is on: the events, the documents' server
// and the read model.
func (c *benchCommand) printHeader() {
	fmt.Fprintf(c.stdout, "projector bench: %d events over %d carts (%d per cart, %s) of %d clients; documents on %s; events on the in-process EventStoreDB-protocol server\n",
		c.elog.total, c.carts, c.events, c.interleave, clientsOf(c.carts), c.where)
	fmt.Fprintf(c.stdout, "  read model: %s (%s): %d documents\n", c.model.def().Name(), c.model.shape, len(c.want.docs))
}

// expectDetails folds every cart into the details projection's documents
// too, for a read model other than the details: that model is compared
// with the details projection on the same events, in the same rounds (D).
// B, the seed's per-event code of the details, is then left out.
func (c *benchCommand) expectDetails() error {
	if c.model.name == "details" {
		return nil
	}
	d, err := expectedOf(benchModels["details"], c.elog.lives)
	if err != nil {
		return err
	}
	c.details = &d
	c.skipB = true
	return nil
}

// benchPhase is what one way measured.
type benchPhase struct {
	name     string
	took     time.Duration
	peakHeap uint64  // the bench's heap in use at its peak, above what it was before
	events   int     // how many events the way handled (B may take a sample)
	cores    float64 // the machine's cores busy on average while it ran (busyCores; -1: unknown)
}

// rate is the way's events per second.
func (p benchPhase) rate() float64 { return float64(p.events) / p.took.Seconds() }

// measure runs one way on a database of its own, and returns its phase and
// the database. fn may return how long the way took by its own measure (A,
// measured in its process from its start to caught up); otherwise the call
// is timed.
func (c *benchCommand) measure(ctx context.Context, name string, fn func(db *mongo.Database) (time.Duration, error)) (benchPhase, *mongo.Database, error) {
	db := benchDB(c.client, "bench_"+strings.ToLower(name))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak, stop := heapPeak()
	cores := busyCores()
	began := time.Now()
	own, err := fn(db)
	took := time.Since(began)
	busy := cores()
	if own > 0 {
		took = own
	}
	stop()
	if err != nil {
		return benchPhase{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	extra := uint64(0)
	if p := peak.Load(); p > before.HeapInuse {
		extra = p - before.HeapInuse
	}
	fmt.Fprintf(c.stderr, "  %s: %v\n", name, took.Round(time.Millisecond))
	return benchPhase{name, took, extra, c.elog.total, busy}, db, nil
}

// benchDatabases are the databases the bench made in this process, each
// under a name of its own (benchDB): the embedded server indexes a new
// collection through a connection of its own, and a database dropped and
// made again under one name while it does may read the dropped one's log
// (internal/embedded).
var benchDatabases struct {
	sync.Mutex
	n    int
	made []*mongo.Database
}

// benchDB returns a database for one way of the bench, named after base
// and a number no other call in this process gives.
func benchDB(client *mongo.Client, base string) *mongo.Database {
	benchDatabases.Lock()
	defer benchDatabases.Unlock()
	benchDatabases.n++
	db := client.Database(fmt.Sprintf("%s_%d", base, benchDatabases.n))
	benchDatabases.made = append(benchDatabases.made, db)
	return db
}

// dropBenchDBs drops the databases benchDB gave.
func dropBenchDBs(ctx context.Context) {
	benchDatabases.Lock()
	defer benchDatabases.Unlock()
	for _, db := range benchDatabases.made {
		_ = db.Drop(ctx)
	}
	benchDatabases.made = nil
}

// warmUp runs A once, untimed, on a database of its own, with --warmup.
func (c *benchCommand) warmUp(ctx context.Context) error {
	if !c.warmup {
		return nil
	}
	w, err := benchChild(ctx, c.elog.server.URI(), c.mongoURI, benchDB(c.client, "bench_warmup").Name(), c.tune, "", "")
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	fmt.Fprintf(c.stderr, "  warm-up (A, untimed): %v\n", w.took.Round(time.Millisecond))
	return nil
}

// benchRounds is what the rounds of A, D, L and R measured.
type benchRounds struct {
	a, d, l, r   []time.Duration      // each way's time, round by round
	cores        map[string][]float64 // the machine's cores busy during A, L and R, round by round
	aReps        []childReport        // A's reports, round by round
	heapA, heapL uint64               // the highest peak heap of A's and L's rounds
	maxRSS       int64                // the highest peak resident set of A's rounds
	wrong        int                  // the most documents of A that differ from the fold in a round
	g            groupRounds          // G's rounds, with --group-consumers
}

// runRounds runs A, L and R (and D), in turns, --rounds times: the medians
// are reported, so that one slow run of one way on a shared machine does
// not decide a ratio.
func (c *benchCommand) runRounds(ctx context.Context) (*benchRounds, error) {
	rs := &benchRounds{cores: map[string][]float64{}}
	for round := range c.rounds {
		if err := c.runRound(ctx, round, rs); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// runRound runs A, D (for a read model other than the details), L and R
// once each, and adds what they measured to rs. Every round's documents
// are checked, not only the last's.
func (c *benchCommand) runRound(ctx context.Context, round int, rs *benchRounds) error {
	a, rep, dbA, err := c.runA(ctx, round)
	if err != nil {
		return err
	}
	rs.wrong = max(rs.wrong, c.want.wrong(ctx, dbA))
	rs.maxRSS = max(rs.maxRSS, rep.maxRSS)
	rs.a, rs.aReps, rs.heapA = append(rs.a, a.took), append(rs.aReps, rep), max(rs.heapA, a.peakHeap)
	rs.cores["A"] = append(rs.cores["A"], a.cores)
	if c.details != nil {
		d, err := c.runD(ctx)
		if err != nil {
			return err
		}
		rs.d = append(rs.d, d)
	}
	l, _, err := c.measure(ctx, "L", func(db *mongo.Database) (time.Duration, error) { return 0, c.want.floor(ctx, db) })
	if err != nil {
		return err
	}
	rs.l, rs.heapL = append(rs.l, l.took), max(rs.heapL, l.peakHeap)
	rs.cores["L"] = append(rs.cores["L"], l.cores)
	r, _, err := c.measure(ctx, "R", func(*mongo.Database) (time.Duration, error) { return benchRead(ctx, c.elog.client, c.elog.total) })
	if err != nil {
		return err
	}
	rs.r, rs.cores["R"] = append(rs.r, r.took), append(rs.cores["R"], r.cores)
	if c.groupConsumers > 0 {
		g, wrong, err := c.runG(ctx, round)
		if err != nil {
			return err
		}
		rs.g.add(g, wrong)
	}
	return nil
}

// runA runs A in a process of its own, so that its peak memory is the
// projector's alone, not the harness's events. The profiles asked for are
// of the first round.
func (c *benchCommand) runA(ctx context.Context, round int) (benchPhase, childReport, *mongo.Database, error) {
	var rep childReport
	a, db, err := c.measure(ctx, "A", func(db *mongo.Database) (time.Duration, error) {
		profA, memA := "", ""
		if round == 0 {
			if c.cpuProfile != "" {
				stop, err := startCPUProfile(c.cpuProfile)
				if err != nil {
					return 0, err
				}
				defer stop()
			}
			profA, memA = c.cpuProfileA, c.memProfileA
		}
		var err error
		rep, err = benchChild(ctx, c.elog.server.URI(), c.mongoURI, db.Name(), c.tune, profA, memA)
		return rep.took, err
	})
	return a, rep, db, err
}

// runD runs D, the details projection on A's events, as A runs, and
// checks its documents.
func (c *benchCommand) runD(ctx context.Context) (time.Duration, error) {
	d, db, err := c.measure(ctx, "D", func(db *mongo.Database) (time.Duration, error) {
		t := c.tune
		t.projection = "details"
		rep, err := benchChild(ctx, c.elog.server.URI(), c.mongoURI, db.Name(), t, "", "")
		return rep.took, err
	})
	if err != nil {
		return 0, err
	}
	if n := c.details.wrong(ctx, db); n > 0 {
		return 0, fmt.Errorf("%d of %d documents of the details projection (D) differ from the fold", n, len(c.details.docs))
	}
	return d.took, nil
}

// breakdownOfA is the report of A's round whose time is nearest the
// median's, with the highest peak resident set of the rounds.
func (rs *benchRounds) breakdownOfA() childReport {
	mid := median(rs.a)
	resA := slices.MinFunc(rs.aReps, func(x, y childReport) int {
		return cmp.Compare((x.took - mid).Abs(), (y.took - mid).Abs())
	})
	resA.maxRSS = rs.maxRSS
	return resA
}

// ratiosAF is each round's A/F: its R and L against its A.
func (rs *benchRounds) ratiosAF() string {
	each := make([]string, len(rs.a))
	for i := range rs.a {
		each[i] = fmt.Sprintf("%.2f", (rs.r[i]+rs.l[i]).Seconds()/rs.a[i].Seconds())
	}
	return strings.Join(each, ", ")
}

// traceOverhead runs A with tracing on and off, in turns, --trace-rounds
// times, and prints what tracing costs.
func (c *benchCommand) traceOverhead(ctx context.Context) error {
	if c.traceRounds <= 0 {
		return nil
	}
	return benchTraceOverhead(ctx, c.stdout, c.stderr, c.elog.server.URI(), c.mongoURI, c.client, c.tune, c.traceRounds)
}

// runB runs B, the seed's per-event code, on the first --b-sample cart
// events of the log (all with 0); it returns nil when B is left out.
func (c *benchCommand) runB(ctx context.Context) (*benchPhase, error) {
	if c.skipB {
		return nil, nil
	}
	sample := c.elog.total
	if c.bSample > 0 && c.bSample < sample {
		sample = c.bSample
	}
	b, _, err := c.measure(ctx, "B", func(db *mongo.Database) (time.Duration, error) { return 0, benchPerEvent(ctx, c.elog.esdb, db, sample) })
	if err != nil {
		return nil, err
	}
	b.events = sample
	return &b, nil
}

// report prints the table of the ways (A, B when it ran, and L, from the
// medians of their rounds), A's ratios to the others, and what A's time
// went to (resA).
func (c *benchCommand) report(rs *benchRounds, b *benchPhase, resA childReport) {
	total := c.elog.total
	a := benchPhase{"A", median(rs.a), rs.heapA, total, medianCores(rs.cores["A"])}
	l := benchPhase{"L", median(rs.l), rs.heapL, total, medianCores(rs.cores["L"])}
	phases := []benchPhase{a}
	if b != nil {
		phases = append(phases, *b)
	}
	phases = append(phases, l)
	c.printTable(phases, rs)
	c.printRatios(a, b, l, rs)
	c.printBreakdown(resA, median(rs.r))
	c.printCores(rs)
	c.printGroup(rs)
}

// printCores prints how many of the machine's cores were busy during A, L
// and R (the medians of their rounds): where L and R keep every core busy,
// no overlap of reading and writing brings A below F.
func (c *benchCommand) printCores(rs *benchRounds) {
	if _, _, _, ok := machineTicks(); !ok {
		return // not Linux
	}
	a, l, r := medianCores(rs.cores["A"]), medianCores(rs.cores["L"]), medianCores(rs.cores["R"])
	if a < 0 || l < 0 || r < 0 {
		// A way shorter than the clock ticks /proc/stat counts in.
		fmt.Fprintf(c.stdout, "  the machine's cores busy (of %d): not measured, a way took less than the clock ticks they are counted in\n", machineCores())
		return
	}
	fmt.Fprintf(c.stdout, "  the machine's cores busy (of %d; every process, the servers' too; medians): A %.2f, L %.2f, R %.2f; "+
		"the least time reading and writing in full overlap could take, with no other work, is F's CPU over %d cores: %v\n",
		machineCores(), a, l, r, machineCores(), overlapFloor(median(rs.r), r, median(rs.l), l).Round(time.Millisecond))
}

// overlapFloor is the least time R's and L's work (their times and the
// cores they kept busy) could take done at once on this machine's cores:
// their CPU time over the cores, and no less than the longer of the two.
func overlapFloor(r time.Duration, rCores float64, l time.Duration, lCores float64) time.Duration {
	cpu := time.Duration((r.Seconds()*rCores + l.Seconds()*lCores) / float64(machineCores()) * float64(time.Second))
	return max(cpu, r, l)
}

// medianCores is the median of cores busy over rounds, -1 when a round
// could not measure it.
func medianCores(cs []float64) float64 {
	if len(cs) == 0 || slices.Contains(cs, -1) {
		return -1
	}
	s := slices.Sorted(slices.Values(cs))
	return s[len(s)/2]
}

// printTable prints a row for each of phases, the last of which is L, then
// for R and for F, the floor.
func (c *benchCommand) printTable(phases []benchPhase, rs *benchRounds) {
	total := c.elog.total
	settings := "default settings"
	if c.tune != defaultCatchUp {
		settings = c.tune.String()
	}
	runs := map[string][]time.Duration{"A": rs.a, "L": rs.l}
	fmt.Fprintf(c.stdout, "\n  %-44s %12s %10s %14s %18s\n", "way", "events/s", "time", "bench heap", "rounds: min-max")
	for _, p := range phases {
		label := map[string]string{
			"A": "A  projector catch-up (" + settings + ")",
			"B": "B  seed per-event (find revision>=n-1, update)" + map[bool]string{true: fmt.Sprintf(", %d sampled", p.events)}[p.events < total],
			"L": "L  floor: one bulk write of the folded docs",
		}[p.name]
		fmt.Fprintf(c.stdout, "  %-44s %12.0f %10v %10.1f MiB %18s\n", label, p.rate(), p.took.Round(time.Millisecond), float64(p.peakHeap)/(1<<20), spread(runs[p.name]))
	}
	readOnly := median(rs.r)
	fmt.Fprintf(c.stdout, "  %-44s %12.0f %10v %14s %18s\n", "R  reading the events alone", float64(total)/readOnly.Seconds(), readOnly.Round(time.Millisecond), "", spread(rs.r))
	// F, the floor: reading the events once (R) and writing each final
	// document once (L).
	floor := readOnly + phases[len(phases)-1].took
	fmt.Fprintf(c.stdout, "  %-44s %12.0f %10v\n", "F  floor: R (read the events) + L", float64(total)/floor.Seconds(), floor.Round(time.Millisecond))
}

// printRatios prints A's time against F's, B's (when it ran) and L's,
// whether A's documents equal the fold, and, for a read model other than
// the details, D's time against A's.
func (c *benchCommand) printRatios(a benchPhase, b *benchPhase, l benchPhase, rs *benchRounds) {
	floor := median(rs.r) + l.took
	fmt.Fprintf(c.stdout, "\n  A/F = %.2f", floor.Seconds()/a.took.Seconds())
	if c.rounds > 1 {
		fmt.Fprintf(c.stdout, " (medians of %d rounds; each round's: %s)", c.rounds, rs.ratiosAF())
	}
	if b != nil {
		fmt.Fprintf(c.stdout, "   A/B = %.2f", a.rate()/b.rate())
	}
	fmt.Fprintf(c.stdout, "   A/L = %.2f   A's documents equal the fold (and L's): %d of %d\n", a.rate()/l.rate(), len(c.want.docs)-rs.wrong, len(c.want.docs))
	if c.details != nil {
		d := median(rs.d)
		fmt.Fprintf(c.stdout, "  D  the details projection on the same events: %.0f events/s, %v (rounds %s); A's throughput / D's = %.2f\n",
			float64(c.elog.total)/d.Seconds(), d.Round(time.Millisecond), spread(rs.d), d.Seconds()/a.took.Seconds())
	}
}

// printBreakdown prints A's peak resident set and what its time went to;
// readOnly is R's time.
func (c *benchCommand) printBreakdown(resA childReport, readOnly time.Duration) {
	if resA.maxRSS > 0 {
		fmt.Fprintf(c.stdout, "  A's process peaked at %.1f MiB resident (the projector alone: runtime, clients, buffers, batches)\n", float64(resA.maxRSS)/1024)
	}
	fmt.Fprintf(c.stdout, "  A's time: %d batches of %.0f events; %d reads of their documents %v, %d bulk writes %v (summed over workers); reading the events alone takes %v; %d documents folded from their streams, which gave %d events\n",
		resA.batches, float64(resA.batched)/float64(max(1, resA.batches)), resA.reads, resA.readTime.Round(time.Millisecond), resA.writes, resA.writeTime.Round(time.Millisecond), readOnly.Round(time.Millisecond), resA.folded, resA.streamRead)
}

// spread is the least and the most of ds, or nothing for fewer than two.
func spread(ds []time.Duration) string {
	if len(ds) < 2 {
		return ""
	}
	return fmt.Sprintf("%v-%v", slices.Min(ds).Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond))
}

// runScaled runs A again on --memory-scale times the events of each cart,
// and on --documents-scale times the carts, and compares each with base.
func (c *benchCommand) runScaled(ctx context.Context, base childReport) error {
	if c.memoryScale > 1 {
		if err := benchScaled(ctx, c.stdout, c.stderr, c.mongoURI, c.client, c.model, c.carts, c.events*c.memoryScale, c.tune, base); err != nil {
			return fmt.Errorf("%dx: %w", c.memoryScale, err)
		}
	}
	if c.documentsScale > 1 {
		if err := benchScaled(ctx, c.stdout, c.stderr, c.mongoURI, c.client, c.model, c.carts*c.documentsScale, c.events, c.tune, base); err != nil {
			return fmt.Errorf("%dx the carts: %w", c.documentsScale, err)
		}
	}
	return nil
}

// runLive measures the live latency of --live-events events, and prints
// it.
func (c *benchCommand) runLive(ctx context.Context) error {
	if c.liveEvents <= 0 {
		return nil
	}
	p50, p99, err := benchLive(ctx, c.elog.server, benchDB(c.client, "bench_live"), c.model.name, c.liveEvents, c.liveRate)
	if err != nil {
		return fmt.Errorf("live: %w", err)
	}
	fmt.Fprintf(c.stdout, "  live (%s), %d events at %.0f/s: append to visible document p50 %v, p99 %v\n", c.model.name, c.liveEvents, c.liveRate, p50.Round(time.Millisecond), p99.Round(time.Millisecond))
	return nil
}

// benchScaled runs A on carts carts of events events each, on an event
// server of its own, and compares its time and peak resident set with
// base's: how A grows with the events of each document, or with the
// documents.
func benchScaled(ctx context.Context, stdout, stderr io.Writer, mongoURI string, client *mongo.Client, model benchModel, carts, events int, tune catchUpSettings, base childReport) error {
	elog, err := startEventLog(ctx, carts, events, "shuffled", false)
	if err != nil {
		return err
	}
	defer elog.Close()
	es, lives, total := elog.server, elog.lives, elog.total
	db := benchDB(client, "bench_scaled")
	rep, err := benchChild(ctx, es.URI(), mongoURI, db.Name(), tune, "", "")
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "  A on %d events: %v\n", total, rep.took.Round(time.Millisecond))
	want, err := expectedOf(model, lives)
	if err != nil {
		return err
	}
	wrong := want.wrong(ctx, db)
	memory := ""
	if rep.maxRSS > 0 && base.maxRSS > 0 {
		memory = fmt.Sprintf(", peaked at %.1f MiB resident, %.2fx the run above", float64(rep.maxRSS)/1024, float64(rep.maxRSS)/float64(base.maxRSS))
	}
	fmt.Fprintf(stdout, "  A on %d events (%d carts, %d events each; %d documents): %v, %.2fx the time of the run above%s; documents equal the fold: %d of %d\n",
		total, carts, events, len(want.docs), rep.took.Round(time.Millisecond), rep.took.Seconds()/base.took.Seconds(), memory, len(want.docs)-wrong, len(want.docs))
	if wrong > 0 {
		return fmt.Errorf("%d of %d documents differ from the fold", wrong, len(want.docs))
	}
	return nil
}

// eventLog is an in-process event server holding the lives of the bench's
// carts, with a client on it.
type eventLog struct {
	server *esdbtest.Server
	client *subscription.Client
	esdb   *kurrentdb.Client
	lives  map[string][]projector.Event // each cart's events, as the fold takes them
	total  int
}

// startEventLog starts an event server and appends carts carts of events
// events each to it, interleaved as interleave says (see benchEvents).
func startEventLog(ctx context.Context, carts, events int, interleave string, traced bool) (*eventLog, error) {
	es, err := esdbtest.Start(esdbtest.Options{})
	if err != nil {
		return nil, err
	}
	l := &eventLog{server: es}
	if l.client, err = kurrent.Dial(es.URI(), nil); err != nil {
		l.Close()
		return nil, err
	}
	if l.esdb, err = rawESDB(es.URI()); err == nil {
		l.lives, l.total, err = benchEvents(ctx, l.esdb, carts, events, interleave == "clustered", traced)
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *eventLog) Close() {
	if l.client != nil {
		l.client.Close()
	}
	if l.esdb != nil {
		l.esdb.Close()
	}
	l.server.Close()
}

// rawESDB returns an official client (KurrentDB-Client-Go) on uri, for
// the appends of the setup and for B, which reads through it as the seed
// article's code does.
func rawESDB(uri string) (*kurrentdb.Client, error) {
	cfg, err := kurrentdb.ParseConnectionString(uri)
	if err != nil {
		return nil, err
	}
	cfg.Logger = kurrentdb.NoopLogging() // the bench's output is its report
	return kurrentdb.NewClient(cfg)
}

// benchEvents appends the lives of carts carts of events events each (with
// traced, each event's metadata carries a trace context, as a traced
// writer's does: see tracedMetadata), their
// events interleaved at random over the whole log, or clustered: each cart
// active over a short window (its events spread over about ten carts'
// worth of the log, overlapping its neighbours'), as real carts are. It
// returns each cart's events as the fold takes them, and their number.
func benchEvents(ctx context.Context, cl *kurrentdb.Client, carts, events int, clustered, traced bool) (map[string][]projector.Event, int, error) {
	r := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	lives := map[string][]projector.Event{}
	var order []string
	plans := map[string][]any{}
	for i := range carts {
		id := fmt.Sprintf("cart-%05d", i)
		plans[id] = cart.RandomLife(r, id, fmt.Sprintf("client-%d", r.IntN(clientsOf(carts))), events, start)
		for range plans[id] {
			order = append(order, id)
		}
	}
	if clustered {
		// Cart i opens at i x events and has its j-th event about 10 x j
		// later, jittered; the log is in that order.
		type slot struct {
			id  string
			key float64
		}
		var slots []slot
		for i := range carts {
			id := fmt.Sprintf("cart-%05d", i)
			for j := range plans[id] {
				slots = append(slots, slot{id, float64(i*events) + 10*float64(j) + 5*r.Float64()})
			}
		}
		slices.SortStableFunc(slots, func(a, b slot) int { return cmp.Compare(a.key, b.key) })
		for k, sl := range slots {
			order[k] = sl.id
		}
	} else {
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	next := map[string]int{}
	for _, id := range order {
		n := next[id]
		next[id]++
		name, data, err := cart.Registry().Encode(plans[id][n])
		if err != nil {
			return nil, 0, err
		}
		// Every event names its cart's client, as the write side's do.
		client := plans[id][0].(cart.ShoppingCartOpened).ClientID
		meta := []byte(`{"clientId":"` + client + `"}`)
		if traced {
			meta = tracedMetadata(r, client)
		}
		if _, err := cl.AppendToStream(ctx, cart.StreamID(id), kurrentdb.AppendToStreamOptions{}, kurrentdb.EventData{EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: data, Metadata: meta}); err != nil {
			return nil, 0, err
		}
		lives[id] = append(lives[id], projector.Event{Type: name, StreamID: cart.StreamID(id), StreamRevision: uint64(n), Metadata: meta, Payload: plans[id][n]})
	}
	return lives, len(order), nil
}

// clientsOf is how many clients the bench's carts have: one for ten carts.
func clientsOf(carts int) int { return max(1, carts/10) }

// catchUpSettings are the runner settings bench passes on to A, and the
// read model it builds.
type catchUpSettings struct {
	projection     string // a key of benchModels
	workers, batch int
	batchMiB       int
	window         time.Duration
	noFolds        bool // batches fold only their own events (projector.WithoutStreamFolds)
	traced         bool // A traces every event (benchTracer)
}

// defaultCatchUp is the runner's defaults.
var defaultCatchUp = catchUpSettings{projection: "details", workers: projector.DefaultWorkers, batch: projector.DefaultBatch,
	batchMiB: projector.DefaultBatchBytes >> 20, window: projector.DefaultBatchWindow}

// register makes the settings flags of fs; args gives them back.
func (c *catchUpSettings) register(fs *flag.FlagSet) {
	fs.StringVar(&c.projection, "projection", c.projection, "the read model A builds: details (a document per cart), client (a document per client, fed by its carts, RevisionMap) or shop (one document fed by every cart, HandledIDs)")
	fs.IntVar(&c.workers, "workers", c.workers, "A's workers")
	fs.IntVar(&c.batch, "batch", c.batch, "A's largest batch")
	fs.IntVar(&c.batchMiB, "batch-mib", c.batchMiB, "A's largest batch in MiB of event data and metadata (run's --batch-mib)")
	fs.DurationVar(&c.window, "batch-window", c.window, "A's batch window while behind the head")
	fs.BoolVar(&c.noFolds, "no-stream-folds", c.noFolds, "A's batches fold only their own events, not a document's whole stream")
}

func (c catchUpSettings) options() []projector.RunnerOption {
	return []projector.RunnerOption{projector.WithWorkers(c.workers), projector.WithBatch(c.batch, c.window), projector.WithBatchBytes(c.batchMiB << 20)}
}

func (c catchUpSettings) String() string {
	s := fmt.Sprintf("workers %d, batch %d, window %v", c.workers, c.batch, c.window)
	if c.batchMiB != defaultCatchUp.batchMiB {
		s += fmt.Sprintf(", %d MiB", c.batchMiB)
	}
	if c.projection != defaultCatchUp.projection {
		s = c.projection + ", " + s
	}
	if c.noFolds {
		s += ", no stream folds"
	}
	return s
}

func (c catchUpSettings) args() []string {
	return []string{"--projection", c.projection, "--workers", fmt.Sprint(c.workers), "--batch", fmt.Sprint(c.batch), "--batch-mib", fmt.Sprint(c.batchMiB), "--batch-window", c.window.String(),
		fmt.Sprintf("--no-stream-folds=%v", c.noFolds), fmt.Sprintf("--traced=%v", c.traced)}
}

// childReport is what the catch-up process reports of its run.
type childReport struct {
	took                time.Duration // from its start (engine, subscription) to caught up
	cpu                 time.Duration // the CPU time of its whole process (user and system)
	batches, batched    uint64
	reads, writes       uint64
	readTime, writeTime time.Duration
	maxRSS              int64  // KiB
	folded, streamRead  uint64 // documents folded from their streams; events those reads gave
	spans               uint64
}

// benchChild runs A in a child process and returns what it measured and its
// peak resident set. With profile or memProfile set, the child writes a CPU
// profile of itself, or a heap profile at its peak, there.
func benchChild(ctx context.Context, esdbURI, mongoURI, database string, tune catchUpSettings, profile, memProfile string) (childReport, error) {
	var rep childReport
	self, err := os.Executable()
	if err != nil {
		return rep, err
	}
	args := append([]string{"bench-catch-up", "--esdb", esdbURI, "--mongo", mongoURI, "--database", database, "--cpuprofile", profile, "--memprofile", memProfile}, tune.args()...)
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return rep, fmt.Errorf("catch-up process: %w", err)
	}
	var took, readTime, writeTime int64
	if _, err := fmt.Sscanf(string(out), "caught up in %d ns: %d batches, %d events; %d reads %d ns; %d writes %d ns; peak resident %d KiB; %d folded, %d read by stream; %d spans",
		&took, &rep.batches, &rep.batched, &rep.reads, &readTime, &rep.writes, &writeTime, &rep.maxRSS, &rep.folded, &rep.streamRead, &rep.spans); err != nil {
		return rep, fmt.Errorf("catch-up process: unexpected report %q: %w", out, err)
	}
	rep.took, rep.readTime, rep.writeTime = time.Duration(took), time.Duration(readTime), time.Duration(writeTime)
	rep.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return rep, nil
}

// runBenchCatchUp is A, in the process bench starts for it. It reports on
// stdout, in one line, what benchChild reads.
func runBenchCatchUp(ctx context.Context, inv app.Invocation) error {
	stdout := inv.Stdout
	var esdbURI, mongoURI, database, profile, memProfile string
	tune := defaultCatchUp
	fs := inv.FlagSet("(started by bench)")
	fs.StringVar(&esdbURI, "esdb", "", "")
	fs.StringVar(&mongoURI, "mongo", "", "")
	fs.StringVar(&database, "database", "", "")
	fs.StringVar(&profile, "cpuprofile", "", "")
	fs.StringVar(&memProfile, "memprofile", "", "")
	fs.BoolVar(&tune.traced, "traced", false, "")
	tune.register(fs)
	if err := app.ParseFlags(fs, inv.Args); err != nil {
		return err
	}
	client, err := mongostore.Connect(ctx, mongoURI, 10*time.Second)
	if err != nil {
		return err
	}
	defer client.Disconnect(context.Background())
	if profile != "" {
		stop, err := startCPUProfile(profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	var stopSampling func()
	if memProfile != "" {
		stopSampling = heapProfileAtPeak(memProfile)
	}
	rep, err := benchProjector(ctx, esdbURI, client.Database(database), tune)
	if stopSampling != nil {
		stopSampling()
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "caught up in %d ns: %d batches, %d events; %d reads %d ns; %d writes %d ns; peak resident %d KiB; %d folded, %d read by stream; %d spans\n",
		int64(rep.took), rep.batches, rep.batched, rep.reads, int64(rep.readTime), rep.writes, int64(rep.writeTime), peakResident(), rep.folded, rep.streamRead, rep.spans)
	return err
}

// startCPUProfile writes a CPU profile of this process to path until
// stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// peakResident returns this process's peak resident set in KiB: VmHWM, the
// high-water mark of its own address space. (The rusage of a child is no
// use here: Linux folds into it the resident set of the parent the child was
// forked from, before its exec.) It returns -1 where /proc is not there.
func peakResident() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			if _, err := fmt.Sscanf(rest, "%d kB", &kib); err == nil {
				return kib
			}
		}
	}
	return -1
}

// heapProfileAtPeak writes a heap profile to path each time the heap in
// use passes its peak so far by 5%, until stop: the last one written is the
// profile at the peak.
func heapProfileAtPeak(path string) (stop func()) {
	var peak uint64
	return sampleHeap(20*time.Millisecond, func(inUse uint64) {
		if inUse > peak+peak/20 {
			peak = inUse
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	})
}

// heapPeak samples the heap in use every 10 ms until stop.
func heapPeak() (*atomic.Uint64, func()) {
	var peak atomic.Uint64
	stop := sampleHeap(10*time.Millisecond, func(inUse uint64) {
		if inUse > peak.Load() {
			peak.Store(inUse)
		}
	})
	return &peak, stop
}

// sampleHeap calls fn with the heap in use now, then every interval, and
// once more when stopped; fn runs on one goroutine.
func sampleHeap(every time.Duration, fn func(inUse uint64)) (stop func()) {
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fn(m.HeapInuse)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				sample()
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// benchProjector is A: the runner catching up from the start of $all. The
// time runs from before the engine prepares its collections to caught up.
func benchProjector(ctx context.Context, esdbURI string, db *mongo.Database, tune catchUpSettings) (childReport, error) {
	var rep childReport
	began := time.Now()
	store := &countingStore{Store: mongostore.New(db)}
	c, err := kurrent.Dial(esdbURI, nil)
	if err != nil {
		return rep, err
	}
	defer c.Close()
	history := &countingHistory{Client: c}
	tp, flush, spans := benchTracer(tune.traced)
	opts := []projector.Option{projector.WithStreamReader(history), projector.WithTracerProvider(tp)}
	if tune.noFolds {
		opts = append(opts, projector.WithoutStreamFolds())
	}
	model, ok := benchModels[tune.projection]
	if !ok {
		return rep, fmt.Errorf("no read model %q", tune.projection)
	}
	eng, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{model.def()}, opts...)
	if err != nil {
		return rep, err
	}
	if err := eng.Prepare(ctx); err != nil {
		return rep, err
	}
	src, err := subscription.NewAll(c, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}})
	if err != nil {
		return rep, err
	}
	r, err := projector.NewRunner("bench", eng, src, store, tune.options()...)
	if err != nil {
		return rep, err
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	for !r.CaughtUp() {
		select {
		case err := <-done:
			stop()
			return rep, fmt.Errorf("runner ended: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	if err := flush(ctx); err != nil {
		stop()
		return rep, fmt.Errorf("flushing spans: %w", err)
	}
	rep.took = time.Since(began)
	rep.spans = spans()
	stop()
	if err := <-done; err != nil {
		return rep, err
	}
	st := r.Stats()
	rep.batches, rep.batched = st.Batches, st.Batched
	rep.folded, rep.streamRead = eng.StreamsFolded(), history.events.Load()
	rep.reads, rep.readTime = store.reads.Load(), time.Duration(store.readNanos.Load())
	rep.writes, rep.writeTime = store.writes.Load(), time.Duration(store.writeNanos.Load())
	return rep, nil
}

// countingHistory counts the events A's stream folds read.
type countingHistory struct {
	*subscription.Client
	events atomic.Uint64
}

func (h *countingHistory) ReadStream(ctx context.Context, stream string, from uint64, each func(projector.Event) error) error {
	return h.Client.ReadStream(ctx, stream, from, func(ev projector.Event) error {
		h.events.Add(1)
		return each(ev)
	})
}

// countingStore counts and times A's batch reads and writes.
type countingStore struct {
	*mongostore.Store
	reads, writes         atomic.Uint64
	readNanos, writeNanos atomic.Int64
}

func (s *countingStore) LoadMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]driver.Loaded, error) {
	defer s.add(&s.reads, &s.readNanos, time.Now())
	return s.Store.LoadMany(ctx, collection, ids, newState)
}

func (s *countingStore) WriteMany(ctx context.Context, collection string, writes []driver.Write) ([]bool, error) {
	defer s.add(&s.writes, &s.writeNanos, time.Now())
	return s.Store.WriteMany(ctx, collection, writes)
}

func (s *countingStore) add(n *atomic.Uint64, nanos *atomic.Int64, start time.Time) {
	n.Add(1)
	nanos.Add(int64(time.Since(start)))
}

// benchRead reads the events alone, through the subscription A uses, from
// the start of $all to its head: the least time any catch-up takes.
func benchRead(ctx context.Context, c *subscription.Client, total int) (time.Duration, error) {
	began := time.Now()
	src, err := subscription.NewAll(c, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}})
	if err != nil {
		return 0, err
	}
	s, err := src.Subscribe(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	n := 0
	for {
		d, err := s.Next(ctx)
		if err != nil {
			return 0, err
		}
		if d.Event != nil {
			n++
		}
		if d.CaughtUp {
			break
		}
	}
	if n != total {
		return 0, fmt.Errorf("read %d events of %d", n, total)
	}
	return time.Since(began), nil
}

// benchPerEvent is B, the seed article's code: for each event, in order,
// find the document with revision >= n-1, skip it when it is past n-1, else
// apply and update with the revision filter; two round trips per event.
func benchPerEvent(ctx context.Context, cl *kurrentdb.Client, db *mongo.Database, sample int) error {
	coll := db.Collection(cart.DetailsName)
	details := cart.NewDetailsProjection()
	s, err := cl.ReadAll(ctx, kurrentdb.ReadAllOptions{From: kurrentdb.Start{}}, 1<<62)
	if err != nil {
		return err
	}
	defer s.Close()
	for handled := 0; handled < sample; handled++ {
		re, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		ev, err := envelope(re)
		if err != nil || !strings.HasPrefix(ev.StreamID, cart.StreamPrefix) {
			handled-- // not a cart event: not in the sample
			continue
		}
		if ev, err = cart.Registry().Decode(ev); err != nil {
			return err
		}
		id := strings.TrimPrefix(ev.StreamID, cart.StreamPrefix)
		n := int64(ev.StreamRevision)
		if n == 0 {
			state, err := details.Apply(cart.Details{}, ev)
			if err != nil {
				return err
			}
			doc := bson.M{"_id": id, "revision": int64(0), "clientId": state.ClientID, "status": state.Status, "productItems": state.ProductItems, "openedAt": state.OpenedAt}
			if _, err := coll.InsertOne(ctx, doc); err != nil && !mongo.IsDuplicateKeyError(err) {
				return err
			}
			continue
		}
		var cur struct {
			cart.Details `bson:",inline"`
			Revision     int64 `bson:"revision"`
		}
		if err := coll.FindOne(ctx, bson.M{"_id": id, "revision": bson.M{"$gte": n - 1}}).Decode(&cur); err != nil {
			return fmt.Errorf("%s at %d: %w", id, n, err)
		}
		if cur.Revision > n-1 {
			continue
		}
		next, err := details.Apply(cur.Details, ev)
		if err != nil {
			return err
		}
		set := bson.M{"revision": n, "status": next.Status, "productItems": next.ProductItems, "confirmedAt": next.ConfirmedAt, "canceledAt": next.CanceledAt}
		if _, err := coll.UpdateOne(ctx, bson.M{"_id": id, "revision": n - 1}, bson.M{"$set": set}); err != nil {
			return err
		}
	}
	return nil
}

// envelope is the event the engine would handle for re, an event of $all
// read without resolving links.
func envelope(re *kurrentdb.ResolvedEvent) (projector.Event, error) {
	e := re.Event
	if e == nil {
		return projector.Event{}, errors.New("bench: a read of $all without its event")
	}
	return neutral.Envelope(&neutral.Recorded{
		ID: e.EventID, Type: e.EventType, Stream: e.StreamID, Revision: e.EventNumber,
		Commit: e.Position.Commit, Prepare: e.Position.Prepare, Created: e.CreatedDate, Data: e.Data, Metadata: e.UserMetadata,
	}, nil, re.Commit)
}
