package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/app/embedmongo"
	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
	"github.com/revgate/projector/subscription"
)

type demoConfig struct {
	carts, events, consumers, drops int
	rate, duplicates                float64
	seed                            uint64
	dataDir, mongoURI, database     string
	connectTimeout, timeout         time.Duration
	hold                            bool
}

func (c demoConfig) validate() error {
	switch {
	case c.carts < 1:
		return errors.New("--carts must be at least 1")
	case c.events < 1:
		return errors.New("--events must be at least 1")
	case c.consumers < 1:
		return errors.New("--consumers must be at least 1")
	case c.drops < 0:
		return errors.New("--drops must be at least 0")
	case !(c.rate >= 0) || c.rate > 1e6:
		return errors.New("--rate must be in [0, 1000000]")
	case !(c.duplicates >= 0 && c.duplicates <= 1):
		return errors.New("--duplicates must be in [0, 1]")
	case c.timeout <= 0 || c.connectTimeout <= 0:
		return errors.New("--timeout and --connect-timeout must be > 0")
	}
	if c.mongoURI != "" {
		if err := mongostore.CheckURI(c.mongoURI); err != nil {
			return fmt.Errorf("--mongo: %w", err)
		}
	}
	return nil
}

// demoPath is one way the demo projects the carts: a catch-up subscription
// with a checkpoint, or the competing consumers of a persistent group.
type demoPath struct {
	name       string
	projection *projector.Projection[cart.Details]
	runners    []*projector.Runner
	// handedBack: a failed event is handed back to the server, which
	// delivers it again (a persistent group).
	handedBack bool
	// took is how long after the first append its runners had applied
	// every event (waitDemo notes it).
	took time.Duration
}

func (p *demoPath) stats() projector.RunnerStats {
	var s projector.RunnerStats
	for _, r := range p.runners {
		st := r.Stats()
		s.Events += st.Events
		s.Applied += st.Applied
		s.Duplicates += st.Duplicates
		s.Skipped += st.Skipped
		s.Failed += st.Failed
		s.Waits += st.Waits
		s.Drops += st.Drops
	}
	return s
}

