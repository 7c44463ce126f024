package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// rebuildConfig is the command line of rebuild.
type rebuildConfig struct {
	servers
	workers, batch int
	batchMiB       int
	eventSpans     int
	batchWindow    time.Duration
	onFailure      string
	policy         projector.FailurePolicy
	segments       int
	rollBack       bool
	lease          time.Duration
	logLevel       string
	// logger is the engine's and runners' log, on stderr at logLevel.
	logger *slog.Logger
}

func (x *cli) runRebuild(ctx context.Context, inv Invocation) error {
	var c rebuildConfig
	fs := inv.FlagSet("NAME [flags]  (flags also as " + inv.EnvPrefix + "<FLAG>)")
	c.register(fs, x, "EventStoreDB or KurrentDB connection string, esdb:// or kurrentdb:// (required)")
	fs.IntVar(&c.workers, "workers", projector.DefaultWorkers, "events handled at once (one stream's events stay in order); a projection's own Workers wins")
	batchFlags(fs, &c.batch, &c.batchWindow, &c.batchMiB)
	eventSpansFlag(fs, &c.eventSpans)
	fs.StringVar(&c.onFailure, "on-failure", "block", "an event that fails permanently: block (the rebuild stops at it), hold, park or skip (as for run); a projection's own OnFailure wins")
	fs.IntVar(&c.segments, "segments", 1, "split the new collection's documents into this many segments, shared by every process that runs this same rebuild, each holding the leases of its share (as run --segments does; needs --lease); readers switch once every segment has caught up, and run --segments N goes on from each segment's checkpoint; set once per rebuild: its first process records it")
	fs.BoolVar(&c.rollBack, "roll-back", false, "rebuild with a binary whose projection version is older than the one that built the collection readers use now: readers then switch back to the older version's fold (refused without it)")
	fs.DurationVar(&c.lease, "lease", 15*time.Second, "with --segments above 1: a process holds the leases of its segments in MongoDB and renews them; another takes a dead process's segments within this time")
	fs.StringVar(&c.logLevel, "log-level", "warn", "the level of the engine's log on stderr (events parked, skipped or held, types nobody registered): debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(inv.Stderr, `usage: %s rebuild NAME [flags]

Replays projection NAME from the start of $all into a new collection while the
live one keeps serving, then switches readers (and a running "%[1]s run")
to the new collection once it has caught up with the head. Interrupted, it
keeps its checkpoint: run it again to resume. The previous collection is kept;
drop it when no reader uses it.

With --segments N, run the same command in several processes: they share the
new collection's N segments, and once every segment has caught up one of
them switches readers; the others exit 0 saying so. Run the new collection
with run --segments N.

`, inv.Name)
		fs.PrintDefaults()
	}
	name, err := inv.ParseNamed(fs)
	if err != nil {
		return err
	}
	if name == "" {
		return usageError("rebuild needs the NAME of a projection; known: %s", strings.Join(x.cat.names(), ", "))
	}
	p, ok := x.cat.get(name)
	if !ok {
		return usageError("%v", x.cat.unknown(name))
	}
	if err := c.check(inv, x, p); err != nil {
		return err
	}
	client, err := dial(ctx, c.servers, nil)
	if err != nil {
		return err
	}
	defer client.Close()
	opened, err := x.openStore(ctx, c.servers, nil)
	if err != nil {
		return err
	}
	defer opened.Close()
	if err := refuseGroups(ctx, client, opened.Store, name, x.cat.names(), inv.Stderr); err != nil {
		return err
	}
	if err := refuseRollBack(ctx, opened.Store, p, c.rollBack); err != nil {
		return err
	}
	if c.segments > 1 {
		return x.rebuildSegments(ctx, &c, p, client, opened.Store, inv)
	}
	held, err := holdRebuild(ctx, opened, name, inv.Stderr)
	if err != nil {
		return err
	}
	defer held.release()
	return x.rebuild(ctx, &c, p, client, opened.Store, inv)
}

// freshCollection is name, or name with a number after it, such that no
// collection of that name exists and projection's record names none: a
// rebuild begun in the second the one before it began (named after the
// second) would otherwise fill the collection readers use.
func freshCollection(ctx context.Context, store *mongostore.Store, projection, name string) (string, error) {
	cols, err := store.CollectionsOf(ctx, projection)
	if err != nil {
		return "", err
	}
	candidate := name
	for n := 2; ; n++ {
		names, err := store.Database().ListCollectionNames(ctx, bson.D{{Key: "name", Value: candidate}})
		if err != nil {
			return "", fmt.Errorf("looking for a collection to rebuild into: %w", err)
		}
		if len(names) == 0 && !slices.Contains([]string{cols.Active, cols.Building, cols.Previous}, candidate) {
			return candidate, nil
		}
		candidate = fmt.Sprintf("%s_%d", name, n)
	}
}

// refuseRollBack refuses a rebuild of p by a binary whose version of it is
// older than the version that built the collection its readers use: its
// switch would put readers back on the older version's fold, undoing an
// upgrade without a word (old code reading events it does not know as
// older forms), unless rollBack says that is the purpose.
func refuseRollBack(ctx context.Context, store *mongostore.Store, p Projection, rollBack bool) error {
	name := p.Definition.Name()
	active, err := store.ActiveCollection(ctx, name, p.Definition.Collection())
	if err != nil {
		return err
	}
	// Only a collection something built (its checkpoint record holds its
	// version) has a version to undo: ClaimVersion then reads it, and
	// claims nothing for a collection nothing built.
	cps, err := store.Checkpoints(ctx, active)
	if err != nil || len(cps) == 0 {
		return err
	}
	built, err := store.ClaimVersion(ctx, active, p.Version)
	if err != nil || built <= p.Version || rollBack {
		return err
	}
	return fmt.Errorf("collection %s, which readers of projection %s use, was built by version %d, newer than this binary's version %d: "+
		"a rebuild by this binary would switch readers back to version %[4]d's fold, undoing the upgrade; rebuild with the binary of version %[3]d, "+
		"or, to roll back on purpose, give --roll-back", active, name, built, p.Version)
}

// holdRebuild takes the lease of the rebuild of projection name: one
// rebuild of a projection at a time. The lease of a rebuild killed on the
// embedded server this process now runs on the same data dir is taken
// over at once, as run does.
func holdRebuild(ctx context.Context, opened *Store, name string, stderr io.Writer) (*heldLease, error) {
	hold := func() (*heldLease, mongostore.Lease, error) {
		return holdLease(ctx, opened.Store, "rebuild "+name, holderID("rebuild"), 15*time.Second, slog.New(slog.DiscardHandler))
	}
	held, l, err := hold()
	if errors.Is(err, mongostore.ErrLeaseHeld) && takeOverGone(ctx, opened.Store, opened.Embedded != nil, l) {
		fmt.Fprintf(stderr, "took over the lease of the rebuild of %s from %s, a process that is gone\n", name, l.Holder)
		held, l, err = hold()
	}
	switch {
	case errors.Is(err, mongostore.ErrLeaseHeld) && goneHolder(l.Holder):
		return nil, fmt.Errorf("a rebuild of %s ran in %s, a process of this host that no longer runs (killed?): its lease runs until %s; "+
			"run this again then, and it resumes", name, l.Holder, l.Expires.Format(time.RFC3339))
	case errors.Is(err, mongostore.ErrLeaseHeld):
		return nil, fmt.Errorf("a rebuild of %s is running in %s (its lease runs until %s)", name, l.Holder, l.Expires.Format(time.RFC3339))
	}
	return held, err
}

// check checks the flags of a rebuild of p, without I/O.
func (c *rebuildConfig) check(inv Invocation, x *cli, p Projection) error {
	if err := c.servers.check(inv, true, x.Embedded != nil); err != nil {
		return err
	}
	if err := checkBatch(c.workers, c.batch, c.batchWindow, c.batchMiB); err != nil {
		return err
	}
	if err := checkEventSpans(c.eventSpans); err != nil {
		return err
	}
	switch {
	case c.segments < 1 || c.segments > maxSegments:
		return usageError("--segments %d: want 1 (the rebuild in one process) to %d", c.segments, maxSegments)
	case c.segments > 1 && c.lease <= 0:
		return usageError("--segments %d needs leases: each process holds the leases of its segments (give --lease, e.g. 15s)", c.segments)
	}
	if err := checkLease(c.lease, "no leases"); err != nil {
		return err
	}
	var err error
	if c.logger, err = newLogger(inv.Stderr, "text", c.logLevel); err != nil {
		return usageError("%v", err)
	}
	if c.policy, err = parsePolicy(c.onFailure); err != nil {
		return usageError("%v", err)
	}
	if err := projector.Check(p.Definition, c.policy, true, c.runnerOptions(p)...); err != nil {
		return usageError("%v", err)
	}
	return nil
}

// behind counts the events of p behind a rebuild's checkpoint, read from
// client within the connect timeout.
func (c *rebuildConfig) behind(client eventStore, p Projection) behindHead {
	return func(ctx context.Context, cp projector.Checkpoint) (int, bool, error) {
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		return countAfter(ctx, client, &cp.Position, cp.Prepare, p.Reads)
	}
}

// runnerOptions are the settings of p's rebuild runner: its own, else the
// flags'.
func (c *rebuildConfig) runnerOptions(p Projection) []projector.RunnerOption {
	return []projector.RunnerOption{projector.WithWorkers(p.workers(c.workers)), projector.WithBatch(orDefault(p.Batch, c.batch), c.batchWindow),
		projector.WithBatchBytes(c.batchMiB << 20)}
}

// engine returns the engine of a rebuild of p into collection.
func (x *cli) rebuildEngine(c *rebuildConfig, p Projection, collection string, store *mongostore.Store, streams projector.StreamReader) (*projector.Engine, error) {
	opts := []projector.Option{projector.WithFailurePolicy(c.policy), projector.WithParker(store), projector.WithStreamReader(streams),
		projector.WithEventSpans(c.eventSpans)}
	if c.logger != nil {
		opts = append(opts, projector.WithLogger(c.logger))
	}
	return projector.NewEngine(store, x.Registry, []projector.Definition{projector.Copy(p.Definition, collection)}, opts...)
}

// refuseGroups fails when a persistent subscription group on the event
// store feeds projection name in this database (run --group recorded it
// there): a group's position is the server's, and events it acknowledged
// into the old collection after the rebuild's checkpoint would never reach
// the new one. A group "<group>-<projection>" belongs to the projection of
// names with the longest name that ends it; one of name's that this
// database has no record of (another deployment's, on the same event
// store) is only noted on stderr.
func refuseGroups(ctx context.Context, client eventStore, store *mongostore.Store, name string, names []string, stderr io.Writer) error {
	groups, err := client.groups(ctx)
	if err != nil {
		return fmt.Errorf("listing persistent subscription groups: %w", err)
	}
	var ours []string
	for _, g := range groups {
		owner := ""
		for _, n := range names {
			if strings.HasSuffix(g, "-"+n) && len(n) > len(owner) {
				owner = n
			}
		}
		if owner == name {
			ours = append(ours, g)
		}
	}
	if len(ours) == 0 {
		return nil
	}
	rec, err := store.CollectionsOf(ctx, name)
	if err != nil {
		return err
	}
	for _, g := range ours {
		if slices.Contains(rec.Groups, g) {
			return fmt.Errorf("persistent subscription group %q feeds %s: a rebuild works with catch-up projectors only "+
				"(stop the group's consumers and delete the group, rebuild, then run without --group)", g, name)
		}
		fmt.Fprintf(stderr, "note: persistent subscription group %q on the event store was never run with this database (another deployment's?): rebuilding %s all the same\n", g, name)
	}
	return nil
}

// rebuild fills a new collection with p from the start of $all (or from
// where an interrupted rebuild stopped), then switches readers to it.
func (x *cli) rebuild(ctx context.Context, c *rebuildConfig, p Projection, client eventStore, store *mongostore.Store, inv Invocation) error {
	name, def := p.Definition.Name(), p.Definition.Collection()
	// Whatever the projection needs of the store is checked before the
	// rebuild is recorded.
	if _, err := x.rebuildEngine(c, p, def, store, client); err != nil {
		return err
	}
	active, err := store.ActiveCollection(ctx, name, def)
	if err != nil {
		return err
	}
	building, err := x.startRebuild(ctx, store, p)
	if err != nil {
		return err
	}
	if err := rebuildSegmentCount(ctx, store, name, building, 1, x.name()); err != nil {
		return err
	}
	from, err := store.LoadCheckpoint(ctx, building)
	if err != nil {
		return err
	}
	if from == nil {
		fmt.Fprintf(inv.Stdout, "rebuilding %s into %s; readers stay on %s until it has caught up\n", name, building, active)
	} else {
		fmt.Fprintf(inv.Stdout, "resuming the rebuild of %s into %s from position %s; readers stay on %s\n", name, building, from, active)
	}
	r, eng, err := x.rebuildRunner(ctx, c, p, building, client, store, store)
	if err != nil {
		return err
	}
	end, err := rebuildEnd(ctx, c, client)
	if err != nil {
		return err
	}
	began := time.Now()
	if err := follow(ctx, r, eng, from, end, inv.Stderr, c.behind(client, p)); err != nil {
		return blockedHint(err, p, blocks(eng, p), "rebuild", c.policy)
	}
	noteUnknownTypes(context.WithoutCancel(ctx), store, name, building, r.Stats().UnknownTypes, inv.Stderr)
	// Caught up: the switch completes even if a signal came meanwhile.
	switched, err := switchReaders(context.WithoutCancel(ctx), store, p, building, inv.Stderr)
	if err != nil {
		return err
	}
	st := r.Stats()
	took := time.Since(began)
	fmt.Fprintf(inv.Stdout, "rebuilt %s: %d events in %v, %.0f events/s (%d applied, %d already applied, %d skipped, %d parked, %d held; %d folds of a document from its streams' history); readers now use %s (%s)\n",
		name, handled(st), took.Round(time.Millisecond), float64(handled(st))/took.Seconds(), st.Applied, st.Duplicates, st.Skipped, st.Parked+st.ParkedLater, st.Held,
		eng.StreamsFolded(), switched.Active, previousText(ctx, store, switched.Previous))
	return nil
}

// rebuildRunner makes the runner of a rebuild of p into building, its
// engine prepared, storing its checkpoints in cps.
func (x *cli) rebuildRunner(ctx context.Context, c *rebuildConfig, p Projection, building string, client eventStore,
	store *mongostore.Store, cps projector.CheckpointStore) (*projector.Runner, *projector.Engine, error) {
	eng, err := x.rebuildEngine(c, p, building, store, client)
	if err != nil {
		return nil, nil, err
	}
	if err := eng.Prepare(ctx); err != nil {
		return nil, nil, err
	}
	src, err := client.all(p.Reads.options())
	if err != nil {
		return nil, nil, err
	}
	r, err := projector.NewRunner(building, eng, src, cps, c.runnerOptions(p)...)
	if err != nil {
		return nil, nil, err
	}
	return r, eng, nil
}

// noteUnknownTypes says on stderr which events of types nobody registered
// a rebuild of projection name passed over, and records them with the
// checkpoint of building, the collection readers switch to, for status (as
// run records them with its own).
func noteUnknownTypes(ctx context.Context, store *mongostore.Store, name, building string, counts map[string]uint64, stderr io.Writer) {
	if len(counts) == 0 {
		return
	}
	fmt.Fprintf(stderr, "%s met events of types nobody registered, passed over: %s (a rename or a new version without its upcaster? status lists them)\n",
		name, countsString(counts))
	if err := store.AddUnknownTypes(ctx, building, counts); err != nil {
		fmt.Fprintf(stderr, "recording them for status: %v\n", err)
	}
}

// rebuildEnd reads the head of $all: where a rebuild has caught up.
func rebuildEnd(ctx context.Context, c *rebuildConfig, client eventStore) (uint64, error) {
	hctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	end, err := client.Head(hctx)
	if err != nil {
		return 0, fmt.Errorf("reading the head of $all: %w", err)
	}
	return end, nil
}

// switchReaders switches p's readers to building, a rebuild that has
// caught up; an error an interrupted attempt recorded is over.
func switchReaders(ctx context.Context, store *mongostore.Store, p Projection, building string, stderr io.Writer) (mongostore.Collections, error) {
	if err := store.ClearError(ctx, building); err != nil {
		fmt.Fprintf(stderr, "clearing the error an earlier attempt recorded: %v\n", err)
	}
	switched, err := store.FinishRebuild(ctx, p.Definition.Name(), building, p.Definition.Collection())
	if err == nil {
		noteParkedIn(ctx, store, p.Definition.Name(), building, stderr)
	}
	return switched, err
}

// noteParkedIn says on stderr how many events the build into collection
// parked or held, this process's or an interrupted attempt's before it, or
// another process's segments': readers now see their documents without
// them (a replay into the collection readers used before does not carry
// over), until replay-parked applies them.
func noteParkedIn(ctx context.Context, store *mongostore.Store, name, collection string, stderr io.Writer) {
	parked, err := store.Parked(ctx, name)
	if err != nil {
		fmt.Fprintf(stderr, "counting the events the rebuild parked: %v\n", err)
		return
	}
	n, held := 0, 0
	for _, pe := range parked {
		if pe.Collection != collection {
			continue
		}
		n++
		if pe.Held {
			held++
		}
	}
	if n > 0 {
		fmt.Fprintf(stderr, "%s: %d events parked in %s (%d of them held), now what readers see without them: replay-parked %s applies them once fixed (status --parked lists them)\n",
			name, n, collection, held, name)
	}
}

// previousText says what became of the collection readers used before a
// rebuild switched them: kept, or none there (a projection new, or renamed:
// the old name's collection, checkpoint and parked events stay under it).
func previousText(ctx context.Context, store *mongostore.Store, previous string) string {
	// Said after the switch, which a stop does not cut short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	names, err := store.Database().ListCollectionNames(ctx, map[string]any{"name": previous})
	if err == nil && len(names) == 0 {
		if ranUnder(ctx, store, previous) {
			// It ran, and wrote no document (its events failed, or none
			// was its).
			return fmt.Sprintf("the previous collection %s had no document: the projection ran under that name and wrote none", previous)
		}
		return fmt.Sprintf("there was no collection %s before: a new projection, or a renamed one, whose old name keeps its collection, checkpoint and parked events", previous)
	}
	return fmt.Sprintf("the previous collection %s is kept", previous)
}

// ranUnder reports whether a runner stored a checkpoint under the name of
// collection, or one of its segments did.
func ranUnder(ctx context.Context, store *mongostore.Store, collection string) bool {
	cps, _ := store.Checkpoints(ctx)
	for name := range cps {
		if segment.IsCheckpoint(collection, name) {
			return true
		}
	}
	return false
}

// startRebuild records a rebuild of p into a new collection, or resumes the
// one in progress, and returns its collection, which p's version builds.
func (x *cli) startRebuild(ctx context.Context, store *mongostore.Store, p Projection) (string, error) {
	def := p.Definition.Collection()
	fresh, err := freshCollection(ctx, store, p.Definition.Name(), fmt.Sprintf("%s_r%d", def, time.Now().Unix()))
	if err != nil {
		return "", err
	}
	building, err := store.StartRebuild(ctx, p.Definition.Name(), fresh)
	if err != nil {
		return "", err
	}
	if err := claimVersion(ctx, store, p, building, x.name()); err != nil {
		// An interrupted rebuild by another version: its documents are
		// that version's.
		return "", fmt.Errorf("%w (a rebuild into %s is in progress: finish it with the binary of that version, "+
			"or drop the collection and its record in projector_checkpoints, and unset building in projector_collections)", err, building)
	}
	return building, nil
}

// handled is how many events a runner has handled, whatever their outcome
// (failed ones aside).
func handled(st projector.RunnerStats) uint64 {
	return st.Applied + st.Duplicates + st.Skipped + st.Parked + st.ParkedLater + st.Held
}

// progress is how far a rebuild that started at position start, took, and
// stored checkpoint cp (nil: none yet in this run) stands towards end.
func progress(cp *projector.Checkpoint, start, end uint64, took time.Duration) string {
	switch {
	case cp == nil:
		return fmt.Sprintf("no checkpoint stored yet in this run (from position %d, up to %d)", start, end)
	case cp.Position > end:
		// Live traffic since it began: it catches up with the head, now.
		return fmt.Sprintf("position %d, past %d (the head when it began): catching up with the head", cp.Position, end)
	case cp.Position == end:
		return fmt.Sprintf("position %d of %d, about 0s left", cp.Position, end)
	case cp.Position <= start:
		return fmt.Sprintf("position %d of %d", cp.Position, end)
	}
	left := time.Duration(float64(took) * float64(end-cp.Position) / float64(cp.Position-start)).Round(time.Second)
	return fmt.Sprintf("position %d of %d, about %s left", cp.Position, end, left)
}

// follow runs r, on engine eng, until it has caught up with the head,
// printing its progress every second (events and the documents folded from
// their streams, each per second, and the time left; once past the head it
// began at, how many events it is behind the head now, counted by behind,
// when not nil); then it stops r.
func follow(ctx context.Context, r *projector.Runner, eng *projector.Engine, from *projector.Checkpoint, end uint64, stderr io.Writer, behind behindHead) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	began := time.Now()
	start := uint64(0)
	if from != nil {
		start = from.Position
	}
	// It looks often, so that a rebuild of a few events ends once they are
	// done, not at the next second; it prints once a second.
	look := time.NewTicker(20 * time.Millisecond)
	defer look.Stop()
	printed := began
	var trail gap
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
		case <-look.C:
		}
		if time.Since(printed) < time.Second {
			continue
		}
		printed = time.Now()
		st := r.Stats()
		elapsed := time.Since(began).Seconds()
		streams := eng.StreamsFolded()
		line := progress(st.Checkpoint, start, end, time.Since(began))
		if cp := st.Checkpoint; cp != nil && cp.Position > end && behind != nil {
			line += trail.look(ctx, behind, *cp, printed, stderr)
		}
		fmt.Fprintf(stderr, "  %d events (%.0f/s), %d folds from streams (%.0f/s), %s\n",
			handled(st), float64(handled(st))/elapsed, streams, float64(streams)/elapsed, line)
	}
	stop()
	return <-done
}

// behindHead counts the events of the projection after checkpoint cp, up
// to a bound (more: there are more).
type behindHead func(ctx context.Context, cp projector.Checkpoint) (n int, more bool, err error)

// gap is how far a rebuild past the head it began at stays behind the
// head, as follow looks each second.
type gap struct {
	since time.Time // when the count was last not above the one before
	low   int       // the count then
	said  bool      // the rebuild was said to lose ground
}

// losingGround is how long a rebuild's count of events behind the head
// may stay at or above where it was before follow says it loses ground.
var losingGround = 30 * time.Second

// look counts the events behind cp and returns what the progress line
// says of them. Once the count has not gone down for losingGround, it says
// once, in a line of its own, that the head moves away faster than the
// rebuild handles events: it switches only once the appends slow down.
func (g *gap) look(ctx context.Context, behind behindHead, cp projector.Checkpoint, now time.Time, stderr io.Writer) string {
	n, more, err := behind(ctx, cp)
	if err != nil {
		return fmt.Sprintf(" (how far behind the head it is could not be read: %v)", firstLine(err.Error(), "the log"))
	}
	if g.since.IsZero() || n < g.low {
		g.since, g.low = now, n
	}
	if n > 0 && now.Sub(g.since) >= losingGround && !g.said {
		g.said = true
		fmt.Fprintf(stderr, "the head moves away faster than this rebuild handles events (%d behind it now, %d %v ago): "+
			"it switches readers once it catches up, when the appends slow down; each event costs it a read and write of its document "+
			"(large documents cost the embedded server more: docs/limits.md)\n", n, g.low, now.Sub(g.since).Round(time.Second))
	}
	if more {
		return fmt.Sprintf(", more than %d events behind it", n)
	}
	return fmt.Sprintf(", %d events behind it", n)
}
