package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// lockedBuf is a log sink safe to read while written.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// replay-parked takes the projection's lease, then looks for held segment
// leases; a segmented process's take looks at the projection's lease,
// takes segment leases, and looks again: run at the same moment, they
// never both win (the replay holds the projection's lease while the
// segmented process holds segments).
func TestSegments_take_and_a_replay_never_both_win(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	both, replayWins, segWins := 0, 0, 0
	for i := range 40 {
		var log bytes.Buffer
		g := segmentsOf(store, fmt.Sprintf("run seg/%d/aaaaaa", i), 2, &log)
		var replay *heldLease
		var rerr error
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
			g.take(ctx, 2, []string{g.s.holder})
		})
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
			replay, rerr = holdReplayLease(ctx, store, "p", time.Minute, false, io.Discard)
		})
		wg.Wait()
		segHeld := g.count()
		switch {
		case rerr == nil && segHeld > 0:
			both++
		case rerr == nil:
			replayWins++
		case segHeld > 0:
			segWins++
		}
		g.releaseAll()
		if replay != nil {
			replay.release()
		}
	}
	t.Logf("40 attempts: both won %d, replay alone %d, segmented alone %d", both, replayWins, segWins)
	if both > 0 {
		t.Errorf("in %d of 40 attempts replay-parked held the projection's lease while a segmented process held segments: "+
			"both apply events to the same documents (nothing re-checks the projection's lease once segments are held)", both)
	}
}

// A segment's lease is lost (another process took it), also while the read
// of the processes' heartbeats (segment.Live, in want) fails: the run over
// it stops, and the stale checkpoint save is fenced.
func TestSegments_a_lost_segment_stops_running_also_while_the_processes_cannot_be_read(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	for _, poison := range []bool{false, true} {
		t.Run(fmt.Sprintf("members_unreadable=%v", poison), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			db := mongotest.Database(t)
			store := mongostore.New(db)
			var log lockedBuf
			s := &session{c: &runConfig{lease: time.Second, segments: 2}, store: store, holder: "A", logger: slog.New(slog.NewTextHandler(&log, nil))}
			var cpsOf atomic.Pointer[segmentCheckpoints]
			var runs, stopped atomic.Int32
			work := segmentWork{group: "p", run: func(ctx context.Context, cps func() *segmentCheckpoints) error {
				c := cps()
				if _, err := c.LoadCheckpoint(ctx, "coll"); err != nil {
					return err
				}
				if len(c.keys) == 2 {
					cpsOf.Store(c)
				}
				runs.Add(1)
				<-ctx.Done()
				stopped.Add(1)
				return nil
			}}
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			wg.Go(func() { s.shareSegments(ctx, &slot{name: "p", segments: s.c.segments}, work) })
			waitUntil(t, "A runs both segments", func() bool { return cpsOf.Load() != nil })
			if poison {
				// One heartbeat record the driver cannot decode (holder
				// not a string): segment.Live fails, Beat still works.
				if _, err := db.Collection(segment.MemberCollection).InsertOne(context.Background(),
					bson.D{{Key: "_id", Value: "p poison"}, {Key: "projection", Value: "p"}, {Key: "holder", Value: 42}, {Key: "expires", Value: time.Now().Add(time.Hour)}}); err != nil {
					t.Fatal(err)
				}
			}
			// B takes segment 0 (as after A's lease expired): a newer token.
			name := segment.LeaseName("p", 0, 2)
			var l mongostore.Lease
			if err := db.Collection("projector_leases").FindOneAndUpdate(context.Background(), bson.D{{Key: "_id", Value: name}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "holder", Value: "B"}, {Key: "expires", Value: time.Now().Add(time.Minute)}}}, {Key: "$inc", Value: bson.D{{Key: "token", Value: int64(1)}}}}).Decode(&l); err != nil {
				t.Fatal(err)
			}
			l.Token++
			l.Holder = "B"
			// B claims the segment's checkpoint, as its run's load does.
			if err := store.SaveCheckpointUnder(context.Background(), segment.CheckpointName("coll", 0, 2), projector.Checkpoint{Position: 100}, l, 0); err != nil {
				t.Fatal(err)
			}
			stale := cpsOf.Load()
			waitUntil(t, "A's renewal finds segment 0 lost", func() bool { return stale.held[0].isLost() })
			// The stale run stores a checkpoint: refused (fencing).
			if err := stale.SaveCheckpoint(context.Background(), "coll", projector.Checkpoint{Position: 200}); err != nil {
				t.Fatalf("stale save: %v", err)
			}
			if cp, err := store.LoadCheckpoint(context.Background(), segment.CheckpointName("coll", 0, 2)); err != nil || cp == nil || cp.Position != 100 {
				t.Errorf("fencing: segment 0's checkpoint after the stale save is %v (%v), want 100 (B's)", cp, err)
			} else {
				t.Logf("fencing holds: segment 0's checkpoint stays at B's 100 after the stale save of 200")
			}
			time.Sleep(3 * time.Second) // 30 polls of A's loop, 9 of its renewals
			if stopped.Load() == 0 {
				t.Errorf("3s after segment 0's lease was lost (and its checkpoint save fenced), A's run over segments 0 and 1 is still running: "+
					"it keeps applying segment 0's events beside B; runs started %d\nA's log:\n%s", runs.Load(), log.String())
			}
		})
	}
}

