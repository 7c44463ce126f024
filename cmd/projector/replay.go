package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/revgate/projector/projector"
)

func runReplayParked(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var mongoURI, database, dataDir string
	var connectTimeout time.Duration
	fs := newFlags("replay-parked", "replay-parked NAME [flags]  (flags also as PROJECTOR_<FLAG>)", stderr)
	fs.StringVar(&mongoURI, "mongo", "", "MongoDB URI; empty opens the embedded server's data under --data-dir")
	fs.StringVar(&database, "database", "projector", "database of the read models")
	fs.StringVar(&dataDir, "data-dir", "projector-data", "data of the embedded Mongo-wire server")
	fs.DurationVar(&connectTimeout, "connect-timeout", 10*time.Second, "how long to wait for MongoDB to answer")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: projector replay-parked NAME [flags]

Applies the events parked for projection NAME (--on-failure park) with this
binary's projection, meant to run once its bug is fixed, to each document as
it is now. Replayed events are marked; those that fail again stay parked with
the new error (exit status 1).

For a projection under the revision gate (cart_details), stop "projector run"
for it first: the replay's write cannot be made conditional on the events the
gate applies meanwhile. Projections under the other strategies replay safely
while running (the write is conditional on the document's version).

`)
		fs.PrintDefaults()
	}
	name, err := parseNamed(fs, args)
	if err != nil {
		return err
	}
	entry, ok := catalog()[name]
	if !ok {
		fmt.Fprintf(stderr, "replay-parked needs the NAME of a projection; known: %s\n", strings.Join(projectionNames(), ", "))
		return errUsage
	}
	if connectTimeout <= 0 {
		fmt.Fprintln(stderr, "--connect-timeout must be > 0")
		return errUsage
	}
	opened, err := openStore(ctx, mongoURI, dataDir, database, connectTimeout, nil)
	if err != nil {
		return err
	}
	defer opened.close()
	store := opened.Store
	coll, err := store.ActiveCollection(ctx, name, entry.collection)
	if err != nil {
		return err
	}
	eng, err := projector.NewEngine(store, registry(), []projector.Definition{entry.in(coll)})
	if err != nil {
		return err
	}
	parked, err := store.Parked(ctx, name)
	if err != nil {
		return err
	}
	failed := 0
	for _, pe := range parked {
		r := eng.Replay(ctx, pe)
		var why error
		if r.Outcome != projector.Applied {
			why, failed = r.Err, failed+1
			fmt.Fprintf(stdout, "  still failing: %s@%d (%s): %v\n", pe.Stream, pe.Revision, pe.Type, r.Err)
		}
		if err := store.Replayed(ctx, name, pe.EventID, why); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "replayed %d of %d parked events of %s into %s\n", len(parked)-failed, len(parked), name, coll)
	if failed > 0 {
		return fmt.Errorf("%d events still fail; they stay parked", failed)
	}
	return nil
}
