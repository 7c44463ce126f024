package main

import (
	"context"
	"errors"
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
	"syscall"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/revgate/projector/cart"
	"github.com/revgate/projector/internal/embedded"
	"github.com/revgate/projector/internal/esdbtest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/subscription"
)

// runBench measures catch-up three ways on the same events, one after the
// other in one process: A the projector, B the seed article's per-event code,
// L the least work that yields the same read model. It reports ratios.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var carts, events, liveEvents int
	var mongoURI, postgres string
	var liveRate float64
	fs := newFlags("bench", "bench [flags]", stderr)
	fs.IntVar(&carts, "carts", 200, "carts")
	fs.IntVar(&events, "events", 20, "events per cart")
	fs.StringVar(&mongoURI, "mongo", "", "MongoDB URI (default: the embedded Mongo-wire server, in a temporary directory)")
	fs.StringVar(&postgres, "postgres", "", "PostgreSQL URL for the embedded server's PostgreSQL backend (default: its SQLite backend)")
	fs.IntVar(&liveEvents, "live-events", 200, "events appended at a steady rate for the live latency (0: skip)")
	fs.Float64Var(&liveRate, "live-rate", 50, "events per second of the live latency run")
	var skipB bool
	var cpuProfile string
	fs.BoolVar(&skipB, "skip-b", false, "leave out B, the per-event way (slow on large runs)")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process (the servers' side) during A to this file")
	if err := parse(fs, args); err != nil {
		return err
	}
	if carts < 1 || events < 1 || liveEvents < 0 || !(liveRate > 0) {
		fmt.Fprintln(stderr, "--carts, --events and --live-rate must be > 0, --live-events >= 0")
		return errUsage
	}
	where := "MongoDB at --mongo"
	if mongoURI == "" {
		dir, err := os.MkdirTemp("", "projector-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg := embedded.Config{Dir: dir}
		if postgres != "" {
			cfg.PostgresURL = postgres
		}
		srv, err := embedded.Start(cfg)
		if err != nil {
			return err
		}
		defer srv.Close()
		mongoURI, where = srv.URI(), srv.String()
	}
	client, err := mongostore.Connect(ctx, mongoURI, 10*time.Second)
	if err != nil {
		return err
	}
	defer client.Disconnect(context.Background())
	es, err := esdbtest.Start(esdbtest.Options{})
	if err != nil {
		return err
	}
	defer es.Close()

	// The events, through the official client, and the fold of every cart.
	sub, err := subscription.Dial(es.URI(), nil)
	if err != nil {
		return err
	}
	defer sub.Close()
	cl, err := sub.ESDB()
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	lives := map[string][]projector.Event{}
	var order []string
	plans := map[string][]any{}
	for i := range carts {
		id := fmt.Sprintf("cart-%05d", i)
		plans[id] = cart.RandomLife(r, id, fmt.Sprintf("client-%d", r.IntN(50)), events, start)
		for range plans[id] {
			order = append(order, id)
		}
	}
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	next := map[string]int{}
	for _, id := range order {
		n := next[id]
		next[id]++
		name, data, err := cart.Registry().Encode(plans[id][n])
		if err != nil {
			return err
		}
		if _, err := cl.AppendToStream(ctx, cart.StreamID(id), esdb.AppendToStreamOptions{}, esdb.EventData{EventType: name, ContentType: esdb.ContentTypeJson, Data: data}); err != nil {
			return err
		}
		lives[id] = append(lives[id], projector.Event{Type: name, StreamID: cart.StreamID(id), StreamRevision: uint64(n), Payload: plans[id][n]})
	}
	total := len(order)
	fmt.Fprintf(stdout, "projector bench: %d events over %d carts (%d per cart); documents on %s; events on the in-process EventStoreDB-protocol server\n",
		total, carts, events, where)

	type phase struct {
		name     string
		took     time.Duration
		peakHeap uint64
	}
	var phases []phase
	run := func(name string, fn func(db *mongo.Database) error) (*mongo.Database, error) {
		db := client.Database("bench_" + strings.ToLower(name))
		if err := db.Drop(ctx); err != nil {
			return nil, err
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		peak, stop := heapPeak()
		began := time.Now()
		err := fn(db)
		took := time.Since(began)
		stop()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		extra := uint64(0)
		if p := peak.Load(); p > before.HeapInuse {
			extra = p - before.HeapInuse
		}
		phases = append(phases, phase{name, took, extra})
		fmt.Fprintf(stderr, "  %s: %v\n", name, took.Round(time.Millisecond))
		return db, nil
	}

	// A runs in a process of its own, so that its peak memory is the
	// projector's alone, not the harness's events.
	var rssA int64
	dbA, err := run("A", func(db *mongo.Database) error {
		if cpuProfile != "" {
			f, err := os.Create(cpuProfile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		var err error
		rssA, err = benchChild(ctx, es.URI(), mongoURI, db.Name())
		return err
	})
	if err != nil {
		return err
	}
	if !skipB {
		if _, err := run("B", func(db *mongo.Database) error { return benchPerEvent(ctx, cl, db) }); err != nil {
			return err
		}
	}
	if _, err := run("L", func(db *mongo.Database) error { return benchFloor(ctx, db, lives) }); err != nil {
		return err
	}
	wrong := 0
	details := cart.NewDetailsProjection()
	storeA := mongostore.New(dbA)
	for id, evs := range lives {
		if err := projectortest.CheckDocument(ctx, storeA, details, id, evs); err != nil {
			wrong++
		}
	}

	rate := func(p phase) float64 { return float64(total) / p.took.Seconds() }
	a, l := phases[0], phases[len(phases)-1]
	fmt.Fprintf(stdout, "\n  %-44s %12s %10s %14s\n", "way", "events/s", "time", "bench heap")
	for _, p := range phases {
		label := map[string]string{
			"A": "A  projector catch-up (default settings)",
			"B": "B  seed per-event (find revision>=n-1, update)",
			"L": "L  floor: one bulk write of the folded docs",
		}[p.name]
		fmt.Fprintf(stdout, "  %-44s %12.0f %10v %10.1f MiB\n", label, rate(p), p.took.Round(time.Millisecond), float64(p.peakHeap)/(1<<20))
	}
	if !skipB {
		fmt.Fprintf(stdout, "\n  A/B = %.2f", rate(a)/rate(phases[1]))
	}
	fmt.Fprintf(stdout, "   A/L = %.2f   A's documents equal the fold (and L's): %d of %d\n", rate(a)/rate(l), carts-wrong, carts)

	fmt.Fprintf(stdout, "  A's process peaked at %.1f MiB resident (the projector alone: runtime, clients, buffers, batches)\n", float64(rssA)/1024)
	if liveEvents > 0 {
		p50, p99, err := benchLive(ctx, es, client.Database("bench_live"), liveEvents, liveRate)
		if err != nil {
			return fmt.Errorf("live: %w", err)
		}
		fmt.Fprintf(stdout, "  live, %d events at %.0f/s: append to visible document p50 %v, p99 %v\n", liveEvents, liveRate, p50.Round(time.Millisecond), p99.Round(time.Millisecond))
	}
	if wrong > 0 {
		return fmt.Errorf("%d of %d documents of A differ from the fold", wrong, carts)
	}
	return nil
}

// benchChild runs A in a child process and returns its peak resident set in
// KiB.
func benchChild(ctx context.Context, esdbURI, mongoURI, database string) (int64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, self, "bench-catch-up", "--esdb", esdbURI, "--mongo", mongoURI, "--database", database)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("catch-up process: %w", err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss, nil
	}
	return 0, nil
}

// runBenchCatchUp is A, in the process bench starts for it.
func runBenchCatchUp(ctx context.Context, args []string, _, stderr io.Writer) error {
	var esdbURI, mongoURI, database string
	fs := newFlags("bench-catch-up", "bench-catch-up (started by bench)", stderr)
	fs.StringVar(&esdbURI, "esdb", "", "")
	fs.StringVar(&mongoURI, "mongo", "", "")
	fs.StringVar(&database, "database", "", "")
	if err := parse(fs, args); err != nil {
		return err
	}
	client, err := mongostore.Connect(ctx, mongoURI, 10*time.Second)
	if err != nil {
		return err
	}
	defer client.Disconnect(context.Background())
	return benchProjector(ctx, esdbURI, client.Database(database))
}

// heapPeak samples the heap in use every 10 ms until stop.
func heapPeak() (*atomic.Uint64, func()) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapInuse > peak.Load() {
			peak.Store(m.HeapInuse)
		}
	}
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return &peak, func() { close(done); wg.Wait(); sample() }
}

// benchProjector is A: the runner catching up from the start of $all.
func benchProjector(ctx context.Context, esdbURI string, db *mongo.Database) error {
	store := mongostore.New(db)
	eng, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()})
	if err != nil {
		return err
	}
	if err := eng.Prepare(ctx); err != nil {
		return err
	}
	c, err := subscription.Dial(esdbURI, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	src, err := subscription.NewAll(c, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}})
	if err != nil {
		return err
	}
	r, err := projector.NewRunner("bench", eng, src, store)
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	for !r.CaughtUp() {
		select {
		case err := <-done:
			stop()
			return fmt.Errorf("runner ended: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	stop()
	err = <-done
	st := r.Stats()
	fmt.Fprintf(os.Stderr, "  A: %d batches of %.0f events on average\n", st.Batches, float64(st.Batched)/float64(max(1, st.Batches)))
	return err
}

// benchPerEvent is B, the seed article's code: for each event, in order,
// find the document with revision >= n-1, skip it when it is past n-1, else
// apply and update with the revision filter; two round trips per event.
func benchPerEvent(ctx context.Context, cl *esdb.Client, db *mongo.Database) error {
	coll := db.Collection(cart.DetailsName)
	details := cart.NewDetailsProjection()
	s, err := cl.ReadAll(ctx, esdb.ReadAllOptions{From: esdb.Start{}}, 1<<62)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		re, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		ev, err := subscription.Envelope(re)
		if err != nil || !strings.HasPrefix(ev.StreamID, cart.StreamPrefix) {
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
}

// benchFloor is L: the documents the pure fold gives, written by unordered
// bulk inserts (in chunks the embedded server handles).
func benchFloor(ctx context.Context, db *mongo.Database, lives map[string][]projector.Event) error {
	details := cart.NewDetailsProjection()
	var docs []any
	ids := make([]string, 0, len(lives))
	for id := range lives {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		evs := lives[id]
		state, err := details.Fold(evs...)
		if err != nil {
			return err
		}
		raw, err := bson.Marshal(state)
		if err != nil {
			return err
		}
		doc := bson.D{{Key: "_id", Value: id}, {Key: "revision", Value: int64(evs[len(evs)-1].StreamRevision)}}
		elems, _ := bson.Raw(raw).Elements()
		for _, el := range elems {
			doc = append(doc, bson.E{Key: el.Key(), Value: el.Value()})
		}
		docs = append(docs, doc)
	}
	coll := db.Collection(cart.DetailsName)
	for chunk := range slices.Chunk(docs, 50) {
		if _, err := coll.InsertMany(ctx, chunk, options.InsertMany().SetOrdered(false)); err != nil {
			return err
		}
	}
	return nil
}

// benchLive appends events at a steady rate while the projector runs and
// measures each one's time from append to visible in its document.
func benchLive(ctx context.Context, es *esdbtest.Server, db *mongo.Database, n int, rate float64) (p50, p99 time.Duration, err error) {
	if err := db.Drop(ctx); err != nil {
		return 0, 0, err
	}
	store := mongostore.New(db)
	c, err := subscription.Dial(es.URI(), nil)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	cl, err := c.ESDB()
	if err != nil {
		return 0, 0, err
	}
	// Live only: from the head on.
	head := es.Head()
	src, err := subscription.NewAll(c, subscription.AllOptions{StreamPrefixes: []string{"live-cart-"}})
	if err != nil {
		return 0, 0, err
	}
	if err := store.SaveCheckpoint(ctx, "live", projector.Checkpoint{Position: head, Prepare: head}); err != nil {
		return 0, 0, err
	}
	live := projector.New[cart.Details]("live", projector.StreamSuffix("live-cart-"))
	projector.Create(live, func(e cart.ShoppingCartOpened) (cart.Details, error) {
		return cart.Details{ClientID: e.ClientID, Status: cart.StatusOpened}, nil
	})
	projector.On(live, func(d cart.Details, e cart.ProductItemAddedToShoppingCart) (cart.Details, error) {
		items, err := cart.AddProductItem(d.ProductItems, e.ProductItem)
		d.ProductItems = items
		return d, err
	})
	eng, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{live})
	if err != nil {
		return 0, 0, err
	}
	r, err := projector.NewRunner("live", eng, src, store)
	if err != nil {
		return 0, 0, err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go r.Run(rctx)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var lat []time.Duration
	carts := max(1, n/10)
	for i := range n {
		<-tick.C
		id := fmt.Sprintf("%d", i%carts)
		rev := uint64(i / carts)
		var payload any = cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}}
		if rev == 0 {
			payload = cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c"}
		}
		name, data, _ := cart.Registry().Encode(payload)
		began := time.Now()
		if _, err := cl.AppendToStream(ctx, "live-cart-"+id, esdb.AppendToStreamOptions{}, esdb.EventData{EventType: name, ContentType: esdb.ContentTypeJson, Data: data}); err != nil {
			return 0, 0, err
		}
		for {
			got, found, err := store.Load(ctx, "live", id, rev, nil)
			if err != nil {
				return 0, 0, err
			}
			if found && got >= rev {
				break
			}
			if time.Since(began) > 30*time.Second {
				return 0, 0, fmt.Errorf("event %d not visible after 30s", i)
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(began))
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}
