package mongostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/retry"
)

// A projection run in segments keeps a checkpoint a segment. A wait for
// read-your-writes given the collection waits for the lowest of them (a
// segment without one counting from the collection's own, where it was
// before it was split), without the caller knowing the segment count or
// hashing the document id; given a segment's name, for that one alone.
func TestWaitForPosition_on_a_segmented_projection_waits_for_its_lowest_segment(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Database(t)
	s := mongostore.New(db)
	const coll = "crew_schedules"
	save := func(name string, pos uint64) {
		t.Helper()
		if err := s.SaveCheckpoint(ctx, name, projector.Checkpoint{Position: pos, Prepare: pos}); err != nil {
			t.Fatal(err)
		}
	}
	short := retry.Policy{InitialDelay: time.Millisecond, Multiplier: 2, MaxDelay: 5 * time.Millisecond, MaxRetries: 3}
	wait := func(name string, pos uint64) error {
		return projector.WaitForPosition(ctx, s, name, pos, short)
	}

	save(coll, 100) // before it was split
	if err := wait(coll, 100); err != nil {
		t.Fatalf("unsplit, at its checkpoint: %v", err)
	}
	if n, err := segment.Record(ctx, db, coll, coll, 3); err != nil || n != 3 {
		t.Fatalf("recording 3 segments: %d, %v", n, err)
	}
	save(segment.CheckpointName(coll, 0, 3), 500)
	save(segment.CheckpointName(coll, 1, 3), 300)

	// Segment 2 has no checkpoint of its own yet: it is where the
	// collection was, 100.
	if cp, err := s.Reached(ctx, coll); err != nil || cp == nil || cp.Position != 100 {
		t.Fatalf("Reached with segment 2 at the collection's checkpoint: %v, %v; want 100", cp, err)
	}
	if err := wait(coll, 300); !errors.Is(err, projector.ErrNotYet) {
		t.Fatalf("wait for 300 while segment 2 is at 100: %v; want ErrNotYet", err)
	}
	if err := wait(segment.CheckpointName(coll, 0, 3), 500); err != nil {
		t.Fatalf("wait on segment 0's own checkpoint: %v", err)
	}

	save(segment.CheckpointName(coll, 2, 3), 400)
	if cp, err := s.Reached(ctx, coll); err != nil || cp == nil || cp.Position != 300 {
		t.Fatalf("Reached: %v, %v; want 300, the lowest of 500, 300 and 400", cp, err)
	}
	if err := wait(coll, 300); err != nil {
		t.Fatalf("wait for 300 with every segment at 300 or past it: %v", err)
	}
	err := wait(coll, 301)
	if !errors.Is(err, projector.ErrNotYet) {
		t.Fatalf("wait for 301 while segment 1 is at 300: %v; want ErrNotYet", err)
	}
	t.Logf("the error: %v", err)

	// A collection never split, and one with no checkpoint at all.
	save("rooms", 7)
	if cp, err := s.Reached(ctx, "rooms"); err != nil || cp == nil || cp.Position != 7 {
		t.Fatalf("Reached of a collection not split: %v, %v; want 7", cp, err)
	}
	if cp, err := s.Reached(ctx, "nothing_yet"); err != nil || cp != nil {
		t.Fatalf("Reached of a collection with no checkpoint: %v, %v; want nil", cp, err)
	}
}
