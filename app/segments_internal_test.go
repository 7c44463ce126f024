package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// segmentsOf returns what process holder holds of projection "p" split
// into n segments, on store, logging into log.
func segmentsOf(store *mongostore.Store, holder string, n int, log *bytes.Buffer) *segments {
	logger := slog.New(slog.NewTextHandler(log, nil))
	s := &session{c: &runConfig{lease: time.Minute, segments: n}, store: store, holder: holder, logger: logger}
	return &segments{s: s, sl: &slot{name: "p"}, work: segmentWork{group: "p"}, n: n, logger: logger, held: map[int]*heldLease{}, saved: map[int]savedSegment{},
		changed: make(chan struct{}, 1)}
}

// unrenewed is a lease taken for holder and never renewed: it expires
// after ttl unless released.
func unrenewed(t *testing.T, store *mongostore.Store, name, holder string, ttl time.Duration) *heldLease {
	t.Helper()
	l, err := store.AcquireLease(context.Background(), name, holder, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return unrenewedLease(store, l, ttl)
}

// unrenewedLease is lease l held without its renewals.
func unrenewedLease(store *mongostore.Store, l mongostore.Lease, ttl time.Duration) *heldLease {
	done := make(chan struct{})
	close(done)
	return &heldLease{store: store, ttl: ttl, logger: slog.New(slog.DiscardHandler), lease: l, lost: make(chan struct{}), stop: func() {}, done: done}
}

// checkpointsOf is the checkpoint store of a run of g over the segments
// of held.
func checkpointsOf(g *segments, held map[int]*heldLease) *segmentCheckpoints {
	c := &segmentCheckpoints{g: g, held: held}
	for k, h := range held {
		g.held[k] = h
		c.keys = append(c.keys, k)
	}
	slices.Sort(c.keys)
	return c
}

// A run resumes from the lowest checkpoint of its segments; a segment with
// none of its own resumes from the collection's own (before it was
// segmented); with neither, from the start.
func TestSegmentCheckpoints_load_the_lowest_and_fall_back_to_the_collections_own(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	var log bytes.Buffer
	g := segmentsOf(store, "A", 4, &log)
	for k, pos := range map[int]uint64{0: 100, 1: 50} {
		if err := store.SaveCheckpoint(ctx, segment.CheckpointName("coll", k, 4), projector.Checkpoint{Position: pos}); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(k int) *heldLease { return unrenewed(t, store, segment.LeaseName("p", k, 4), "A", time.Minute) }
	two := checkpointsOf(g, map[int]*heldLease{0: lease(0), 1: lease(1)})
	if cp, err := two.LoadCheckpoint(ctx, "coll"); err != nil || cp == nil || cp.Position != 50 {
		t.Fatalf("segments 0 (100) and 1 (50): %v, %v; want 50", cp, err)
	}
	three := checkpointsOf(g, map[int]*heldLease{0: g.held[0], 1: g.held[1], 2: lease(2)})
	if cp, err := three.LoadCheckpoint(ctx, "coll"); err != nil || cp != nil {
		t.Fatalf("segment 2 has none, the collection none: %v, %v; want none (the start)", cp, err)
	}
	if err := store.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 30}); err != nil {
		t.Fatal(err)
	}
	if cp, err := three.LoadCheckpoint(ctx, "coll"); err != nil || cp == nil || cp.Position != 30 {
		t.Fatalf("segment 2 has none, the collection 30: %v, %v; want 30", cp, err)
	}
	if err := three.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 120}); err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		if cp, err := store.LoadCheckpoint(ctx, segment.CheckpointName("coll", k, 4)); err != nil || cp == nil || cp.Position != 120 {
			t.Errorf("segment %d after a save at 120: %v, %v", k, cp, err)
		}
	}
}