func runDemo(ctx context.Context, inv app.Invocation) error {
	stdout, stderr := inv.Stdout, inv.Stderr
	var c demoConfig
	fs := inv.FlagSet("[flags]")
	fs.IntVar(&c.carts, "carts", 50, "shopping carts to simulate")
	fs.IntVar(&c.events, "events", 10, "events per cart")
	fs.Float64Var(&c.rate, "rate", 0, "events appended per second (0: as fast as the server takes them)")
	fs.IntVar(&c.consumers, "consumers", 3, "competing consumers of the persistent subscription group")
	fs.Float64Var(&c.duplicates, "duplicates", 0.2, "share of deliveries the server sends twice")
	fs.IntVar(&c.drops, "drops", 3, "times the server drops every subscription while the traffic runs")
	fs.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "seed of the traffic and of the faults")
	fs.StringVar(&c.dataDir, "data-dir", "projector-data", "where the embedded Mongo-wire server keeps its data (kept across runs)")
	fs.StringVar(&c.mongoURI, "mongo", "", "MongoDB URI to use instead of the embedded server")
	fs.StringVar(&c.database, "database", "projector_demo", "database of the read models; emptied at the start")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 10*time.Second, "how long to wait for MongoDB to answer")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up if the read models are not complete by then")
	fs.BoolVar(&c.hold, "hold", false, "after the report, keep the servers up (until Ctrl-C) to look at the data")
	if err := app.ParseFlags(fs, inv.Args); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return app.ErrUsage
	}

	opened, err := app.OpenStore(ctx, app.StoreOptions{MongoURI: c.mongoURI, DataDir: c.dataDir, Database: c.database,
		Timeout: c.connectTimeout, Embedded: embedmongo.Start})
	if err != nil {
		return err
	}
	defer opened.Close()
	store, mongoURI, where := opened.Store, opened.URI, opened.Where()
	if err := store.Database().Drop(ctx); err != nil {
		return fmt.Errorf("empty database %s: %w", c.database, err)
	}
	es, err := esdbtest.Start(esdbtest.Options{Seed: int64(c.seed)})
	if err != nil {
		return err
	}
	defer es.Close()
	fmt.Fprintf(stdout, "projector demo: %d carts x %d events, %d consumers, %.0f%% duplicated deliveries, %d drops, seed %d\n",
		c.carts, c.events, c.consumers, 100*c.duplicates, c.drops, c.seed)
	fmt.Fprintf(stdout, "  events on the in-process EventStoreDB-protocol test server %s\n  read models on %s: %s (database %s)\n", es.Addr(), where, subscription.Redact(mongoURI), c.database)

	caps, err := store.Capabilities(ctx)
	if err != nil {
		return err
	}
	paths, err := demoPaths(ctx, c, es, store, caps.AtomicConditionalWrites)
	if err != nil {
		return err
	}
	if !caps.AtomicConditionalWrites {
		fmt.Fprintf(stdout, "  %s has no atomic conditional writes: the %d consumers share one engine\n", caps.Server, c.consumers)
	}

	runCtx, stopRunners := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer func() {
		stopRunners()
		running.Wait()
	}()
	runErrs := make(chan error, 16)
	for _, p := range paths {
		for _, r := range p.runners {
			running.Go(func() {
				if err := r.Run(runCtx); err != nil {
					runErrs <- err
				}
			})
		}
	}

	began := time.Now()
	lives, appended, retried, trafficErr := startTraffic(runCtx, c, es)
	total := c.carts * c.events
	stopProgress := progress(stderr, func() string {
		line := fmt.Sprintf("appended %d/%d", appended.Load(), total)
		for _, p := range paths {
			st := p.stats()
			line += fmt.Sprintf(" | %s: %d applied, %d duplicates, %d waits", p.name, st.Applied, st.Duplicates, st.Waits)
		}
		return line
	})
	err = waitDemo(runCtx, c, began, paths, appended, total, trafficErr, runErrs)
	took := time.Since(began)
	stopProgress()
	if err != nil {
		return err
	}
	stopRunners()
	running.Wait()

	failed := false
	streams, err := lives(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "  %d events in %d carts, appended through the write side (%d commands retried, appended once) and projected in %v\n",
		total, c.carts, retried.Load(), took.Round(time.Millisecond))
	for _, p := range paths {
		right, wrong, err := checkDemo(ctx, store, p.projection, streams)
		if err != nil {
			return err
		}
		st := p.stats()
		failures := fmt.Sprint("failed ", st.Failed)
		if p.handedBack && st.Failed > 0 {
			failures += " (waited for a predecessor queued behind them: handed back to the group, delivered again)"
		}
		fmt.Fprintf(stdout, "  %-12s applied %d, duplicates skipped %d, %s, gate waits %d, drops %d, all applied %v after the first append; documents %d of %d equal to the pure fold\n",
			p.name, st.Applied, st.Duplicates, failures, st.Waits, st.Drops, p.took.Round(time.Millisecond), right, c.carts)
		if len(wrong) > 0 || st.Applied != uint64(total) {
			failed = true
			fmt.Fprintf(stdout, "  %s: wrong documents %v\n", p.name, wrong)
		}
	}
	if failed {
		return errors.New("some documents are not the fold of their events")
	}
	fmt.Fprintf(stdout, "every document is right. Look at them: collections %s (catch-up) and %s (group) in database %s",
		paths[0].projection.Collection(), paths[1].projection.Collection(), c.database)
	if c.mongoURI == "" && !c.hold {
		fmt.Fprintf(stdout, "; the data stays in %s (run the demo with --hold to keep the server up, and point mongosh at the URI it prints)", c.dataDir)
	}
	fmt.Fprintln(stdout)
	if c.hold {
		// The faults were the demo's: what runs against the servers now
		// gets each event once.
		es.DuplicateDeliveries(0)
		esdbURI, mongo := subscription.Redact(es.URI()), subscription.Redact(mongoURI)
		fmt.Fprintf(stdout, "holding the servers up, without the demo's faults; Ctrl-C to stop. Point projector commands, or your own binary, at them\n"+
			"(in a database of your own: the demo's projections are not the binary's, and their checkpoints are under other names):\n"+
			"  projector run --esdb '%s' --mongo '%s' --database mine --http ''\n"+
			"  projector status --esdb '%[1]s' --mongo '%[2]s' --database mine\n"+
			"  mongosh '%[2]s'   (the demo's read models are in database %s)\n", esdbURI, mongo, c.database)
		<-ctx.Done()
	}
	return nil
}

