package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/revgate/projector/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/retry"
	"github.com/revgate/projector/subscription"
)

// catalogEntry is a projection the binary can run, with the streams it reads.
type catalogEntry struct {
	def          projector.Definition
	streamPrefix string
	collection   string // its own collection
	// in returns the projection writing to another collection (a rebuild's).
	in func(collection string) projector.Definition
}

// catalog returns the projections built into the binary, by name.
func catalog() map[string]catalogEntry {
	return map[string]catalogEntry{
		cart.DetailsName: {
			def: cart.NewDetailsProjection(), streamPrefix: cart.StreamPrefix, collection: cart.DetailsName,
			in: func(c string) projector.Definition { return cart.NewDetailsProjection().InCollection(c) },
		},
		cart.ClientSummaryName: {
			def: cart.NewClientSummaryProjection(), streamPrefix: cart.StreamPrefix, collection: cart.ClientSummaryName,
			in: func(c string) projector.Definition { return cart.NewClientSummaryProjection().InCollection(c) },
		},
		cart.ShopSummaryName: {
			def: cart.NewShopSummaryProjection(), streamPrefix: cart.StreamPrefix, collection: cart.ShopSummaryName,
			in: func(c string) projector.Definition { return cart.NewShopSummaryProjection().InCollection(c) },
		},
	}
}

func registry() *projector.Registry { return cart.Registry() }

type runConfig struct {
	esdbURI, mongoURI, database, dataDir string
	projections, group, httpAddr         string
	logFormat, logLevel, onFailure       string
	connectTimeout, checkpointInterval   time.Duration
	drainTimeout                         time.Duration
	workers, checkpointEvery             int
	batch                                int
	batchWindow                          time.Duration
	retry                                retry.Policy
}

// batchFlags registers the batching of catch-up.
func batchFlags(fs *flag.FlagSet, size *int, window *time.Duration) {
	fs.IntVar(size, "batch", projector.DefaultBatch, "while catching up, events a worker folds and writes together, each document once (1: one event at a time)")
	fs.DurationVar(window, "batch-window", projector.DefaultBatchWindow, "while catching up, how long a worker waits for its next event before it writes its batch")
}

