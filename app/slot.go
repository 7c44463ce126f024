package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"
	"time"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// runnerView is what metrics and health read of a projection's runner.
type runnerView interface {
	Name() string
	Stats() projector.RunnerStats
	CaughtUp() bool
	// Current reports whether the projection reads at the log's head
	// (readiness): its runner caught up, or, for a group's consumer, the
	// server feeds the group live.
	Current() bool
	Connected() bool
	// Down says why the projection is not running ("" while it runs): an
	// event that failed for good, one that is tried again after a wait, or
	// another process that holds its lease (standby).
	Down() string
	// Leader reports whether this process holds the projection's lease.
	Leader() bool
	// Reads is what the projection's subscription reads.
	Reads() Filter
}

// slot is one projection of a running projector. Its runner writes to the
// projection's active collection; when a rebuild switches readers to a new
// collection, the slot stops that runner and starts one on the new collection,
// from the checkpoint the rebuild left (checkpoints are named after their
// collection).
type slot struct {
	name        string
	projection  Projection
	cur         atomic.Pointer[projector.Runner]
	past        atomic.Pointer[projector.RunnerStats] // counters of the runners before cur
	group       atomic.Pointer[groupSource]           // with --group
	groupName   string                                // the group's name, with --group
	blocks      atomic.Bool                           // its engine's failure policy is block
	groupParked atomic.Int64                          // events parked in the group, as the server last said (-1: not known)
	groupLive   atomic.Bool                           // the server last said it feeds the group live (it read $all to its end)
	down        atomic.Pointer[string]                // why it is not running; nil while it runs
	leader      atomic.Bool                           // this process holds the projection's lease
	segs        atomic.Pointer[segments]              // with run --segments: the segments this process holds
	// segments is how many segments this process runs the projection in
	// (1: in one process at a time): --segments, or without it the number
	// its collection's first segmented run recorded (session.followSegments).
	segments int
}

// Leader reports whether this process holds the projection's lease (with
// run --segments, the lease of one of its segments at least).
func (s *slot) Leader() bool {
	if g := s.segs.Load(); g != nil && g.lostAll() {
		return false
	}
	return s.leader.Load()
}

// Segments returns how many segments the projection is split into (0
// without run --segments) and, for those this process holds, the position
// it last stored each one's checkpoint at (nil before its first store).
func (s *slot) Segments() (int, map[int]*savedSegment) {
	if g := s.segs.Load(); g != nil {
		return g.Segments()
	}
	return 0, nil
}

// Down implements runnerView.
func (s *slot) Down() string {
	if g := s.segs.Load(); g != nil && g.lostAll() {
		return "retrying: lost the leases of its segments (not renewed in time: MongoDB does not answer, or another process took them)"
	}
	if d := s.down.Load(); d != nil {
		return *d
	}
	return s.groupDown()
}

// groupBlocks reports whether events parked in the slot's persistent group
// leave documents behind: it consumes a group. Under every policy: what
// the group parks is what kept failing without failing for good (under
// block, an event that fails for good; under any, a predecessor that did
// not come, a store that did not answer), whose documents wait behind it.
func (s *slot) groupBlocks() bool { return s.group.Load() != nil }

// groupDown says why the projection is blocked in its persistent group:
// events that kept failing were parked there, and the documents they feed
// stay behind them until they are replayed. "" when none are.
func (s *slot) groupDown() string {
	g := s.group.Load()
	if g == nil {
		return ""
	}
	docs, parked := (*g).Blocked(), s.groupParked.Load()
	if len(docs) == 0 && parked <= 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("blocked: events that kept failing are parked in group " + s.groupName)
	if parked > 0 {
		fmt.Fprintf(&b, " (%d on the server)", parked)
	}
	if len(docs) > 0 {
		waits := fmt.Sprintf("%d documents wait", len(docs))
		if len(docs) == 1 {
			waits = "1 document waits"
		}
		fmt.Fprintf(&b, "; %s behind them, first %s", waits, docs[0])
	}
	fmt.Fprintf(&b, "; fix the projection, then replay them (replay-parked %s --group)", s.name)
	return b.String()
}

func (s *slot) setDown(why string) {
	if why == "" {
		s.down.Store(nil)
		return
	}
	s.down.Store(&why)
}

// Parked returns how many events this process parked in its group.
func (s *slot) Parked() (uint64, bool) {
	if g := s.group.Load(); g != nil {
		return (*g).Stats().Parked, true
	}
	return 0, false
}

var _ runnerView = (*slot)(nil)

