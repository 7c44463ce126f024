package app

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// segmentStatus is one segment of a projection run in segments, in status.
type segmentStatus struct {
	Segment int `json:"segment"`
	// Holder is the process that holds the segment's lease, until Until;
	// empty when none does.
	Holder string    `json:"holder,omitempty"`
	Until  time.Time `json:"until,omitzero"`
	// Checkpoint is the segment's stored position (the collection's own,
	// from before it was segmented, until the segment stores one); nil
	// before the first store.
	Checkpoint *uint64 `json:"checkpoint"`
	// Behind counts the events the projection reads after the checkpoint,
	// as projectionStatus.Behind; nil without --esdb.
	Behind        *int `json:"behind,omitempty"`
	BehindAtLeast bool `json:"behindAtLeast,omitempty"`
	// Events counts the events of the segment's documents its checkpoint
	// has passed (applied, parked or skipped), each once however many of
	// its processes were killed, since the segment started from the
	// collection's own checkpoint (mongostore.CheckpointStatus.Events).
	Events uint64 `json:"events"`
}

// rebuildCheckpoint is where the rebuild into building stands: its own
// checkpoint, or for a rebuild in segments (rebuild --segments) the lowest
// of its segments' (a segment without one counts from the collection's
// own); nil before the first store. The error is the one it stopped with,
// a segment's for a rebuild in segments ("" when it has not stopped, or
// has stored a checkpoint since: see stoppedWith).
func rebuildCheckpoint(ctx context.Context, store *mongostore.Store, stored map[string]mongostore.CheckpointStatus, building string) (*uint64, string, error) {
	own := stored[building].Checkpoint
	n, err := segment.Count(ctx, store.Database(), building)
	if err != nil || n <= 1 {
		if own == nil {
			return nil, stoppedWith(stored[building]), err
		}
		return &own.Position, stoppedWith(stored[building]), err
	}
	// Its runners record their errors under the building collection's
	// name, and store their checkpoints under the segments': a checkpoint
	// of any segment stored after the error says it runs again.
	rec := stored[building]
	for k := range n {
		if u := stored[segment.CheckpointName(building, k, n)].Updated; u.After(rec.Updated) {
			rec.Updated = u
		}
	}
	lastError := stoppedWith(rec)
	low := segment.Lowest(building, n, own, func(name string) *projector.Checkpoint { return stored[name].Checkpoint })
	if low == nil {
		return nil, lastError, nil
	}
	return &low.Position, lastError, nil
}

// segmentsOf fills in st.Segments for a projection whose collection is
// split into segments (run --segments) and returns the checkpoint its lag
// is counted from: the lowest of its segments' (the collection's own for a
// projection not split).
func (c *statusConfig) segmentsOf(ctx context.Context, store *mongostore.Store, client eventStore, end *uint64,
	leases map[string]mongostore.Lease, stored map[string]mongostore.CheckpointStatus, p Projection, st *projectionStatus) (mongostore.CheckpointStatus, error) {
	own := stored[st.Collection]
	n, err := segment.Count(ctx, store.Database(), st.Collection)
	if err != nil || n <= 1 {
		return own, err
	}
	for k := range n {
		seg := segmentStatus{Segment: k}
		if l := leases[segment.LeaseName(st.Projection, k, n)]; l.Held(time.Now()) {
			seg.Holder, seg.Until = l.Holder, l.Expires
		}
		cp := stored[segment.CheckpointName(st.Collection, k, n)]
		seg.Events = cp.Events
		if cp.Checkpoint == nil {
			cp = own
		}
		if cp.Checkpoint != nil {
			seg.Checkpoint = &cp.Checkpoint.Position
		}
		if end != nil {
			if err := c.segmentBehind(ctx, client, *end, cp.Checkpoint, p.Reads, &seg); err != nil {
				return own, err
			}
		}
		st.Segments = append(st.Segments, seg)
	}
	// The record of the lowest checkpoint: when it was stored.
	updated := map[*projector.Checkpoint]time.Time{own.Checkpoint: own.Updated}
	low := own
	low.Checkpoint = segment.Lowest(st.Collection, n, own.Checkpoint, func(name string) *projector.Checkpoint {
		cp := stored[name]
		updated[cp.Checkpoint] = cp.Updated
		return cp.Checkpoint
	})
	low.Updated = time.Time{}
	st.Checkpoint, st.Updated = nil, time.Time{}
	if low.Checkpoint != nil {
		low.Updated = updated[low.Checkpoint]
		st.Checkpoint, st.Updated = &low.Checkpoint.Position, low.Updated
	}
	return low, nil
}

// segmentBehind counts the events after a segment's checkpoint cp.
func (c *statusConfig) segmentBehind(ctx context.Context, client eventStore, end uint64, cp *projector.Checkpoint, reads Filter, seg *segmentStatus) error {
	behind, more := 0, false
	var err error
	lctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch {
	case cp == nil:
		behind, more, err = countAfter(lctx, client, nil, 0, reads)
	case cp.Position <= end:
		// At end's commit position, it may be inside the last append.
		behind, more, err = countAfter(lctx, client, &cp.Position, cp.Prepare, reads)
	}
	if err != nil {
		return fmt.Errorf("counting the events after segment %d's checkpoint: %w", seg.Segment, err)
	}
	seg.Behind, seg.BehindAtLeast = &behind, more
	return nil
}

// printSegments prints, under the table, the segments of each projection
// run in segments: who runs each, its checkpoint and how far behind it is.
func printSegments(w io.Writer, lines []projectionStatus) error {
	for _, s := range lines {
		if len(s.Segments) == 0 {
			continue
		}
		holders := map[string]bool{}
		for _, seg := range s.Segments {
			if seg.Holder != "" {
				holders[seg.Holder] = true
			}
		}
		procs := fmt.Sprintf("%d processes", len(holders))
		if len(holders) == 1 {
			procs = "1 process"
		}
		fmt.Fprintf(w, "\n%s runs in %d segments, %d of them held by %s:\n", s.Projection, len(s.Segments), heldCount(s.Segments), procs)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEGMENT\tCHECKPOINT\tEVENTS PASSED\tBEHIND (EVENTS)\tRUN BY")
		for _, seg := range s.Segments {
			runBy := "-"
			if seg.Holder != "" {
				runBy = fmt.Sprintf("%s until %s", seg.Holder, optT(seg.Until))
			}
			behind := behindText(projectionStatus{Behind: seg.Behind, BehindAtLeast: seg.BehindAtLeast})
			fmt.Fprintf(tw, "%d of %d\t%s\t%d\t%s\t%s\n", seg.Segment, len(s.Segments), optU(seg.Checkpoint, "none"), seg.Events, behind, runBy)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// heldCount is how many of segs have a holder.
func heldCount(segs []segmentStatus) int {
	n := 0
	for _, s := range segs {
		if s.Holder != "" {
			n++
		}
	}
	return n
}
