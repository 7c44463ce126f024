package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/app/embedmongo"
	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
	"github.com/revgate/projector/subscription"
)

// demoConfig is the demo's flags.
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

// runDemo runs the engine on embedded parts with injected faults, two ways
// at once, and checks every document against the fold of its events.
func runDemo(ctx context.Context, inv app.Invocation) error {
	c := &demoCommand{stdout: inv.Stdout, stderr: inv.Stderr}
	if err := c.parseFlags(inv); err != nil {
		return err
	}
	return c.run(ctx)
}

// demoCommand is the demo command: its flags, and the servers and paths a
// run sets up.
type demoCommand struct {
	demoConfig
	stdout, stderr io.Writer

	// What run sets up, and close stops.
	opened *app.Store // the read models' store, on the embedded server unless --mongo
	es     *esdbtest.Server
	paths  []*demoPath
}

// parseFlags parses the command's arguments into c and checks them.
func (c *demoCommand) parseFlags(inv app.Invocation) error {
	fs := inv.FlagSet("[flags]")
	c.register(fs)
	if err := app.ParseFlags(fs, inv.Args); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		fmt.Fprintln(c.stderr, err)
		return app.ErrUsage
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	return nil
}

// register makes the demo's flags of fs, into c.
func (c *demoConfig) register(fs *flag.FlagSet) {
	fs.IntVar(&c.carts, "carts", 50, "shopping carts to simulate")
	fs.IntVar(&c.events, "events", 10, "events per cart")
	fs.Float64Var(&c.rate, "rate", 0, "events appended per second (0: as fast as the server takes them)")
	fs.IntVar(&c.consumers, "consumers", 3, "competing consumers of the persistent subscription group")
	fs.Float64Var(&c.duplicates, "duplicates", 0.2, "share of deliveries the server sends twice")
	fs.IntVar(&c.drops, "drops", 3, "times the server drops every subscription while the traffic runs")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the traffic and of the faults (0: one from the clock, printed, to run the same again)")
	fs.StringVar(&c.dataDir, "data-dir", "projector-data", "where the embedded Mongo-wire server keeps its data (kept across runs)")
	fs.StringVar(&c.mongoURI, "mongo", "", "MongoDB URI to use instead of the embedded server")
	fs.StringVar(&c.database, "database", "projector_demo", "database of the read models; emptied at the start")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 10*time.Second, "how long to wait for MongoDB to answer")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up if the read models are not complete by then")
	fs.BoolVar(&c.hold, "hold", false, "after the report, keep the servers up (until Ctrl-C) to look at the data")
}

// run starts the servers and the paths, sends the traffic, waits until
// each path has applied every event, checks the documents, and reports;
// with --hold it then keeps the servers up until ctx is done.
func (c *demoCommand) run(ctx context.Context) error {
	defer c.close()
	if err := c.startServers(ctx); err != nil {
		return err
	}
	c.printHeader()
	if err := c.buildPaths(ctx); err != nil {
		return err
	}
	traffic, took, err := c.project(ctx)
	if err != nil {
		return err
	}
	streams, err := traffic.lives(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "  %d events in %d carts, appended through the write side (%d commands retried, appended once) and projected in %v\n",
		c.total(), c.carts, traffic.retried.Load(), took.Round(time.Millisecond))
	if err := c.checkPaths(ctx, streams); err != nil {
		return err
	}
	c.printWhere()
	if c.hold {
		c.holdServers(ctx)
	}
	return nil
}

// total is how many events the traffic appends.
func (c *demoCommand) total() int { return c.carts * c.events }

// close stops what run started, the last first.
func (c *demoCommand) close() {
	if c.es != nil {
		c.es.Close()
	}
	if c.opened != nil {
		c.opened.Close()
	}
}