// A run hands its engine the events of its own segments only, each from
// past its segment's checkpoint: an event at or before it is stored
// already, and goes by without the engine (no gate to pass, no document to
// read again) however far back the run resumes for its other segments.
func TestSegmentCheckpoints_a_segment_needs_only_the_events_past_its_own_checkpoint(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	var log bytes.Buffer
	g := segmentsOf(store, "A", 4, &log)
	for k, pos := range map[int]uint64{0: 100, 1: 50} {
		if err := store.SaveCheckpoint(ctx, segment.CheckpointName("coll", k, 4), projector.Checkpoint{Position: pos}); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(k int) *heldLease { return unrenewed(t, store, segment.LeaseName("p", k, 4), "A", time.Minute) }
	c := checkpointsOf(g, map[int]*heldLease{0: lease(0), 1: lease(1), 2: lease(2)})
	in := map[int]string{} // a document id of each segment
	for i := 0; len(in) < 4; i++ {
		id := fmt.Sprintf("doc-%d", i)
		if _, ok := in[segment.Of(id, 4)]; !ok {
			in[segment.Of(id, 4)] = id
		}
	}
	if cp, err := c.LoadCheckpoint(ctx, "coll"); err != nil || cp != nil {
		t.Fatalf("segment 2 has no checkpoint: %v, %v; want none (the start)", cp, err)
	}
	for _, tc := range []struct {
		segment int
		at      uint64
		want    bool
	}{
		{0, 1, false}, {0, 100, false}, {0, 101, true},
		{1, 49, false}, {1, 50, false}, {1, 51, true},
		{2, 1, true}, {2, 1000, true},
		{3, 1, false}, {3, 1000, false}, // not held
	} {
		if got := c.NeedsEvent(in[tc.segment], projector.Checkpoint{Position: tc.at}); got != tc.want {
			t.Errorf("segment %d (checkpoints 0: 100, 1: 50, 2: none; 3 not held), event at %d: needed %v, want %v",
				tc.segment, tc.at, got, tc.want)
		}
	}
}

// The events of a transaction written by the legacy TCP API share a
// commit position and differ by their prepare positions, and a checkpoint
// can fall between them: a segment
// resumed from one still needs the rest of its append, and a run resumes
// from the lowest checkpoint by both positions.
func TestSegmentCheckpoints_a_checkpoint_inside_an_append(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	var log bytes.Buffer
	g := segmentsOf(store, "A", 2, &log)
	for k, prepare := range map[int]uint64{0: 40, 1: 58} {
		if err := store.SaveCheckpoint(ctx, segment.CheckpointName("coll", k, 2), projector.Checkpoint{Position: 60, Prepare: prepare}); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(k int) *heldLease { return unrenewed(t, store, segment.LeaseName("p", k, 2), "A", time.Minute) }
	c := checkpointsOf(g, map[int]*heldLease{0: lease(0), 1: lease(1)})
	if cp, err := c.LoadCheckpoint(ctx, "coll"); err != nil || cp == nil || cp.Position != 60 || cp.Prepare != 40 {
		t.Fatalf("segments at 60/40 and 60/58: resumes from %v, %v; want 60/40", cp, err)
	}
	id := "doc-0"
	for segment.Of(id, 2) != 0 {
		id += "x"
	}
	for _, tc := range []struct {
		at   projector.Checkpoint
		want bool
	}{
		{projector.Checkpoint{Position: 60, Prepare: 40}, false},
		{projector.Checkpoint{Position: 60, Prepare: 49}, true}, // the same append, after the checkpoint
		{projector.Checkpoint{Position: 59, Prepare: 59}, false},
		{projector.Checkpoint{Position: 61, Prepare: 0}, true},
	} {
		if got := c.NeedsEvent(id, tc.at); got != tc.want {
			t.Errorf("segment 0 at 60/40, event at %d/%d: needed %v, want %v", tc.at.Position, tc.at.Prepare, got, tc.want)
		}
	}
}

// A process whose lease of a segment expired and was taken finds its
// checkpoint save refused: the new holder claimed the segment's checkpoint
// when its run loaded it. The stale process drops the segment (its lease is
// lost, its run starts again without it) and goes on; the checkpoint stays
// where the new holder has it.
func TestSegmentCheckpoints_a_stale_holders_save_is_refused_and_drops_the_segment(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	name := segment.LeaseName("p", 0, 4)
	var staleLog, newLog bytes.Buffer
	stale := segmentsOf(store, "A", 4, &staleLog)
	staleRun := checkpointsOf(stale, map[int]*heldLease{0: unrenewed(t, store, name, "A", 200*time.Millisecond)})
	if err := staleRun.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 100}); err != nil {
		t.Fatal(err)
	}
	// A's lease expires (its process stopped renewing it); B takes it.
	var taken *heldLease
	for deadline := time.Now().Add(10 * time.Second); taken == nil; time.Sleep(50 * time.Millisecond) {
		if l, err := store.AcquireLease(ctx, name, "B", time.Minute); err == nil {
			taken = unrenewedLease(store, l, time.Minute)
		} else if !errors.Is(err, mongostore.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("B takes the expired lease: %v", err)
		}
	}
	newer := checkpointsOf(segmentsOf(store, "B", 4, &newLog), map[int]*heldLease{0: taken})
	if cp, err := newer.LoadCheckpoint(ctx, "coll"); err != nil || cp == nil || cp.Position != 100 {
		t.Fatalf("B loads: %v, %v; want 100", cp, err)
	}
	// A comes back and saves further: refused, not an error.
	if err := staleRun.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 150}); err != nil {
		t.Fatalf("the stale save: %v; want nil (the segment dropped, the process goes on)", err)
	}
	if !staleRun.held[0].isLost() {
		t.Error("the stale holder does not know it lost the segment")
	}
	select {
	case <-stale.changed:
	default:
		t.Error("the stale holder's run is not told to start again without the segment")
	}
	if !strings.Contains(staleLog.String(), "a checkpoint save was refused (fenced)") {
		t.Errorf("the refusal is not logged:\n%s", staleLog.String())
	}
	if cp, err := store.LoadCheckpoint(ctx, segment.CheckpointName("coll", 0, 4)); err != nil || cp.Position != 100 {
		t.Errorf("the checkpoint after the stale save: %v, %v; want 100", cp, err)
	}
	if err := newer.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 200}); err != nil {
		t.Fatal(err)
	}
	if cp, err := store.LoadCheckpoint(ctx, segment.CheckpointName("coll", 0, 4)); err != nil || cp.Position != 200 {
		t.Errorf("the new holder's save: %v, %v; want 200", cp, err)
	}
}

