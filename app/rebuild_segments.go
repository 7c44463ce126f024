package app

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// segmentedRebuild is one process's part of a rebuild in segments (rebuild
// --segments N): the processes that run the same rebuild share the building
// collection's segments as those of run --segments share the active one's
// (shareSegments), each segment with its own checkpoint, named after the
// building collection, from which run --segments N goes on after the
// switch.
type segmentedRebuild struct {
	x        *cli
	c        *rebuildConfig
	p        Projection
	client   eventStore
	store    *mongostore.Store
	s        *session
	building string
	end      uint64 // the head of $all when this process started
	// last is the last event of $all then: its append's events share end
	// as their commit position, and it is the last of them.
	last projector.Checkpoint
	inv  Invocation

	sl *slot // its segments (sl.segs)

	mu     sync.Mutex
	stats  projector.RunnerStats // of its runs, added up
	folded uint64
	ran    map[int]bool // the segments it ran
	// caught are the segments one of its runs has ended on, caught up with
	// the head of $all (not the head read at the start: the events
	// appended during the rebuild are the building collection's before
	// readers switch to it).
	caught map[int]bool
}

// group names the leases and heartbeats of the rebuild into building: apart
// from those of run --segments, which are the projection's.
func rebuildGroup(building string) string { return "rebuild " + building }

// rebuildSegments is this process's part of the rebuild of p in
// --segments segments: it shares the segments with the other processes
// that run it until every one has caught up with the head of $all this
// process read at its start, and then switches readers, or sees that
// another process did.
func (x *cli) rebuildSegments(ctx context.Context, c *rebuildConfig, p Projection, client eventStore, store *mongostore.Store, inv Invocation) error {
	name, def := p.Definition.Name(), p.Definition.Collection()
	eng, err := x.rebuildEngine(c, p, def, store, client)
	if err != nil {
		return err
	}
	if err := refuseSingleRebuild(ctx, store, name); err != nil {
		return err
	}
	active, err := store.ActiveCollection(ctx, name, def)
	if err != nil {
		return err
	}
	if err := refuseOtherCount(ctx, store, name, active, c.segments); err != nil {
		return err
	}
	building, err := x.startRebuild(ctx, store, p)
	if err != nil {
		return err
	}
	if err := rebuildSegmentCount(ctx, store, name, building, c.segments, x.name()); err != nil {
		return err
	}
	end, err := rebuildEnd(ctx, c, client)
	if err != nil {
		return err
	}
	last, err := lastOfAppend(ctx, c, client, end)
	if err != nil {
		return err
	}
	logger := c.logger // --log-level's, as the rebuild in one process logs
	rc := &runConfig{servers: c.servers, lease: c.lease, segments: c.segments}
	rb := &segmentedRebuild{x: x, c: c, p: p, client: client, store: store, building: building, end: end, last: last, inv: inv, ran: map[int]bool{}, caught: map[int]bool{},
		s: &session{cli: x, c: rc, client: client, store: store, logger: logger, holder: holderID("rebuild")}, sl: &slot{name: name, projection: p, segments: c.segments}}
	fmt.Fprintf(inv.Stdout, "rebuilding %s into %s in %d segments, shared with the processes that run this rebuild, up to position %d; readers stay on %s\n",
		name, building, c.segments, end, active)
	began := time.Now()
	work := segmentWork{group: rebuildGroup(building), run: rb.run, done: rb.done}
	if err := rb.s.shareSegments(ctx, rb.sl, work); err != nil {
		return blockedHint(err, p, blocks(eng, p), "rebuild", c.policy)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted after %s; run it again to resume", rb.did(began))
	}
	if u := rb.unknownTypes(); len(u) > 0 {
		fmt.Fprintf(inv.Stderr, "%s met events of types nobody registered in this process's segments, passed over: %s (a rename or a new version without its upcaster? status lists them)\n",
			name, countsString(u))
		// Each process adds its segments' (for status).
		if err := rb.s.store.AddUnknownTypes(context.WithoutCancel(ctx), building, u); err != nil {
			fmt.Fprintf(inv.Stderr, "recording them for status: %v\n", err)
		}
	}
	switched, err := rb.finish(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(inv.Stdout, "rebuilt %s in %d segments: %s; %s\n", name, c.segments, rb.did(began), switched)
	return nil
}

// run runs the rebuild over the segments held until it has caught up
// with the head (follow).
func (rb *segmentedRebuild) run(ctx context.Context, cps func() *segmentCheckpoints) error {
	if over, _, err := rb.over(ctx); err != nil || over {
		return err // over: done, and its checkpoints are run's
	}
	held := cps()
	r, eng, err := rb.x.rebuildRunner(ctx, rb.c, rb.p, rb.building, rb.client, rb.store, held)
	if err != nil {
		return err
	}
	err = follow(ctx, r, eng, nil, rb.end, rb.inv.Stderr, rb.c.behind(rb.client, rb.p))
	st := r.Stats()
	rb.mu.Lock()
	defer rb.mu.Unlock()
	for _, k := range held.keys {
		rb.ran[k] = true
	}
	if err == nil {
		rb.caughtUpLocked(held.keys) // follow ended caught up
	}
	rb.stats.Applied += st.Applied
	rb.stats.Duplicates += st.Duplicates
	rb.stats.Skipped += st.Skipped
	rb.stats.Parked += st.Parked
	rb.stats.ParkedLater += st.ParkedLater
	rb.stats.Held += st.Held
	rb.stats.UnknownTypes = addCounts(rb.stats.UnknownTypes, st.UnknownTypes)
	rb.folded += eng.StreamsFolded()
	return err
}

// done reports whether the rebuild is over (another process switched
// readers: from then on run --segments writes the checkpoints), or this
// process's part of it is: a run of its has ended caught up with the head
// on every segment it holds, and every segment's checkpoint is at the head
// this process read at its start, or past it (or another process waits to
// switch readers, see finishing).
func (rb *segmentedRebuild) done(ctx context.Context) bool {
	if over, _, err := rb.over(ctx); err == nil && over {
		return true
	}
	caught := rb.heldCaughtUp()
	if rb.finishing(ctx) && (caught || rb.retrying()) {
		// Another process waits for every segment to switch readers:
		// this one's runs have caught up, or cannot now (they fail, and
		// are tried again after a wait): it lets them go rather than
		// have the two wait for each other.
		return true
	}
	if !caught {
		return false
	}
	names := make([]string, rb.c.segments)
	for k := range names {
		names[k] = segment.CheckpointName(rb.building, k, rb.c.segments)
	}
	all, err := rb.store.Checkpoints(ctx, names...)
	if err != nil {
		if ctx.Err() == nil {
			rb.s.logger.Warn("reading the segments' checkpoints", "collection", rb.building, "err", err)
		}
		return false
	}
	return len(segmentsBehind(all, rb.building, rb.c.segments, rb.last)) == 0
}

// caughtUp notes that a run ended caught up on segments ks.
func (rb *segmentedRebuild) caughtUp(ks []int) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.caughtUpLocked(ks)
}