// retryFlags registers every setting of a retry policy as flags with prefix.
func retryFlags(fs *flag.FlagSet, p *retry.Policy, prefix, what string) {
	fs.DurationVar(&p.InitialDelay, prefix+"initial-delay", p.InitialDelay, what+": first wait")
	fs.Float64Var(&p.Multiplier, prefix+"multiplier", p.Multiplier, what+": growth of each wait")
	fs.Float64Var(&p.Jitter, prefix+"jitter", p.Jitter, what+": random share of each wait, in [0, 1)")
	fs.DurationVar(&p.MaxDelay, prefix+"max-delay", p.MaxDelay, what+": longest wait")
	fs.IntVar(&p.MaxRetries, prefix+"max-retries", p.MaxRetries, what+": retries after the first attempt (-1: bounded by max-elapsed only)")
	fs.DurationVar(&p.MaxElapsed, prefix+"max-elapsed", p.MaxElapsed, what+": bound on the whole wait (0: none)")
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := runConfig{retry: retry.Default()}
	fs := newFlags("run", "run [flags]  (every flag can also be set as PROJECTOR_<FLAG>, e.g. PROJECTOR_ESDB)", stderr)
	fs.StringVar(&c.esdbURI, "esdb", "", "EventStoreDB connection string, e.g. esdb://localhost:2113?tls=false (required)")
	fs.StringVar(&c.mongoURI, "mongo", "", "MongoDB URI; empty starts the embedded Mongo-wire server with its data under --data-dir")
	fs.StringVar(&c.database, "database", "projector", "database of the read models and checkpoints")
	fs.StringVar(&c.dataDir, "data-dir", "projector-data", "data of the embedded Mongo-wire server (kept across runs)")
	fs.StringVar(&c.projections, "projections", "", "comma-separated projections to run (default: all: "+strings.Join(projectionNames(), ", ")+")")
	fs.StringVar(&c.group, "group", "", "consume a persistent subscription group of this name (created if missing) instead of a catch-up subscription")
	fs.StringVar(&c.httpAddr, "http", "localhost:9090", "address of /metrics, /healthz and /readyz (empty: no HTTP server)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.onFailure, "on-failure", "block", "an event that fails permanently: block (its document waits; catch-up stops), park (recorded in projector_parked for replay-parked, the document moves past it) or skip (the document moves past it)")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 10*time.Second, "how long to wait for EventStoreDB and MongoDB to answer at start")
	fs.DurationVar(&c.drainTimeout, "drain-timeout", 20*time.Second, "on SIGTERM, how long events being handled may take to finish")
	fs.IntVar(&c.workers, "workers", projector.DefaultWorkers, "events handled at once per projection (one stream's events stay in order)")
	batchFlags(fs, &c.batch, &c.batchWindow)
	fs.IntVar(&c.checkpointEvery, "checkpoint-every", 500, "store the checkpoint after this many events")
	fs.DurationVar(&c.checkpointInterval, "checkpoint-interval", time.Second, "and at least this often while it moves")
	retryFlags(fs, &c.retry, "retry-", "revision gate retries")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, c.logFormat, c.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return errUsage
	}
	defs, _, err := selectProjections(c.projections)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return errUsage
	}
	policy := projector.Block
	switch c.onFailure {
	case "block":
	case "skip":
		policy = projector.Skip
	case "park":
		policy = projector.Park
	default:
		fmt.Fprintf(stderr, "--on-failure %q: want block, park or skip\n", c.onFailure)
		return errUsage
	}
	if err := c.retry.Validate(); err != nil {
		fmt.Fprintf(stderr, "--retry-*: %v\n", err)
		return errUsage
	}
	if c.connectTimeout <= 0 {
		fmt.Fprintf(stderr, "--connect-timeout must be > 0, got %v\n", c.connectTimeout)
		return errUsage
	}
	if c.esdbURI == "" {
		fmt.Fprintln(stderr, "--esdb (or PROJECTOR_ESDB) is required: the EventStoreDB to read, e.g. esdb://localhost:2113?tls=false")
		return errUsage
	}
	client, err := subscription.Dial(c.esdbURI, logger)
	if err != nil {
		return err
	}
	defer client.Close()

	var listener net.Listener
	if c.httpAddr != "" {
		if listener, err = net.Listen("tcp", c.httpAddr); err != nil {
			return fmt.Errorf("--http %s: %w", c.httpAddr, err)
		}
		defer listener.Close()
	}

	opened, err := openStore(ctx, c.mongoURI, c.dataDir, c.database, c.connectTimeout, logger.With("component", "ferretdb"))
	if err != nil {
		return err
	}
	defer opened.close()
	if opened.embedded != nil {
		fmt.Fprintf(stdout, "read models on %s: mongosh %q, database %s\n", opened.embedded, opened.uri, c.database)
	}
	store := opened.Store
	if err := probeESDB(ctx, client, c.connectTimeout); err != nil {
		return err
	}
	caps, err := store.Capabilities(ctx)
	if err != nil {
		return err
	}
	if c.group != "" && !caps.AtomicConditionalWrites {
		logger.Warn("this server has no atomic conditional writes: run one projector process per group on it", "server", caps.Server)
	}

	metrics := prometheus.NewRegistry()
	latency := storeLatency()
	metrics.MustRegister(latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var slots []*slot
	var views []runnerView
	for _, def := range defs {
		sl := &slot{name: def.Name(), entry: catalog()[def.Name()]}
		slots, views = append(slots, sl), append(views, sl)
	}
	// build makes the runner of one projection writing to collection; its
	// checkpoint is named after the collection, so that a rebuild's carries
	// over when readers switch to it.
	build := func(sl *slot) func(context.Context, string) (*projector.Runner, error) {
		return func(ctx context.Context, collection string) (*projector.Runner, error) {
			def := sl.entry.in(collection)
			eng, err := projector.NewEngine(timedStore{store, latency}, registry(), []projector.Definition{def},
				projector.WithRetry(c.retry), projector.WithLogger(logger.With("projection", sl.name)), projector.WithFailurePolicy(policy), projector.WithParker(store))
			if err != nil {
				return nil, err
			}
			if err := eng.Prepare(ctx); err != nil {
				return nil, err
			}
			src, err := source(client, c.group, sl.name, sl.entry.streamPrefix, logger)
			if err != nil {
				return nil, err
			}
			if p, ok := src.(*subscription.Persistent); ok {
				sl.group.Store(p)
			}
			var cps projector.CheckpointStore = store
			if c.group != "" {
				cps = nil // the server keeps the group's position
			}
			return projector.NewRunner(collection, eng, src, cps,
				projector.WithWorkers(c.workers), projector.WithCheckpointEvery(c.checkpointEvery, c.checkpointInterval),
				projector.WithBatch(c.batch, c.batchWindow), projector.WithDrainTimeout(c.drainTimeout))
		}
	}
	// Settings that cannot work fail here, before anything runs.
	for _, sl := range slots {
		if _, err := build(sl)(ctx, sl.entry.collection); err != nil {
			fmt.Fprintln(stderr, err)
			return errUsage
		}
	}

	errs := make([]error, len(slots))
	var wg sync.WaitGroup
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	head := &headSampler{}
	metrics.MustRegister(newRunnerCollector(views, head))
	var sampler sync.WaitGroup
	sampler.Go(func() { head.run(runCtx, client, views, logger) })
	if listener != nil {
		mux := healthHandler(views, c.group != "")
		mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(listener)
		defer srv.Close()
		logger.Info("http", "addr", listener.Addr().String(), "paths", "/metrics /healthz /readyz")
	}
	logger.Info("projector runs", "esdb", client.String(), "projections", projectionList(defs), "group", c.group)

	for i, sl := range slots {
		wg.Go(func() {
			// A group's position is the server's, not a checkpoint: a
			// --group projector does not follow a rebuild's switch.
			if errs[i] = sl.run(runCtx, store, c.group == "", logger, build(sl)); errs[i] != nil {
				stopAll() // one projection failing stops the process: a supervisor restarts it
			}
		})
	}
	wg.Wait()
	stopAll()
	samplerDone := make(chan struct{})
	go func() { sampler.Wait(); close(samplerDone) }()
	select {
	case <-samplerDone:
	case <-time.After(5 * time.Second):
		logger.Warn("the metrics sampler did not stop; leaving it")
	}
	for _, sl := range slots {
		st := sl.Stats()
		logger.Info("projection stopped", "projection", sl.name, "applied", st.Applied, "duplicates", st.Duplicates,
			"skipped", st.Skipped, "failed", st.Failed, "checkpoint", checkpointString(st.Checkpoint))
	}
	return errors.Join(errs...)
}