// A stale process's document writes cannot undo newer work: the gate's
// writes are conditional on the revision, so an event the new holder
// applied already comes back to the stale one as a duplicate, and the
// document keeps the newer state.
func TestSegments_a_stale_holders_document_write_cannot_undo_newer_work(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	p := cart.NewDetailsProjection()
	newEngine := func() *projector.Engine {
		e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{p})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	fresh, stale := newEngine(), newEngine()
	var events []projector.Event
	for rev, payload := range cart.RandomLife(rand.New(rand.NewPCG(1, 1)), "c1", "client", 6, time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)) {
		name, data, _ := cart.Registry().Encode(payload)
		events = append(events, projector.Event{ID: "e" + string(rune('a'+rev)), Type: name, StreamID: cart.StreamID("c1"), StreamRevision: uint64(rev), Data: data})
	}
	for _, ev := range events {
		if _, err := fresh.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range events[2:4] {
		results, err := stale.Handle(ctx, ev)
		if err != nil || len(results) != 1 || results[0].Outcome != projector.Duplicate {
			t.Fatalf("the stale holder handles revision %d again: %v, %v; want a duplicate", ev.StreamRevision, results, err)
		}
	}
	want := make([]projector.Event, len(events))
	for i, ev := range events {
		want[i], _ = cart.Registry().Decode(ev)
	}
	if err := projectortest.CheckDocument(ctx, store, p, "c1", want); err != nil {
		t.Error(err)
	}
}

// A process short of its share of the segments waits for the ones the
// others let go of before it runs those it holds, for a while at most: one
// run once they have come, not one at each.
func TestSegments_a_run_starts_at_the_share_or_once_the_segments_held_have_settled(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	var log bytes.Buffer
	g := segmentsOf(store, "A", 16, &log)
	lease := func(k int) *heldLease { return unrenewed(t, store, segment.LeaseName("p", k, 16), "A", time.Minute) }
	checkpointsOf(g, map[int]*heldLease{0: lease(0), 1: lease(1)})
	settle := settleSegments(g.s.c.lease)
	for _, tc := range []struct {
		want    int
		changed time.Duration // ago
		start   bool
	}{
		{2, 0, true},                    // its share
		{1, 0, true},                    // more than its share: it lets go of some once its run stops
		{5, 0, false},                   // short of it, just changed
		{5, settle / 2, false},          // still settling
		{5, settle + time.Second, true}, // the others keep theirs: it runs what it has
	} {
		if got := g.settled(tc.want, time.Now().Add(-tc.changed)); got != tc.start {
			t.Errorf("holding 2 of a share of %d, changed %v ago: starts %v, want %v", tc.want, tc.changed, got, tc.start)
		}
	}
}

