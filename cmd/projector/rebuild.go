package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

func runRebuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var esdbURI, mongoURI, database, dataDir string
	var connectTimeout time.Duration
	var workers, batch int
	var batchWindow time.Duration
	fs := newFlags("rebuild", "rebuild NAME [flags]  (flags also as PROJECTOR_<FLAG>)", stderr)
	fs.StringVar(&esdbURI, "esdb", "", "EventStoreDB connection string (required)")
	fs.StringVar(&mongoURI, "mongo", "", "MongoDB URI; empty opens the embedded server's data under --data-dir")
	fs.StringVar(&database, "database", "projector", "database of the read models and checkpoints")
	fs.StringVar(&dataDir, "data-dir", "projector-data", "data of the embedded Mongo-wire server")
	fs.DurationVar(&connectTimeout, "connect-timeout", 10*time.Second, "how long to wait for each server to answer")
	fs.IntVar(&workers, "workers", projector.DefaultWorkers, "events handled at once (one stream's events stay in order)")
	batchFlags(fs, &batch, &batchWindow)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: projector rebuild NAME [flags]

Replays projection NAME from the start of $all into a new collection while the
live one keeps serving, then switches readers (and a running "projector run")
to the new collection once it has caught up with the head. Interrupted, it
keeps its checkpoint: run it again to resume. The previous collection is kept;
drop it when no reader uses it.

`)
		fs.PrintDefaults()
	}
	name, err := parseNamed(fs, args)
	if err != nil {
		return err
	}
	if name == "" {
		fmt.Fprintln(stderr, "rebuild needs the NAME of a projection; known: "+strings.Join(projectionNames(), ", "))
		return errUsage
	}
	entry, ok := catalog()[name]
	if !ok {
		fmt.Fprintf(stderr, "unknown projection %q; known: %s\n", name, strings.Join(projectionNames(), ", "))
		return errUsage
	}
	if esdbURI == "" {
		fmt.Fprintln(stderr, "--esdb (or PROJECTOR_ESDB) is required")
		return errUsage
	}
	if connectTimeout <= 0 || workers < 1 || batch < 1 || batchWindow < 0 {
		fmt.Fprintln(stderr, "--connect-timeout must be > 0, --workers and --batch >= 1, --batch-window >= 0")
		return errUsage
	}
	client, err := subscription.Dial(esdbURI, nil)
	if err != nil {
		return err
	}
	defer client.Close()
	opened, err := openStore(ctx, mongoURI, dataDir, database, connectTimeout, nil)
	if err != nil {
		return err
	}
	defer opened.close()
	store := opened.Store
	if err := probeESDB(ctx, client, connectTimeout); err != nil {
		return err
	}

	// A persistent group's position is the server's: events it acknowledged
	// into the old collection after the rebuild's checkpoint would never
	// reach the new one.
	var groups []esdb.PersistentSubscriptionInfo
	err = client.Do(ctx, func(cl *esdb.Client) error {
		var err error
		groups, err = cl.ListPersistentSubscriptionsToAll(ctx, esdb.ListPersistentSubscriptionsOptions{})
		return err
	})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("listing persistent subscription groups: %w", err)
	}
	for _, g := range groups {
		if strings.HasSuffix(g.GroupName, "-"+name) {
			return fmt.Errorf("persistent subscription group %q feeds %s: a rebuild works with catch-up projectors only "+
				"(stop the group's consumers and delete the group, rebuild, then run without --group)", g.GroupName, name)
		}
	}
	active, err := store.ActiveCollection(ctx, name, entry.collection)
	if err != nil {
		return err
	}
	building, err := store.StartRebuild(ctx, name, fmt.Sprintf("%s_r%d", entry.collection, time.Now().Unix()))
	if err != nil {
		return err
	}
	from, err := store.LoadCheckpoint(ctx, building)
	if err != nil {
		return err
	}
	if from == nil {
		fmt.Fprintf(stdout, "rebuilding %s into %s; readers stay on %s until it has caught up\n", name, building, active)
	} else {
		fmt.Fprintf(stdout, "resuming the rebuild of %s into %s from position %s; readers stay on %s\n", name, building, from, active)
	}

	eng, err := projector.NewEngine(store, registry(), []projector.Definition{entry.in(building)})
	if err != nil {
		return err
	}
	if err := eng.Prepare(ctx); err != nil {
		return err
	}
	src, err := subscription.NewAll(client, subscription.AllOptions{StreamPrefixes: []string{entry.streamPrefix}})
	if err != nil {
		return err
	}
	r, err := projector.NewRunner(building, eng, src, store, projector.WithWorkers(workers), projector.WithBatch(batch, batchWindow))
	if err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, connectTimeout)
	var head uint64
	err = client.Do(hctx, func(cl *esdb.Client) error {
		var err error
		head, err = lastPosition(hctx, cl)
		return err
	})
	cancel()
	if err != nil {
		return fmt.Errorf("reading the head of $all: %w", err)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	began := time.Now()
	start := uint64(0)
	if from != nil {
		start = from.Position
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for !r.CaughtUp() {
		select {
		case err := <-done:
			if err == nil {
				err = ctx.Err()
			}
			if errors.Is(err, context.Canceled) {
				return fmt.Errorf("interrupted at position %s; run it again to resume", checkpointString(r.Stats().Checkpoint))
			}
			return err
		case <-tick.C:
		}
		st := r.Stats()
		pos := start
		if st.Checkpoint != nil {
			pos = st.Checkpoint.Position
		}
		rate := float64(st.Applied+st.Duplicates) / time.Since(began).Seconds()
		left := "?"
		if moved := pos - start; moved > 0 && head > pos {
			left = (time.Duration(float64(time.Since(began)) * float64(head-pos) / float64(moved))).Round(time.Second).String()
		}
		fmt.Fprintf(stderr, "  %d events, %.0f events/s, position %d of %d, about %s left\n", st.Applied, rate, pos, head, left)
	}
	stop()
	if err := <-done; err != nil {
		return err
	}
	// Caught up: the switch completes even if a signal came meanwhile.
	switched, err := store.FinishRebuild(context.WithoutCancel(ctx), name, building, entry.collection)
	if err != nil {
		return err
	}
	st := r.Stats()
	fmt.Fprintf(stdout, "rebuilt %s: %d events in %v; readers now use %s (the previous collection %s is kept)\n",
		name, st.Applied, time.Since(began).Round(time.Millisecond), switched.Active, switched.Previous)
	return nil
}

// isNotFound reports an EventStoreDB "not found" error (no groups at all).
func isNotFound(err error) bool {
	var e *esdb.Error
	return errors.As(err, &e) && e.Code() == esdb.ErrorCodeResourceNotFound
}
