package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// A rebuild in segments is done once every segment of the building
// collection has its own checkpoint at the head its process read at its
// start, or past it: a segment without one, one behind, or the
// checkpoints of another collection or another number of segments leave
// it not done. An empty $all (head 0) has nothing to rebuild.
func TestSegmentsBehind_is_done_when_every_segment_of_the_collection_is_at_the_end(t *testing.T) {
	at := func(pos uint64) mongostore.CheckpointStatus {
		return mongostore.CheckpointStatus{Checkpoint: &projector.Checkpoint{Position: pos}}
	}
	of := func(coll string, n int, pos ...uint64) map[string]mongostore.CheckpointStatus {
		all := map[string]mongostore.CheckpointStatus{}
		for k, p := range pos {
			all[segment.CheckpointName(coll, k, n)] = at(p)
		}
		return all
	}
	merge := func(ms ...map[string]mongostore.CheckpointStatus) map[string]mongostore.CheckpointStatus {
		out := map[string]mongostore.CheckpointStatus{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		all    map[string]mongostore.CheckpointStatus
		end    uint64
		behind string
	}{
		{"every segment at the end", of("b", 4, 100, 100, 100, 100), 100, "[]"},
		{"every segment past the end", of("b", 4, 150, 101, 120, 100), 100, "[]"},
		{"one segment behind", of("b", 4, 100, 99, 100, 100), 100, "[1]"},
		{"segments without a checkpoint", of("b", 4, 100, 100), 100, "[2 3]"},
		{"none stored", nil, 100, "[0 1 2 3]"},
		{"the collection's own checkpoint is not a segment's", merge(of("b", 4, 100, 100, 100), map[string]mongostore.CheckpointStatus{"b": at(200)}), 100, "[3]"},
		{"another collection's segments", of("a", 4, 100, 100, 100, 100), 100, "[0 1 2 3]"},
		{"another number of segments", of("b", 8, 100, 100, 100, 100, 100, 100, 100, 100), 100, "[0 1 2 3]"},
		{"a record holding only an error", merge(of("b", 4, 100, 100, 100), map[string]mongostore.CheckpointStatus{segment.CheckpointName("b", 3, 4): {LastError: "x"}}), 100, "[3]"},
		{"an empty $all", nil, 0, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := segmentsBehind(tc.all, "b", 4, projector.Checkpoint{Position: tc.end})
			if fmt.Sprint(got) != tc.behind {
				t.Errorf("behind %v, want %s", got, tc.behind)
			}
		})
	}
}

// A process sharing segments whose work has a done condition (rebuild
// --segments) runs the segments it holds once: a run that ends without an
// error is not started again while the set held stays the same, however
// many looks pass. Once done, it stops, lets its leases go at once and
// leaves the processes.
func TestShareSegments_runs_done_segments_once_and_stops_once_done(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	s := &session{c: &runConfig{lease: time.Second, segments: 4}, store: store, holder: "A", logger: slog.New(slog.DiscardHandler)}
	var runs, looks atomic.Int32
	var finished atomic.Bool
	var ran atomic.Pointer[[]int]
	work := segmentWork{group: "rebuild x",
		run: func(ctx context.Context, cps func() *segmentCheckpoints) error {
			keys := cps().keys
			ran.Store(&keys)
			runs.Add(1)
			return nil
		},
		done: func(context.Context) bool {
			looks.Add(1)
			return finished.Load()
		}}
	ended := make(chan error, 1)
	go func() { ended <- s.shareSegments(ctx, &slot{name: "p", segments: s.c.segments}, work) }()
	waitUntil(t, "a run", func() bool { return runs.Load() > 0 })
	// Looks after the run ended: each would start it again if it were.
	from := looks.Load()
	waitUntil(t, "five more looks", func() bool { return looks.Load() >= from+5 })
	if n := runs.Load(); n != 1 {
		t.Errorf("%d runs over the segments held; want 1: a run that did its segments is not started again", n)
	}
	if got := fmt.Sprint(*ran.Load()); got != "[0 1 2 3]" {
		t.Errorf("the run held segments %s; want all four", got)
	}
	finished.Store(true)
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("shareSegments did not stop within a minute of its work being done")
	}
	leases, err := store.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 4 {
		if l := leases[segment.LeaseName("rebuild x", k, 4)]; l.Held(time.Now()) {
			t.Errorf("segment %d: its lease is still held, until %v", k, l.Expires)
		}
	}
	if live, err := segment.Live(ctx, store.Database(), "rebuild x"); err != nil || len(live) != 0 {
		t.Errorf("processes still live: %v, %v", live, err)
	}
}

// waitUntil waits until cond holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
	}
}

// Two processes of one segmented rebuild read different heads (appends go
// on during a rebuild): A's 100, B's 200, each reaching its own head with
// the segments it holds. A is done first, and holds every segment's lease
// to switch; B, which sees A's finish lease, is done too and lets go of its
// segment, instead of waiting for the one A holds to reach 200 while A
// waits for B's: A holds every segment within a few lease periods.
func TestRebuildSegments_processes_with_different_heads_do_not_wait_for_each_other(t *testing.T) {
	twoRebuilders(t, false)
}

// As above, but B's run, past A's head, does not end caught up: it stops at
// an event that may succeed later (retryable), again and again. A is done
// and switches: it takes the finish lease and waits for every segment's
// lease. B, whose run cannot catch up now, sees A finishing and lets go of
// its segment, rather than the two waiting for each other for ever.
func TestRebuildSegments_a_process_whose_run_keeps_failing_lets_go_when_another_finishes(t *testing.T) {
	twoRebuilders(t, true)
}