// While a run without --segments (started before the projection was
// split), or replay-parked, holds the projection's own lease, a segmented
// process takes no segment: it stands by, and says so; once that lease is
// let go, it takes its share.
func TestSegments_stand_by_while_the_projections_own_lease_is_held(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	plain, _, err := holdLease(ctx, store, "p", "run plainhost/1/aaaaaa", time.Minute, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	g := segmentsOf(store, "run seghost/2/bbbbbb", 2, &log)
	defer g.releaseAll()
	live := []string{g.s.holder}
	for range 3 { // a segment is tried once it has been free for its rank's looks
		if g.take(ctx, 2, live) || g.count() != 0 {
			t.Fatalf("took %v while another process held the projection's own lease", g.keys())
		}
	}
	if down := g.sl.down.Load(); down == nil || !strings.Contains(*down, "run plainhost/1/aaaaaa holds the projection's own lease") {
		t.Errorf("readiness says %v, want the holder of the projection's lease", down)
	}
	plain.release()
	for range 3 {
		g.take(ctx, 2, live)
	}
	if g.count() != 2 || g.sl.down.Load() != nil {
		t.Errorf("after the lease was let go: holds %v, readiness %v; want both segments and ready", g.keys(), g.sl.down.Load())
	}
}

// A process whose runs keep failing for a reason of its own (its event
// store does not answer) waits between runs (1 s doubling to a minute)
// while it goes on balancing: a process that joins meanwhile gets its
// share at once, not after the wait.
func TestSegments_a_process_waiting_to_run_again_hands_a_joiner_its_share(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	ctx, cancel := context.WithCancel(context.Background())
	store := mongostore.New(mongotest.Database(t))
	const lease = time.Second
	sess := func(holder string) *session {
		return &session{c: &runConfig{lease: lease, segments: 4}, store: store, holder: holder, logger: slog.New(slog.DiscardHandler)}
	}
	var aRuns, bHeld atomic.Int32
	failing := segmentWork{group: "p", run: func(context.Context, func() *segmentCheckpoints) error {
		aRuns.Add(1)
		return errors.New("dial esdb: connection refused")
	}}
	healthy := segmentWork{group: "p", run: func(ctx context.Context, cps func() *segmentCheckpoints) error {
		bHeld.Store(int32(len(cps().keys)))
		<-ctx.Done()
		return nil
	}}
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { sess("A").shareSegments(ctx, &slot{name: "p", segments: 4}, failing) })
	waitUntil(t, "A's fourth failed run", func() bool { return aRuns.Load() >= 4 }) // then it waits 8 s
	wg.Go(func() { sess("B").shareSegments(ctx, &slot{name: "p", segments: 4}, healthy) })
	for deadline := time.Now().Add(5 * lease); time.Now().Before(deadline) && bHeld.Load() == 0; {
		time.Sleep(20 * time.Millisecond)
	}
	if bHeld.Load() == 0 {
		t.Errorf("B runs no segment %v after joining: A, in its wait after %d failed runs, keeps them", 5*lease, aRuns.Load())
	}
}