// startServers opens the read models' store (on the embedded server,
// unless --mongo), empties the demo's database, and starts the event
// server with the demo's seed.
func (c *demoCommand) startServers(ctx context.Context) error {
	opened, err := app.OpenStore(ctx, app.StoreOptions{MongoURI: c.mongoURI, DataDir: c.dataDir, Database: c.database,
		Timeout: c.connectTimeout, Embedded: embedmongo.Start})
	if err != nil {
		return err
	}
	c.opened = opened
	if err := opened.Store.Database().Drop(ctx); err != nil {
		return fmt.Errorf("empty database %s: %w", c.database, err)
	}
	es, err := esdbtest.Start(esdbtest.Options{Seed: int64(c.seed)})
	if err != nil {
		return err
	}
	c.es = es
	return nil
}

// printHeader prints what the demo runs and where its servers are.
func (c *demoCommand) printHeader() {
	fmt.Fprintf(c.stdout, "projector demo: %d carts x %d events, %d consumers, %.0f%% duplicated deliveries, the server drops every subscription at %d moments, seed %d\n",
		c.carts, c.events, c.consumers, 100*c.duplicates, c.drops, c.seed)
	fmt.Fprintf(c.stdout, "  events on the in-process EventStoreDB-protocol test server %s\n  read models on %s: %s (database %s)\n", c.es.Addr(), c.opened.Where(), neutral.Redact(c.opened.URI), c.database)
}

// buildPaths builds the two paths the demo projects the carts on; the
// consumers of the group share one engine on a server without atomic
// conditional writes, and it says so.
func (c *demoCommand) buildPaths(ctx context.Context) error {
	caps, err := c.opened.Store.Capabilities(ctx)
	if err != nil {
		return err
	}
	if c.paths, err = demoPaths(ctx, c.demoConfig, c.es, c.opened.Store, caps.AtomicConditionalWrites); err != nil {
		return err
	}
	if !caps.AtomicConditionalWrites {
		fmt.Fprintf(c.stdout, "  %s has no atomic conditional writes: the %d consumers share one engine\n", caps.Server, c.consumers)
	}
	return nil
}

// project runs the paths' runners while the traffic runs, until each path
// has applied every event, printing the progress every second, and stops
// them. It returns the traffic, and how long it took from the first append.
func (c *demoCommand) project(ctx context.Context) (*demoTraffic, time.Duration, error) {
	runCtx, stopRunners := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer func() {
		stopRunners()
		running.Wait()
	}()
	runErrs := c.startRunners(runCtx, &running)
	began := time.Now()
	traffic := startTraffic(runCtx, c.demoConfig, c.es)
	stopProgress := progress(c.stderr, func() string { return c.progressLine(traffic) })
	err := waitDemo(runCtx, c.demoConfig, began, c.paths, &traffic.appended, c.total(), traffic.errc, runErrs)
	took := time.Since(began)
	stopProgress()
	return traffic, took, err
}

// startRunners runs every runner of the paths until ctx is done, on
// running; the errors they end with go to the channel returned.
func (c *demoCommand) startRunners(ctx context.Context, running *sync.WaitGroup) chan error {
	n := 0
	for _, p := range c.paths {
		n += len(p.runners)
	}
	runErrs := make(chan error, n) // each runner's, so that none waits to end
	for _, p := range c.paths {
		for _, r := range p.runners {
			running.Go(func() {
				if err := r.Run(ctx); err != nil {
					runErrs <- err
				}
			})
		}
	}
	return runErrs
}

// progressLine is a line of the progress: the events appended so far, and
// what each path has done with them.
func (c *demoCommand) progressLine(traffic *demoTraffic) string {
	line := fmt.Sprintf("appended %d/%d", traffic.appended.Load(), c.total())
	for _, p := range c.paths {
		st := p.stats()
		line += fmt.Sprintf(" | %s: %d applied, %d duplicates, %d waits", p.name, st.Applied, st.Duplicates, st.Waits)
	}
	return line
}

// checkPaths checks every document of each path against the fold of its
// cart's events in streams, and prints what each path did.
func (c *demoCommand) checkPaths(ctx context.Context, streams map[string][]projector.Event) error {
	failed := false
	for _, p := range c.paths {
		right, err := c.checkPath(ctx, p, streams)
		if err != nil {
			return err
		}
		failed = failed || !right
	}
	if failed {
		return errors.New("some documents are not the fold of their events")
	}
	return nil
}