// twoRebuilders runs processes A (head 100) and B (head 200, its runs
// failing when bFails) of one rebuild in two segments, and checks that A,
// done first, holds every segment's lease to switch, and that B stops.
func twoRebuilders(t *testing.T, bFails bool) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	p := Projection{Definition: cart.NewDetailsProjection()}
	building, err := store.StartRebuild(ctx, p.Definition.Name(), "x")
	if err != nil {
		t.Fatal(err)
	}
	const lease = time.Second
	proc := func(holder string, end uint64, fails bool) (*segmentedRebuild, segmentWork) {
		s := &session{c: &runConfig{lease: lease, segments: 2}, store: store, holder: holder, logger: slog.New(slog.DiscardHandler)}
		rb := &segmentedRebuild{c: &rebuildConfig{segments: 2, lease: lease}, p: p, s: s, store: store, building: building, end: end, last: projector.Checkpoint{Position: end},
			sl: &slot{name: p.Definition.Name(), projection: p, segments: 2}, caught: map[int]bool{}}
		return rb, segmentWork{group: rebuildGroup(building), done: rb.done,
			run: func(ctx context.Context, cps func() *segmentCheckpoints) error {
				// The segments held reach this process's head, and the
				// run ends caught up, or fails as if it might later.
				c := cps()
				if _, err := c.LoadCheckpoint(ctx, building); err != nil {
					return err
				}
				if err := c.SaveCheckpoint(ctx, building, projector.Checkpoint{Position: end}); err != nil {
					return err
				}
				if fails {
					return &projector.Error{Projection: p.Definition.Name(), Err: errors.New("the store did not answer"), Wanted: -1, Seen: -1}
				}
				rb.caughtUp(c.keys)
				return nil
			}}
	}
	a, workA := proc("A", 100, false)
	b, workB := proc("B", 200, bFails)
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	bDone := make(chan error, 1)
	go func() { bDone <- b.s.shareSegments(bctx, b.sl, workB) }()
	if err := a.s.shareSegments(ctx, a.sl, workA); err != nil {
		t.Fatal(err)
	}
	h, _, err := holdLease(ctx, store, rebuildGroup(building)+"/finish", a.s.holder, lease, a.s.logger)
	if err != nil {
		t.Fatal(err)
	}
	defer h.release()
	hctx, cancel := context.WithTimeout(ctx, 15*lease)
	defer cancel()
	held, err := a.holdAll(hctx)
	for _, h := range held {
		h.release()
	}
	if err != nil {
		t.Fatalf("A holding every segment to switch: %v (held %d of 2; B's runs failing: %v)", err, len(held), bFails)
	}
	select {
	case err := <-bDone:
		if err != nil && !bFails {
			t.Fatalf("B: %v", err)
		}
		t.Logf("B: %v", err)
	case <-time.After(10 * lease):
		t.Fatal("B did not stop once A was switching")
	}
}

// A process of a segmented rebuild whose segments' checkpoints are past
// the head it read at its start, but whose run has not caught up with the
// head of $all yet (events were appended during the rebuild), is not done:
// readers switch only once the runs have caught up.
func TestRebuildSegments_a_process_is_not_done_before_its_run_has_caught_up(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	p := Projection{Definition: cart.NewDetailsProjection()}
	building, err := store.StartRebuild(ctx, p.Definition.Name(), "x")
	if err != nil {
		t.Fatal(err)
	}
	const lease = time.Second
	s := &session{c: &runConfig{lease: lease, segments: 2}, store: store, holder: "A", logger: slog.New(slog.DiscardHandler)}
	rb := &segmentedRebuild{c: &rebuildConfig{segments: 2, lease: lease}, p: p, s: s, store: store, building: building, end: 100, last: projector.Checkpoint{Position: 100},
		sl: &slot{name: p.Definition.Name(), projection: p, segments: 2}, caught: map[int]bool{}}
	release := make(chan struct{})
	var runs atomic.Int32
	work := segmentWork{group: rebuildGroup(building), done: rb.done,
		run: func(ctx context.Context, cps func() *segmentCheckpoints) error {
			// Past the head read at the start, and on to the events
			// appended since, until released.
			runs.Add(1)
			c := cps()
			if _, err := c.LoadCheckpoint(ctx, building); err != nil {
				return err
			}
			if err := c.SaveCheckpoint(ctx, building, projector.Checkpoint{Position: 150}); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-release:
			}
			if err := c.SaveCheckpoint(ctx, building, projector.Checkpoint{Position: 300}); err != nil {
				return err
			}
			rb.caughtUp(c.keys)
			return nil
		}}
	done := make(chan error, 1)
	go func() { done <- s.shareSegments(ctx, rb.sl, work) }()
	waitUntil(t, "a run", func() bool { return runs.Load() > 0 })
	select {
	case err := <-done:
		t.Fatalf("done (%v) while its run had not caught up", err)
	case <-time.After(4 * lease):
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("not done a minute after its run caught up")
	}
	cps, err := store.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		if cp := cps[segment.CheckpointName(building, k, 2)].Checkpoint; cp == nil || cp.Position != 300 {
			t.Errorf("segment %d at %v, want 300", k, cp)
		}
	}
}
