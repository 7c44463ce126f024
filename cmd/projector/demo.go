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

	"github.com/revgate/projector/cart"
	"github.com/revgate/projector/internal/embedded"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

type demoConfig struct {
	carts, events, consumers, maxDeliveries int
	seed                                    uint64
	dataDir, mongoURI, database             string
	connectTimeout                          time.Duration
}

func (c demoConfig) validate() error {
	switch {
	case c.carts < 1:
		return errors.New("--carts must be at least 1")
	case c.events < 1:
		return errors.New("--events must be at least 1")
	case c.consumers < 1:
		return errors.New("--consumers must be at least 1")
	case c.maxDeliveries < 1:
		return errors.New("--max-deliveries must be at least 1")
	}
	return nil
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c demoConfig
	fs := newFlags("demo", "demo [flags]", stderr)
	fs.IntVar(&c.carts, "carts", 50, "shopping carts to simulate")
	fs.IntVar(&c.events, "events", 10, "events per cart")
	fs.IntVar(&c.consumers, "consumers", 4, "competing consumers, each with its own engine, sharing the events")
	fs.IntVar(&c.maxDeliveries, "max-deliveries", 3, "each event is delivered 1 to this many times, copies arriving late")
	fs.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "seed of the traffic and of the faults")
	fs.StringVar(&c.dataDir, "data-dir", "projector-data", "where the embedded Mongo-wire server keeps its data (kept across runs)")
	fs.StringVar(&c.mongoURI, "mongo", "", "MongoDB URI to use instead of the embedded server")
	fs.StringVar(&c.database, "database", "projector_demo", "database of the read models; emptied at the start")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 10*time.Second, "how long to wait for MongoDB to answer")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return errUsage
	}

	uri, where := c.mongoURI, "MongoDB at --mongo"
	if uri == "" {
		srv, err := embedded.Start(embedded.Config{Dir: c.dataDir})
		if err != nil {
			return err
		}
		defer srv.Close()
		uri, where = srv.URI(), srv.String()
	}
	store, err := mongostore.Open(ctx, uri, c.database, c.connectTimeout)
	if err != nil {
		return err
	}
	defer store.Close(context.Background())
	if err := store.Database().Drop(ctx); err != nil {
		return fmt.Errorf("empty database %s: %w", c.database, err)
	}

	r := rand.New(rand.NewPCG(c.seed, c.seed^0x5eed))
	log := projectortest.NewLog(cart.Registry())
	lives := make(map[string][]projector.Event, c.carts)
	var all []projector.Event
	start := time.Now().UTC()
	for i := range c.carts {
		id := fmt.Sprintf("cart-%04d", i)
		evs, err := log.Append(cart.StreamID(id), cart.RandomLife(r, id, fmt.Sprintf("client-%d", r.IntN(10)), c.events, start)...)
		if err != nil {
			return err
		}
		lives[id] = evs
		all = append(all, evs...)
	}
	// Interleave the carts as they would be in the global log, then add late
	// copies and deal the deliveries to the consumers.
	all = interleave(r, lives)
	deliveries := projectortest.Redeliver(r, all, c.maxDeliveries)
	shares := make([][]projector.Event, c.consumers)
	for _, ev := range deliveries {
		k := r.IntN(c.consumers)
		shares[k] = append(shares[k], ev)
	}
	fmt.Fprintf(stdout, "projector demo: %d carts, %d events, %d deliveries to %d consumers, seed %d\nread models on %s\n",
		c.carts, len(all), len(deliveries), c.consumers, c.seed, where)

	caps, err := store.Capabilities(ctx)
	if err != nil {
		return err
	}
	// Competing consumers need atomic conditional writes; without them (the
	// embedded server) the consumers are workers of one engine, which writes
	// the events of a document one at a time.
	shareEngine := !caps.AtomicConditionalWrites
	if shareEngine {
		fmt.Fprintf(stdout, "%s has no atomic conditional writes: the %d consumers share one engine\n", caps.Server, c.consumers)
	}

	policy := retry.Default()
	policy.InitialDelay, policy.MaxDelay = 10*time.Millisecond, time.Second
	policy.MaxRetries, policy.MaxElapsed = -1, 2*time.Minute
	details := cart.NewDetailsProjection()
	var counts [projector.Skipped + 1]atomic.Int64 // by outcome
	var waits, handled atomic.Int64
	var firstErr error
	var errOnce sync.Once
	began := time.Now()
	var wg sync.WaitGroup
	var eng *projector.Engine
	for _, share := range shares {
		if eng == nil || !shareEngine {
			if eng, err = projector.NewEngine(store, cart.Registry(), []projector.Definition{details}, projector.WithRetry(policy)); err != nil {
				return err
			}
			if err := eng.Prepare(ctx); err != nil {
				return err
			}
		}
		wg.Go(func() {
			for _, ev := range share {
				if ctx.Err() != nil {
					return
				}
				rs, err := eng.Handle(ctx, ev)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
				}
				for _, res := range rs {
					counts[res.Outcome].Add(1)
					waits.Add(int64(res.Waits))
				}
				handled.Add(1)
			}
		})
	}
	stopProgress := progress(stderr, func() string {
		return fmt.Sprintf("%d/%d deliveries handled, %d applied, %d duplicates, %d failed",
			handled.Load(), len(deliveries), counts[projector.Applied].Load(), counts[projector.Duplicate].Load(), counts[projector.Failed].Load())
	})
	wg.Wait()
	stopProgress()
	took := time.Since(began)
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted after %d of %d deliveries", handled.Load(), len(deliveries))
	}

	right := 0
	var wrong []string
	for id, evs := range lives {
		switch err := projectortest.CheckDocument(ctx, store, details, id, evs); {
		case err == nil:
			right++
		case errors.Is(err, projectortest.ErrMismatch):
			wrong = append(wrong, id)
		default:
			return err
		}
	}
	fmt.Fprintf(stdout, "  applied     %d\n  duplicates  %d\n  failed      %d\n  waits       %d\n  time        %v (%.0f deliveries/s)\n  documents   %d of %d equal to the pure fold of their events\n",
		counts[projector.Applied].Load(), counts[projector.Duplicate].Load(), counts[projector.Failed].Load(),
		waits.Load(), took.Round(time.Millisecond), float64(len(deliveries))/took.Seconds(), right, len(lives))
	if firstErr != nil {
		fmt.Fprintf(stdout, "first failure: %v\n", firstErr)
	}
	if len(wrong) > 0 || firstErr != nil {
		return fmt.Errorf("%d of %d documents are wrong: %v", len(wrong), len(lives), wrong)
	}
	if c.mongoURI == "" {
		fmt.Fprintf(stdout, "data kept in %s: run the demo again, or point any MongoDB client at the embedded server while it runs (database %s, collection %s)\n",
			c.dataDir, c.database, cart.DetailsName)
	}
	return nil
}

// interleave merges the carts' streams in a random order that keeps each
// stream's own order, as a global log does.
func interleave(r *rand.Rand, lives map[string][]projector.Event) []projector.Event {
	var ids []string
	total := 0
	for id, evs := range lives {
		ids = append(ids, id)
		total += len(evs)
	}
	next := map[string]int{}
	out := make([]projector.Event, 0, total)
	for len(ids) > 0 {
		i := r.IntN(len(ids))
		id := ids[i]
		out = append(out, lives[id][next[id]])
		if next[id]++; next[id] == len(lives[id]) {
			ids = append(ids[:i], ids[i+1:]...)
		}
	}
	return out
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