// checkPath checks every document of p against the fold of its cart's
// events in streams, and prints what p did. It reports whether every
// document is right and p applied every event.
func (c *demoCommand) checkPath(ctx context.Context, p *demoPath, streams map[string][]projector.Event) (bool, error) {
	right, wrong, err := checkDemo(ctx, c.opened.Store, p.projection, streams)
	if err != nil {
		return false, err
	}
	st := p.stats()
	failures := fmt.Sprint("failed ", st.Failed)
	if p.handedBack && st.Failed > 0 {
		failures += " (waited for a predecessor queued behind them: handed back to the group, delivered again)"
	}
	drops := fmt.Sprint("subscription drops ", st.Drops)
	if p.handedBack {
		drops += fmt.Sprintf(" (over its %d consumers)", c.consumers)
	}
	fmt.Fprintf(c.stdout, "  %-12s applied %d, duplicates skipped %d, %s, gate waits %d, %s, all applied %v after the first append; documents %d of %d equal to the pure fold\n",
		p.name, st.Applied, st.Duplicates, failures, st.Waits, drops, p.took.Round(time.Millisecond), right, c.carts)
	if len(wrong) > 0 || st.Applied != uint64(c.total()) {
		fmt.Fprintf(c.stdout, "  %s: wrong documents %v\n", p.name, wrong)
		return false, nil
	}
	return true, nil
}

// printWhere says that every document is right, and where to look at
// them.
func (c *demoCommand) printWhere() {
	fmt.Fprintf(c.stdout, "every document is right. Look at them: collections %s (catch-up) and %s (group) in database %s",
		c.paths[0].projection.Collection(), c.paths[1].projection.Collection(), c.database)
	if c.mongoURI == "" && !c.hold {
		fmt.Fprintf(c.stdout, "; the data stays in %s (run the demo with --hold to keep the server up, and point mongosh at the URI it prints)", c.dataDir)
	}
	fmt.Fprintln(c.stdout)
}

// holdServers keeps the servers up, without the demo's faults, until ctx
// is done, and says how to point projector commands at them.
func (c *demoCommand) holdServers(ctx context.Context) {
	// The faults were the demo's: what runs against the servers now
	// gets each event once.
	c.es.DuplicateDeliveries(0)
	esdbURI, mongo := neutral.Redact(c.es.URI()), neutral.Redact(c.opened.URI)
	fmt.Fprintf(c.stdout, "holding the servers up, without the demo's faults; Ctrl-C to stop. Point projector commands, or your own binary, at them\n"+
		"(in a database of your own: the demo's projections are not the binary's, and their checkpoints are under other names),\n"+
		"from another shell in the clone (or with the binary of go install ./cmd/projector, as projector run ...):\n"+
		"  go run ./cmd/projector run --esdb '%s' --mongo '%s' --database mine --http ''\n"+
		"  go run ./cmd/projector status --esdb '%[1]s' --mongo '%[2]s' --database mine\n"+
		"  mongosh '%[2]s'   (the demo's read models are in database %s)\n", esdbURI, mongo, c.database)
	<-ctx.Done()
}

// demoPaths builds the two ways the demo projects the carts.
func demoPaths(ctx context.Context, c demoConfig, es *esdbtest.Server, store *mongostore.Store, atomicWrites bool) ([]*demoPath, error) {
	policy := retry.Default()
	policy.InitialDelay, policy.MaxDelay = 10*time.Millisecond, time.Second
	policy.MaxRetries, policy.MaxElapsed = -1, 2*time.Minute
	b := demoBuilder{es: es, store: store, policy: policy}
	b.newEngine = func(p projector.Definition, policy retry.Policy) (*projector.Engine, error) {
		e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{p}, projector.WithRetry(policy))
		if err == nil {
			err = e.Prepare(ctx)
		}
		return e, err
	}
	b.reconnect = projector.DefaultReconnect()
	b.reconnect.InitialDelay, b.reconnect.MaxDelay = 20*time.Millisecond, 500*time.Millisecond
	catchUp, err := b.catchUpPath()
	if err != nil {
		return nil, err
	}
	group, err := b.groupPath(c.consumers, atomicWrites)
	if err != nil {
		return nil, err
	}
	return []*demoPath{catchUp, group}, nil
}