func (rb *segmentedRebuild) caughtUpLocked(ks []int) {
	for _, k := range ks {
		rb.caught[k] = true
	}
}

// retrying reports whether this process's run over its segments failed and
// waits to run again.
func (rb *segmentedRebuild) retrying() bool {
	g := rb.sl.segs.Load()
	return g != nil && (!g.retryAt.IsZero() || g.failures > 0)
}

// heldCaughtUp reports whether a run of this process has ended caught up
// on every segment it holds.
func (rb *segmentedRebuild) heldCaughtUp() bool {
	g := rb.sl.segs.Load()
	if g == nil {
		return true
	}
	rb.mu.Lock()
	defer rb.mu.Unlock()
	for _, k := range g.keys() {
		if !rb.caught[k] {
			return false
		}
	}
	return true
}

// finishing reports whether another process holds the rebuild's finish
// lease: it found every segment at or past the head it read at its start
// (an earlier one than this process's, it may be) and waits for every
// segment's lease to switch readers. This process's part is then done too:
// it lets go of its segments (a later head of its own to reach would have
// the two wait for each other for ever), and the switch goes on from the
// checkpoints they reached; run --segments then takes them further.
func (rb *segmentedRebuild) finishing(ctx context.Context) bool {
	all, err := rb.store.Leases(ctx, rebuildGroup(rb.building)+"/finish")
	if err != nil {
		return false
	}
	l, ok := all[rebuildGroup(rb.building)+"/finish"]
	return ok && l.Held(time.Now()) && l.Holder != rb.s.holder
}