func (s *slot) Name() string { return s.name }

func (s *slot) Reads() Filter { return s.projection.Reads }

// Stats returns the current runner's figures, with the counters of the
// runners it replaced added, so that counters never go down.
func (s *slot) Stats() projector.RunnerStats {
	var st projector.RunnerStats
	if r := s.cur.Load(); r != nil {
		st = r.Stats()
	}
	if p := s.past.Load(); p != nil {
		st.Events += p.Events
		st.Checkpoints += p.Checkpoints
		st.Abandoned += p.Abandoned
		st.Unrouted += p.Unrouted
		st.Applied += p.Applied
		st.Duplicates += p.Duplicates
		st.Skipped += p.Skipped
		st.Parked += p.Parked
		st.ParkedLater += p.ParkedLater
		st.Held += p.Held
		st.Failed += p.Failed
		st.Waits += p.Waits
		st.Batches += p.Batches
		st.Batched += p.Batched
		st.Saved += p.Saved
		st.Subscriptions += p.Subscriptions
		st.Drops += p.Drops
		st.UnknownTypes = addCounts(st.UnknownTypes, p.UnknownTypes)
	}
	return st
}

func (s *slot) CaughtUp() bool {
	r := s.cur.Load()
	if s.group.Load() != nil {
		// A group's consumer is never told it reached the head: it has
		// when the server says it feeds the group live (it read $all to
		// its end) and every event delivered to it has its outcome.
		return r != nil && r.Connected() && s.Down() == "" && s.groupLive.Load() && inFlight(s.Stats()) == 0
	}
	return r != nil && r.CaughtUp() && s.Down() == ""
}

func (s *slot) Current() bool {
	if s.group.Load() != nil {
		// Not every delivered event done (CaughtUp): consumers of a live
		// group have some in flight whenever events come.
		return s.Connected() && s.groupLive.Load()
	}
	return s.CaughtUp()
}

// inFlight is how many events delivered to a runner of one projection have
// no outcome yet: each has one result, or is unrouted, or was abandoned.
func inFlight(st projector.RunnerStats) uint64 {
	done := st.Unrouted + st.Abandoned + st.Applied + st.Duplicates + st.Skipped + st.Parked + st.Held + st.Failed
	return st.Events - min(done, st.Events)
}

func (s *slot) Connected() bool {
	r := s.cur.Load()
	return r != nil && r.Connected() && s.Down() == ""
}

// followInterval is how often a running projector looks for a switch.
const followInterval = time.Second

// run runs the projection until ctx is done or its runner fails, following
// switches of its active collection when follow is set. It refuses a
// collection that another version of the projection built
// (errOtherVersion); bin is the binary's name, for the way out.
func (s *slot) run(ctx context.Context, store *mongostore.Store, follow bool, logger *slog.Logger, bin string,
	build func(ctx context.Context, collection string) (*projector.Runner, error)) error {
	for {
		coll, err := store.ActiveCollection(ctx, s.name, s.projection.Definition.Collection())
		if err != nil {
			return err
		}
		if err := claimVersion(ctx, store, s.projection, coll, bin); err != nil {
			return err
		}
		r, err := build(ctx, coll)
		if err != nil {
			return err
		}
		past := s.Stats()
		s.past.Store(&past)
		s.cur.Store(r)
		rctx, cancel := context.WithCancel(ctx)
		switched := make(chan string, 1)
		if follow {
			go func() {
				t := time.NewTicker(followInterval)
				defer t.Stop()
				for {
					select {
					case <-rctx.Done():
						return
					case <-t.C:
					}
					if now, err := store.ActiveCollection(rctx, s.name, s.projection.Definition.Collection()); err == nil && now != coll {
						switched <- now
						cancel()
						return
					}
				}
			}()
		}
		err = r.Run(rctx)
		cancel()
		select {
		case to := <-switched:
			// A segment's last store refused under a rebuild's lease left
			// held is stored by the run that follows.
			if ctx.Err() == nil && (err == nil || errors.Is(err, errUnderAnotherLease)) {
				logger.Info("readers switched to a rebuilt collection: following it", "projection", s.name, "from", coll, "to", to)
				continue
			}
		default:
		}
		return err
	}
}

// addCounts returns the sum of two counts by name (nil when both are
// empty); a is not changed.
func addCounts(a, b map[string]uint64) map[string]uint64 {
	if len(b) == 0 {
		return a
	}
	out := maps.Clone(a)
	if out == nil {
		out = make(map[string]uint64, len(b))
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}