// The rebuild's segment leases are still held when a run takes the
// segments after the switch (the finishing rebuild process was killed, or
// paused, between the switch and the release of its leases): the run's
// claim of each segment's checkpoint is refused while they are held. The
// run keeps its segments (its own leases are valid), and does not churn.
// Its leases last 3s: on a loaded machine (SQLite, load 13 on 2 cores) the
// embedded server left renewals of 1s leases unanswered past their end.
func TestSegments_a_rebuild_lease_left_held_at_the_switch_does_not_make_the_run_churn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	db := mongotest.Database(t)
	store := mongostore.New(db)
	for k := range 2 {
		rl, err := store.AcquireLease(context.Background(), segment.LeaseName(rebuildGroup("coll"), k, 2), "rebuild host/9/dead", 6*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.SaveCheckpointUnder(context.Background(), segment.CheckpointName("coll", k, 2), projector.Checkpoint{Position: 50}, rl, 0); err != nil {
			t.Fatal(err)
		}
	}
	var log lockedBuf
	s := &session{c: &runConfig{lease: 3 * time.Second, segments: 2}, store: store, holder: "A", logger: slog.New(slog.NewTextHandler(&log, nil))}
	var runs atomic.Int32
	work := segmentWork{group: "p", run: func(ctx context.Context, cps func() *segmentCheckpoints) error {
		if _, err := cps().LoadCheckpoint(ctx, "coll"); err != nil {
			return err
		}
		runs.Add(1)
		<-ctx.Done()
		return nil
	}}
	var wg sync.WaitGroup
	wg.Go(func() { s.shareSegments(ctx, &slot{name: "p", segments: s.c.segments}, work) })
	time.Sleep(2500 * time.Millisecond)
	cancel()
	wg.Wait()
	out := log.String()
	fenced, lost, held := strings.Count(out, "refused (fenced)"), strings.Count(out, "lost a segment's lease"), strings.Count(out, "holds a segment's lease")
	t.Logf("in 2.5s: %d runs, %d 'refused (fenced)', %d 'lost a segment's lease', %d 'holds a segment's lease'", runs.Load(), fenced, lost, held)
	if runs.Load() > 2 || lost > 0 {
		first := out
		if len(first) > 3000 {
			first = first[:3000]
		}
		t.Errorf("the run churns while the rebuild's leases are held: %d runs, %d segments 'lost' (they were not: another process's lease on the checkpoint, not on the segment)\n%s",
			runs.Load(), lost, first)
	}
}

// markLost, called from a runner's goroutine (a fenced save), reads the
// lease the renewal goroutine writes: under -race, no race.
func TestLease_markLost_beside_the_renewal_is_race_free(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	h, _, err := holdLease(context.Background(), store, "p", "A", time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer h.release()
	time.Sleep(450 * time.Millisecond) // one renewal (every ttl/3) has written h.lease
	h.markLost(errors.New("fenced"))
}

// A process whose segments' leases are lost (not renewed in time) shows it
// at once, before its look at the processes drops them (which waits on
// MongoDB too): no segment owned, no lease held, and down as retrying,
// where the metrics showed two owners of a segment until then. A look that
// fails with no segment held says retrying, not standby.
func TestSegments_lost_leases_show_at_once_and_an_unanswering_store_is_retrying(t *testing.T) {
	store := mongostore.New(mongotest.Database(t))
	var log bytes.Buffer
	g := segmentsOf(store, "A", 4, &log)
	sl := g.sl
	sl.segs.Store(g)
	a := unrenewed(t, store, segment.LeaseName("p", 0, 4), "A", time.Minute)
	b := unrenewed(t, store, segment.LeaseName("p", 1, 4), "A", time.Minute)
	g.held[0], g.held[1] = a, b
	g.show()
	if n, held := sl.Segments(); n != 4 || len(held) != 2 || !sl.Leader() || sl.Down() != "" {
		t.Fatalf("holding 2 of 4: segments %d %v, leader %v, down %q", n, held, sl.Leader(), sl.Down())
	}
	a.markLost(errors.New("not renewed in time"))
	if _, held := sl.Segments(); len(held) != 1 || !slices.Contains(slices.Collect(maps.Keys(held)), 1) || !sl.Leader() {
		t.Errorf("one lease lost: owned %v, leader %v; want segment 1 alone, leader", held, sl.Leader())
	}
	b.markLost(errors.New("not renewed in time"))
	if _, held := sl.Segments(); len(held) != 0 || sl.Leader() || !strings.HasPrefix(sl.Down(), "retrying: lost the leases") {
		t.Errorf("every lease lost: owned %v, leader %v, down %q; want none, not leader, retrying", held, sl.Leader(), sl.Down())
	}
	g.dropLost()
	g.unanswered = errors.New("server selection error: context deadline exceeded")
	g.show()
	if d := sl.Down(); !strings.HasPrefix(d, "retrying: MongoDB does not answer") {
		t.Errorf("no segment, MongoDB not answering: down %q, want retrying", d)
	}
	g.unanswered = nil
	g.show()
	if d := sl.Down(); !strings.HasPrefix(d, "standby: this process holds none") {
		t.Errorf("no segment, MongoDB answering: down %q, want standby", d)
	}
}