// demoBuilder builds the demo's paths on its servers.
type demoBuilder struct {
	es        *esdbtest.Server
	store     *mongostore.Store
	policy    retry.Policy // the engines' waits
	reconnect retry.Policy // the runners'
	newEngine func(projector.Definition, retry.Policy) (*projector.Engine, error)
}

// catchUpPath is a catch-up subscription to $all with a checkpoint.
func (b demoBuilder) catchUpPath() (*demoPath, error) {
	catchUp := &demoPath{name: "catch-up", projection: cart.NewDetailsProjection()}
	client, err := kurrent.Dial(b.es.URI(), nil)
	if err != nil {
		return nil, err
	}
	src, err := subscription.NewAll(client, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}})
	if err != nil {
		return nil, err
	}
	eng, err := b.newEngine(catchUp.projection, b.policy)
	if err != nil {
		return nil, err
	}
	r, err := projector.NewRunner("demo-catch-up", eng, src, b.store, projector.WithReconnect(b.reconnect))
	if err != nil {
		return nil, err
	}
	catchUp.runners = append(catchUp.runners, r)
	return catchUp, nil
}

// groupPath is consumers competing consumers of a persistent subscription
// group (round robin: one stream's events go to any of them). Without
// atomic conditional writes (the embedded server) they share one engine,
// which writes a document's events one at a time; on MongoDB each has its
// own, as separate processes would.
//
// A consumer of the group waits less for a predecessor: the server hands a
// redelivered event out of order, so the predecessor may sit in a
// consumer's queue behind the event that waits for it (the same
// consumer's, or one whose own wait is for this one's queue). Handed back
// after a few seconds, the event comes again once the predecessor is
// applied.
func (b demoBuilder) groupPath(consumers int, atomicWrites bool) (*demoPath, error) {
	group := &demoPath{name: "group", projection: cart.NewDetailsProjection().InCollection(cart.DetailsName + "_group"), handedBack: true}
	groupPolicy := b.policy
	groupPolicy.MaxElapsed = 5 * time.Second
	var shared *projector.Engine
	for i := range consumers {
		cl, err := kurrent.Dial(b.es.URI(), nil)
		if err != nil {
			return nil, err
		}
		src, err := subscription.NewPersistent(cl, subscription.PersistentOptions{
			Stream: subscription.AllStreams, Group: "demo", BufferSize: 16,
			Create: &subscription.GroupSettings{
				Strategy: subscription.RoundRobin, FromStart: true,
				Filter: subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}},
			},
		})
		if err != nil {
			return nil, err
		}
		eng := shared
		if eng == nil || atomicWrites {
			if eng, err = b.newEngine(group.projection, groupPolicy); err != nil {
				return nil, err
			}
			shared = eng
		}
		r, err := projector.NewRunner(fmt.Sprintf("demo-consumer-%d", i), eng, src, nil, projector.WithReconnect(b.reconnect))
		if err != nil {
			return nil, err
		}
		group.runners = append(group.runners, r)
	}
	return group, nil
}

// demoTraffic is the demo's traffic: the carts' lives sent as commands
// through the write side (cart.Handler, on the official client).
type demoTraffic struct {
	c      demoConfig
	es     *esdbtest.Server
	client *subscription.Client
	r      *rand.Rand // the traffic's randomness, from the seed
	ids    []string   // the carts
	plans  map[string][]any
	order  []string // the carts' events, interleaved: which cart each command goes to
	// appended counts the events appended; retried the commands sent twice.
	appended, retried atomic.Int64
	// errc gets what the traffic ended with.
	errc chan error
}