// segmentsBehind returns the segments of collection, of n, whose stored
// checkpoint (in all, by name) is not at last or past it: a checkpoint at
// last's commit position but before its prepare one is inside the append,
// with events of it still to apply. None when last is the start (an empty
// $all).
func segmentsBehind(all map[string]mongostore.CheckpointStatus, collection string, n int, last projector.Checkpoint) []int {
	if last.Position == 0 {
		return nil
	}
	var behind []int
	for k := range n {
		if cp := all[segment.CheckpointName(collection, k, n)].Checkpoint; cp == nil || last.After(*cp) {
			behind = append(behind, k)
		}
	}
	return behind
}

// lastOfAppend returns the checkpoint of the last event of the append at
// commit position end (the head of $all): the events of a transaction
// written by the legacy TCP API share their commit position and differ in
// their prepare one (a gRPC append gives each event its own).
func lastOfAppend(ctx context.Context, c *rebuildConfig, client eventStore, end uint64) (projector.Checkpoint, error) {
	last := projector.Checkpoint{Position: end}
	if end == 0 {
		return last, nil
	}
	sctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := client.ScanAll(sctx, &projector.Checkpoint{Position: end}, 1<<30, func(at projector.Checkpoint, _, _ string) bool {
		if at.Position != end {
			return at.Position < end // before it (a read from a position starts there); past it: the end
		}
		last = at
		return true
	})
	if err != nil {
		return last, fmt.Errorf("reading the last append of $all: %w", err)
	}
	return last, nil
}

// did says what this process did of the rebuild.
func (rb *segmentedRebuild) did(began time.Time) string {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	st := rb.stats
	ran := "no segment"
	if len(rb.ran) > 0 {
		ran = "segments " + intsString(slices.Sorted(maps.Keys(rb.ran)))
	}
	return fmt.Sprintf("this process ran %s: %d events in %v (%d applied, %d already applied, %d skipped, %d parked, %d held; %d folds of a document from its streams' history)",
		ran, handled(st), time.Since(began).Round(time.Millisecond), st.Applied, st.Duplicates, st.Skipped, st.Parked+st.ParkedLater, st.Held, rb.folded)
}

// unknownTypes is how many events of types nobody registered the
// segments this process ran passed over, by type.
func (rb *segmentedRebuild) unknownTypes() map[string]uint64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return maps.Clone(rb.stats.UnknownTypes)
}

// finish switches readers to the building collection, every segment
// being done, and says so; or says that another process did. One process
// at a time finishes (a lease); it first holds every segment's lease, so
// that no process still runs one.
func (rb *segmentedRebuild) finish(ctx context.Context) (string, error) {
	group, s := rebuildGroup(rb.building), rb.s
	for {
		if over, why, err := rb.over(ctx); err != nil || over {
			return why, err
		}
		h, _, err := holdLease(ctx, rb.store, group+"/finish", s.holder, s.c.lease, s.logger)
		if err == nil && h.confirm(ctx) {
			defer h.release()
			break
		}
		if err == nil {
			h.release()
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("interrupted while switching readers; run it again to resume")
		case <-time.After(standbyPoll(s.c.lease)):
		}
	}
	if over, why, err := rb.over(ctx); err != nil || over {
		return why, err
	}
	held, err := rb.holdAll(ctx)
	defer func() {
		for _, h := range held {
			h.release()
		}
	}()
	if err != nil {
		return "", err
	}
	// Every segment held and done: the switch completes even if a signal
	// comes meanwhile. The runs that go on from the segments' checkpoints
	// take them over once these leases are let go (SaveCheckpointUnder).
	switched, err := switchReaders(context.WithoutCancel(ctx), rb.store, rb.p, rb.building, rb.inv.Stderr)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("this process switched readers: they now use %s (%s)", switched.Active, previousText(ctx, rb.store, switched.Previous)), nil
}

// over reports whether the rebuild into the building collection is no
// longer in progress: another process switched readers to it.
func (rb *segmentedRebuild) over(ctx context.Context) (bool, string, error) {
	c, err := rb.store.CollectionsOf(ctx, rb.p.Definition.Name())
	switch {
	case err != nil:
		return false, "", err
	case c.Building == rb.building:
		return false, "", nil
	case c.Active == rb.building:
		return true, "another process switched readers to " + rb.building, nil
	}
	return true, fmt.Sprintf("the rebuild into %s is no longer in progress: readers use %s (another process switched them, or the rebuild was given up)", rb.building, c.Active), nil
}