// demoPaths builds the two ways the demo projects the carts.
func demoPaths(ctx context.Context, c demoConfig, es *esdbtest.Server, store *mongostore.Store, atomicWrites bool) ([]*demoPath, error) {
	policy := retry.Default()
	policy.InitialDelay, policy.MaxDelay = 10*time.Millisecond, time.Second
	policy.MaxRetries, policy.MaxElapsed = -1, 2*time.Minute
	// A consumer of the group waits less for a predecessor: the server gives
	// one stream's events to any consumer (round robin) and hands a
	// redelivered event out of order, so the predecessor may sit in a
	// consumer's queue behind the event that waits for it (the same
	// consumer's, or one whose own wait is for this one's queue). Handed
	// back after a few seconds, the event comes again once the
	// predecessor is applied.
	groupPolicy := policy
	groupPolicy.MaxElapsed = 5 * time.Second
	newEngine := func(p projector.Definition, policy retry.Policy) (*projector.Engine, error) {
		e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{p}, projector.WithRetry(policy))
		if err == nil {
			err = e.Prepare(ctx)
		}
		return e, err
	}
	reconnect := projector.DefaultReconnect()
	reconnect.InitialDelay, reconnect.MaxDelay = 20*time.Millisecond, 500*time.Millisecond

	catchUp := &demoPath{name: "catch-up", projection: cart.NewDetailsProjection()}
	client, err := subscription.Dial(es.URI(), nil)
	if err != nil {
		return nil, err
	}
	src, err := subscription.NewAll(client, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}})
	if err != nil {
		return nil, err
	}
	eng, err := newEngine(catchUp.projection, policy)
	if err != nil {
		return nil, err
	}
	r, err := projector.NewRunner("demo-catch-up", eng, src, store, projector.WithReconnect(reconnect))
	if err != nil {
		return nil, err
	}
	catchUp.runners = append(catchUp.runners, r)

	group := &demoPath{name: "group", projection: cart.NewDetailsProjection().InCollection(cart.DetailsName + "_group"), handedBack: true}
	settings := esdb.SubscriptionSettingsDefault()
	settings.StartFrom = esdb.Start{}
	settings.ConsumerStrategyName = esdb.ConsumerStrategyRoundRobin
	var shared *projector.Engine
	for i := range c.consumers {
		cl, err := subscription.Dial(es.URI(), nil)
		if err != nil {
			return nil, err
		}
		src, err := subscription.NewPersistent(cl, subscription.PersistentOptions{
			Stream: subscription.AllStreams, Group: "demo", BufferSize: 16,
			CreateAll: &esdb.PersistentAllSubscriptionOptions{
				Settings: &settings, StartFrom: esdb.Start{},
				Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{cart.StreamPrefix}},
			},
		})
		if err != nil {
			return nil, err
		}
		// Without atomic conditional writes (the embedded server) the
		// consumers share one engine, which writes a document's events one at
		// a time; on MongoDB each has its own, as separate processes would.
		eng := shared
		if eng == nil || atomicWrites {
			if eng, err = newEngine(group.projection, groupPolicy); err != nil {
				return nil, err
			}
			shared = eng
		}
		r, err := projector.NewRunner(fmt.Sprintf("demo-consumer-%d", i), eng, src, nil, projector.WithReconnect(reconnect))
		if err != nil {
			return nil, err
		}
		group.runners = append(group.runners, r)
	}
	return []*demoPath{catchUp, group}, nil
}