func checkpointString(c *projector.Checkpoint) string {
	if c == nil {
		return "none"
	}
	return c.String()
}

func projectionNames() []string {
	var names []string
	for name := range catalog() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func projectionList(defs []projector.Definition) string {
	var names []string
	for _, d := range defs {
		names = append(names, d.Name())
	}
	return strings.Join(names, ",")
}

// selectProjections returns the projections named in list (all when empty),
// with the stream prefix each reads.
func selectProjections(list string) ([]projector.Definition, []string, error) {
	cat := catalog()
	names := projectionNames()
	if strings.TrimSpace(list) != "" {
		names = nil
		for _, n := range strings.Split(list, ",") {
			if n = strings.TrimSpace(n); n != "" && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("--projections %q names no projection; known: %s", list, strings.Join(projectionNames(), ", "))
	}
	var defs []projector.Definition
	var prefixes []string
	for _, n := range names {
		e, ok := cat[n]
		if !ok {
			return nil, nil, fmt.Errorf("unknown projection %q; known: %s", n, strings.Join(projectionNames(), ", "))
		}
		defs = append(defs, e.def)
		prefixes = append(prefixes, e.streamPrefix)
	}
	return defs, prefixes, nil
}

// source is the subscription of one projection: $all filtered to its streams,
// or a persistent group on them.
func source(client *subscription.Client, group, name, prefix string, logger *slog.Logger) (projector.Source, error) {
	if group == "" {
		return subscription.NewAll(client, subscription.AllOptions{StreamPrefixes: []string{prefix}, Logger: logger})
	}
	settings := esdb.SubscriptionSettingsDefault()
	settings.StartFrom = esdb.Start{}
	settings.ConsumerStrategyName = esdb.ConsumerStrategyRoundRobin
	return subscription.NewPersistent(client, subscription.PersistentOptions{
		Stream: subscription.AllStreams, Group: group + "-" + name, Logger: logger,
		CreateAll: &esdb.PersistentAllSubscriptionOptions{
			Settings: &settings, StartFrom: esdb.Start{},
			Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{prefix}},
		},
	})
}

// probeESDB reads one event of $all, so that a wrong address or a server that
// does not answer fails the start within timeout, with a clear message.
func probeESDB(ctx context.Context, c *subscription.Client, timeout time.Duration) error {
	cl, err := c.ESDB()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		s, err := cl.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
		if err == nil {
			_, err = s.Recv()
			s.Close()
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
		errc <- err
	}()
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("EventStoreDB at %s does not answer within %v: %w", c, timeout, err)
	}
	return nil
}

// healthHandler serves /healthz (the process is alive) and /readyz (every
// projection has caught up with the head of its subscription; for a
// persistent group, which has no head to reach, every consumer is connected).
func healthHandler(runners []runnerView, group bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		var behind []string
		for _, r := range runners {
			if (!group && !r.CaughtUp()) || (group && !r.Connected()) {
				behind = append(behind, r.Name())
			}
		}
		if len(behind) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "catching up: %s\n", strings.Join(behind, ", "))
			return
		}
		io.WriteString(w, "ready\n")
	})
	return mux
}

// newLogger returns a slog logger on w.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// fromEnv sets every flag not given on the command line from the environment
// variable prefix+NAME (dashes as underscores, upper case), if set.
func fromEnv(fs *flag.FlagSet, prefix string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		name := prefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", name, v, e)
			}
		}
	})
	return err
}