// holdAll takes the lease of every segment, waiting for the processes that
// hold them to let them go (they do, every segment being done, once their
// runs have stopped and stored their checkpoints) or for their leases to
// expire. It returns those it holds, all of them unless ctx is done.
func (rb *segmentedRebuild) holdAll(ctx context.Context) ([]*heldLease, error) {
	s, n := rb.s, rb.c.segments
	held := make([]*heldLease, 0, n)
	for k := range n {
		for {
			h, _, err := holdLease(ctx, rb.store, segment.LeaseName(rebuildGroup(rb.building), k, n), s.holder, s.c.lease, s.logger)
			if err == nil {
				held = append(held, h)
				break
			}
			select {
			case <-ctx.Done():
				return held, fmt.Errorf("interrupted while switching readers; run it again to resume")
			case <-time.After(standbyPoll(s.c.lease)):
			}
		}
	}
	return held, nil
}

// refuseSingleRebuild fails while a rebuild of projection name runs in one
// process (rebuild without --segments holds its lease).
func refuseSingleRebuild(ctx context.Context, store *mongostore.Store, name string) error {
	leases, err := store.Leases(ctx, "rebuild "+name)
	if err != nil {
		return err
	}
	if l := leases["rebuild "+name]; l.Held(time.Now()) {
		return fmt.Errorf("a rebuild of %s runs in one process, in %s (its lease runs until %s): let it finish, or stop it and run rebuild --segments again",
			name, l.Holder, l.Expires.Format(time.RFC3339))
	}
	return nil
}

// refuseOtherCount fails while processes run projection name's active
// collection in another number of segments than n: at the switch to a
// collection in n they would all stop (a run in another number is refused),
// and nobody would run it.
func refuseOtherCount(ctx context.Context, store *mongostore.Store, name, active string, n int) error {
	running, err := segment.Count(ctx, store.Database(), active)
	if err != nil || running == n || (running <= 1 && n <= 1) {
		return err
	}
	leases, err := store.Leases(ctx, name)
	if err != nil {
		return err
	}
	now := time.Now()
	if l := leases[name]; running <= 1 {
		// Run without --segments: its process holds the projection's own
		// lease, and runs it in one process until the switch.
		if !l.Held(now) || !strings.HasPrefix(l.Holder, runRole+" ") {
			return nil
		}
		return fmt.Errorf("%w: %s runs %s without segments: a rebuild in %d switches readers to a collection that process must then run in %d segments (it stops the projection there if it was given --segments); "+
			"stop it first, then rebuild and run the new collection with --segments %d, or rebuild without --segments",
			errSegmentCount, l.Holder, name, n, n, n)
	}
	for lease, l := range leases {
		if segment.IsLease(name, lease) && l.Held(now) {
			return fmt.Errorf("%w: processes run %s in %d segments (%s holds one): a rebuild in %d switches readers to a collection they must then run in %d segments "+
				"(those given --segments stop the projection there); rebuild it with --segments %d, or stop them first and run the new collection with --segments %d",
				errSegmentCount, name, running, l.Holder, n, n, running, n)
		}
	}
	return nil
}

// rebuildSegmentCount records n as the number of segments of building, the
// collection a rebuild of projection fills, unless one is recorded, and
// refuses another number than the one recorded (n 1: a rebuild in one
// process, which records nothing).
func rebuildSegmentCount(ctx context.Context, store *mongostore.Store, projection, building string, n int, bin string) error {
	var stored int
	var err error
	if n > 1 {
		// A rebuild begun in one process has a checkpoint of its own (its
		// segments would start over beside it, and run then finds the
		// collection segmented where it ran in one process).
		var cp *projector.Checkpoint
		if cp, err = store.LoadCheckpoint(ctx, building); err != nil {
			return err
		}
		if cp != nil {
			return fmt.Errorf("%w: the rebuild of %s into %s was begun in one process (its checkpoint is at %s), not in %d segments: "+
				"run %s rebuild %s without --segments to resume it", errSegmentCount, projection, building, cp, n, bin, projection)
		}
		stored, err = segment.Record(ctx, store.Database(), projection, building, n)
	} else {
		stored, err = segment.Count(ctx, store.Database(), building)
	}
	if err != nil || stored <= 1 || stored == n {
		return err
	}
	return fmt.Errorf("%w: the rebuild of %s into %s runs in %d segments, as its first process recorded in %s, not %d: run %s rebuild %s --segments %d",
		errSegmentCount, projection, building, stored, segment.CountCollection, n, bin, projection, stored)
}