// startTraffic sends the carts' lives as commands through the write side
// (cart.Handler, on the official client), interleaved, at the configured rate;
// one command in ten is sent twice, as a client retrying after a lost answer
// would, and must append nothing the second time. It drops every subscription
// c.drops times along the way. lives reads back what the streams hold, per
// cart, once the traffic is done.
func startTraffic(ctx context.Context, c demoConfig, es *esdbtest.Server) (lives func(context.Context) (map[string][]projector.Event, error), appended, retried *atomic.Int64, errc chan error) {
	appended, retried = new(atomic.Int64), new(atomic.Int64)
	errc = make(chan error, 1)
	client, err := subscription.Dial(es.URI(), nil)
	if err != nil {
		errc <- err
		return nil, appended, retried, errc
	}
	var ids []string
	lives = func(ctx context.Context) (map[string][]projector.Event, error) {
		defer client.Close()
		cl, err := client.ESDB()
		if err != nil {
			return nil, err
		}
		store := cart.NewESDBStore(cl)
		out := map[string][]projector.Event{}
		for _, id := range ids {
			recorded, _, err := store.Read(ctx, cart.StreamID(id))
			if err != nil {
				return nil, err
			}
			for rev, r := range recorded {
				ev, err := cart.Registry().Decode(projector.Event{Type: r.Type, StreamID: cart.StreamID(id), StreamRevision: uint64(rev), Data: r.Data})
				if err != nil {
					return nil, err
				}
				out[id] = append(out[id], ev)
			}
		}
		return out, nil
	}
	r := rand.New(rand.NewPCG(c.seed, c.seed^0x5eed))
	start := time.Now().UTC()
	plans := map[string][]any{}
	var order []string
	for i := range c.carts {
		id := fmt.Sprintf("cart-%04d", i)
		ids = append(ids, id)
		plans[id] = cart.RandomLife(r, id, fmt.Sprintf("client-%d", r.IntN(10)), c.events, start)
		for range plans[id] {
			order = append(order, id)
		}
	}
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	go func() {
		errc <- func() error {
			cl, err := client.ESDB()
			if err != nil {
				return err
			}
			h := cart.NewHandler(cart.NewESDBStore(cl), nil)
			es.DuplicateDeliveries(c.duplicates)
			total := len(order)
			dropAt := map[int]bool{}
			for range c.drops {
				dropAt[total/10+r.IntN(max(1, total*8/10))] = true
			}
			var tick *time.Ticker
			if c.rate > 0 {
				tick = time.NewTicker(time.Duration(float64(time.Second) / c.rate))
				defer tick.Stop()
			}
			next := map[string]int{}
			for i, id := range order {
				if tick != nil {
					select {
					case <-tick.C:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				n := next[id]
				next[id]++
				cmd, err := cart.CommandOf(fmt.Sprintf("%s/%d", id, n), plans[id][n])
				if err != nil {
					return err
				}
				res, err := h.Handle(ctx, cmd)
				if err != nil {
					return fmt.Errorf("command %T on %s: %w", cmd, id, err)
				}
				appended.Add(int64(res.Appended))
				if r.IntN(10) == 0 {
					again, err := h.Handle(ctx, cmd)
					if err != nil {
						return fmt.Errorf("retried command %T on %s: %w", cmd, id, err)
					}
					if !again.Duplicate || again.Appended != 0 {
						return fmt.Errorf("retried command %T on %s appended %d events", cmd, id, again.Appended)
					}
					retried.Add(1)
				}
				if dropAt[i] {
					es.DropSubscriptions()
				}
			}
			return nil
		}()
	}()
	return lives, appended, retried, errc
}

// waitDemo waits until every event is appended and each path has applied
// all of them, or something fails, or the time is up.
func waitDemo(ctx context.Context, c demoConfig, began time.Time, paths []*demoPath, appended *atomic.Int64, total int, traffic, runErrs chan error) error {
	deadline := time.NewTimer(c.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	interrupted := func() error {
		return fmt.Errorf("interrupted with %d of %d events appended", appended.Load(), total)
	}
	for {
		select {
		case err := <-traffic:
			if err != nil && ctx.Err() != nil {
				return interrupted() // the traffic stopped because of it
			}
			if err != nil {
				return fmt.Errorf("traffic: %w", err)
			}
			traffic = nil
		case err := <-runErrs:
			if ctx.Err() != nil {
				return interrupted()
			}
			return err
		case <-ctx.Done():
			return interrupted()
		case <-deadline.C:
			return fmt.Errorf("read models not complete after %v (--timeout)", c.timeout)
		case <-tick.C:
		}
		done := traffic == nil
		for _, p := range paths {
			all := p.stats().Applied >= uint64(total)
			if all && p.took == 0 {
				p.took = time.Since(began)
			}
			done = done && all
		}
		if done {
			return nil
		}
	}
}

// checkDemo compares every cart document of p with the fold of its events.
func checkDemo(ctx context.Context, store driver.Store, p *projector.Projection[cart.Details], lives map[string][]projector.Event) (right int, wrong []string, err error) {
	for id, evs := range lives {
		switch err := projectortest.CheckDocument(ctx, store, p, id, evs); {
		case err == nil:
			right++
		case errors.Is(err, projectortest.ErrMismatch):
			wrong = append(wrong, id)
		default:
			return 0, nil, err
		}
	}
	return right, wrong, nil
}

// progress prints line() every second until the returned func is called.
func progress(w io.Writer, line func() string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "  %s\n", line())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