// startTraffic sends the carts' lives as commands through the write side
// (cart.Handler, on the official client), interleaved, at the configured rate;
// one command in ten is sent twice, as a client retrying after a lost answer
// would, and must append nothing the second time. It drops every subscription
// c.drops times along the way. Its lives reads back what the streams hold,
// per cart, once the traffic is done.
func startTraffic(ctx context.Context, c demoConfig, es *esdbtest.Server) *demoTraffic {
	t := &demoTraffic{c: c, es: es, errc: make(chan error, 1)}
	client, err := kurrent.Dial(es.URI(), nil)
	if err != nil {
		t.errc <- err
		return t
	}
	t.client = client
	t.plan()
	go func() { t.errc <- t.send(ctx) }()
	return t
}

// plan draws each cart's life from the seed, and interleaves their events
// at random.
func (t *demoTraffic) plan() {
	t.r = rand.New(rand.NewPCG(t.c.seed, t.c.seed^0x5eed))
	start := time.Now().UTC()
	t.plans = map[string][]any{}
	for i := range t.c.carts {
		id := fmt.Sprintf("cart-%04d", i)
		t.ids = append(t.ids, id)
		t.plans[id] = cart.RandomLife(t.r, id, fmt.Sprintf("client-%d", t.r.IntN(10)), t.c.events, start)
		for range t.plans[id] {
			t.order = append(t.order, id)
		}
	}
	t.r.Shuffle(len(t.order), func(i, j int) { t.order[i], t.order[j] = t.order[j], t.order[i] })
}

// send sends the commands in their order, at the configured rate, with
// the server duplicating deliveries and dropping every subscription at
// points drawn at random.
func (t *demoTraffic) send(ctx context.Context) error {
	h := cart.NewHandler(cart.NewStore(t.client), nil)
	t.es.DuplicateDeliveries(t.c.duplicates)
	dropAt := t.dropPoints()
	var tick *time.Ticker
	if t.c.rate > 0 {
		tick = time.NewTicker(time.Duration(float64(time.Second) / t.c.rate))
		defer tick.Stop()
	}
	next := map[string]int{}
	for i, id := range t.order {
		if tick != nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		n := next[id]
		next[id]++
		if err := t.sendCommand(ctx, h, id, n); err != nil {
			return err
		}
		if dropAt[i] {
			t.es.DropSubscriptions()
		}
	}
	return nil
}

// dropPoints are the commands after which the server drops every
// subscription: c.drops distinct ones (fewer only when the traffic has
// fewer commands), in the middle eight tenths of the traffic.
func (t *demoTraffic) dropPoints() map[int]bool {
	total := len(t.order)
	span := max(1, total*8/10)
	dropAt := map[int]bool{}
	for len(dropAt) < min(t.c.drops, span) {
		dropAt[total/10+t.r.IntN(span)] = true
	}
	return dropAt
}

// sendCommand sends the command of the n-th event of cart id; one in ten
// goes twice, and must append nothing the second time.
func (t *demoTraffic) sendCommand(ctx context.Context, h *cart.Handler, id string, n int) error {
	cmd, err := cart.CommandOf(fmt.Sprintf("%s/%d", id, n), t.plans[id][n])
	if err != nil {
		return err
	}
	res, err := h.Handle(ctx, cmd)
	if err != nil {
		return fmt.Errorf("command %T on %s: %w", cmd, id, err)
	}
	t.appended.Add(int64(res.Appended))
	if t.r.IntN(10) != 0 {
		return nil
	}
	again, err := h.Handle(ctx, cmd)
	if err != nil {
		return fmt.Errorf("retried command %T on %s: %w", cmd, id, err)
	}
	if !again.Duplicate || again.Appended != 0 {
		return fmt.Errorf("retried command %T on %s appended %d events", cmd, id, again.Appended)
	}
	t.retried.Add(1)
	return nil
}

// lives reads back what the carts' streams hold, per cart, once the
// traffic is done, and closes the traffic's client.
func (t *demoTraffic) lives(ctx context.Context) (map[string][]projector.Event, error) {
	defer t.client.Close()
	store := cart.NewStore(t.client)
	out := map[string][]projector.Event{}
	for _, id := range t.ids {
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