// A checkpoint save that fails on every segment of a run (MongoDB is gone)
// is one error, of one line, that names the segments.
func TestSegmentCheckpoints_a_save_that_fails_on_several_segments_is_one_line(t *testing.T) {
	client, err := mongostore.Connect(context.Background(), mongotest.URI(t), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	db := client.Database("oneline_" + strings.ReplaceAll(time.Now().Format("150405.000"), ".", ""))
	store := mongostore.New(db)
	var log bytes.Buffer
	g := segmentsOf(store, "A", 4, &log)
	lease := func(k int) *heldLease { return unrenewed(t, store, segment.LeaseName("p", k, 4), "A", time.Minute) }
	c := checkpointsOf(g, map[int]*heldLease{0: lease(0), 1: lease(1), 2: lease(2), 3: lease(3)})
	_ = db.Drop(context.Background())
	client.Disconnect(context.Background()) // MongoDB is gone
	err = c.SaveCheckpoint(context.Background(), "coll", projector.Checkpoint{Position: 10})
	if err == nil {
		t.Fatal("no error from a disconnected store")
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "segments 0,1,2,3") {
		t.Errorf("the error of one failed checkpoint save is %d lines, want one that names the segments:\n%v", strings.Count(err.Error(), "\n")+1, err)
	}
}

// The events of a transaction written by the legacy TCP API share a
// commit position. A segment stored inside the last such append of $all
// (at its commit position, before its last prepare one) has events of it
// still to apply: a segmented rebuild must
// not count it caught up (it would switch readers without them).
func TestSegmentsBehind_a_checkpoint_inside_the_last_append_is_behind(t *testing.T) {
	last := projector.Checkpoint{Position: 60, Prepare: 58}
	all := map[string]mongostore.CheckpointStatus{
		segment.CheckpointName("coll", 0, 3): {Checkpoint: &projector.Checkpoint{Position: 60, Prepare: 58}},
		segment.CheckpointName("coll", 1, 3): {Checkpoint: &projector.Checkpoint{Position: 60, Prepare: 40}},
		segment.CheckpointName("coll", 2, 3): {Checkpoint: &projector.Checkpoint{Position: 75, Prepare: 75}},
	}
	if behind := segmentsBehind(all, "coll", 3, last); !slices.Equal(behind, []int{1}) {
		t.Errorf("segments at 60/58, 60/40 and 75/75, the last append ending at 60/58: behind %v, want [1]", behind)
	}
	if behind := segmentsBehind(map[string]mongostore.CheckpointStatus{}, "coll", 3, projector.Checkpoint{}); len(behind) != 0 {
		t.Errorf("an empty $all: behind %v, want none", behind)
	}
}

// projector_segment_checkpoint_position says where each segment's stored
// checkpoint is: a run over segments stored at 100 and 50 resumes from 50,
// and its save at 60 leaves the first at 100 (a checkpoint never moves
// back), which the metric keeps saying; projector_segment_events_passed
// counts the event the run took for the second.
func TestSegments_the_checkpoint_metric_does_not_move_back_with_a_save_that_did_not(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	var log bytes.Buffer
	g := segmentsOf(store, "A", 2, &log)
	for k, pos := range map[int]uint64{0: 100, 1: 50} {
		if err := store.SaveCheckpoint(ctx, segment.CheckpointName("coll", k, 2), projector.Checkpoint{Position: pos}); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(k int) *heldLease { return unrenewed(t, store, segment.LeaseName("p", k, 2), "A", time.Minute) }
	c := checkpointsOf(g, map[int]*heldLease{0: lease(0), 1: lease(1)})
	if _, err := c.LoadCheckpoint(ctx, "coll"); err != nil {
		t.Fatal(err)
	}
	// An event of segment 1's documents, past its checkpoint: counted in
	// projector_segment_events_passed once stored.
	if !c.NeedsEvent(idsIn(1, 1)[0], projector.Checkpoint{Position: 55}) {
		t.Fatal("the event at 55 of segment 1, stored at 50, is not needed")
	}
	if err := c.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 60}); err != nil {
		t.Fatal(err)
	}
	_, held := g.Segments()
	if held[0] == nil || held[1] == nil || held[0].events != 0 || held[1].events != 1 {
		t.Errorf("events passed: segment 0 %+v, segment 1 %+v; want 0 and 1", held[0], held[1])
	}
	for k, want := range map[int]uint64{0: 100, 1: 60} {
		stored, err := store.LoadCheckpoint(ctx, segment.CheckpointName("coll", k, 2))
		if err != nil || stored == nil || stored.Position != want {
			t.Fatalf("segment %d stored at %+v (%v), want %d", k, stored, err, want)
		}
		if p := held[k]; p == nil || p.position != want {
			got := "none"
			if p != nil {
				got = fmt.Sprint(p.position)
			}
			t.Errorf("segment %d stored at %d; the metric says %s", k, want, got)
		}
	}
}
