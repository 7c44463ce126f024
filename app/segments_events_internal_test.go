package app

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// idsIn returns n document ids of segment k of 2.
func idsIn(k, n int) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		if id := fmt.Sprintf("doc-%d", i); segment.Of(id, 2) == k {
			ids = append(ids, id)
		}
	}
	return ids
}

// A segment's count of events is stored with its checkpoint, under its
// lease: A takes events 10 to 100 of segment 0 (and is asked about some
// twice, as the runner may), stores its checkpoint at 50, and is killed.
// B takes the segment over, meets the events after 50 again, and stores
// 100: the segment has counted each of its events once. A, woken up
// late, is refused (fenced), and the count stays.
func TestSegmentCheckpoints_count_each_event_once_across_a_killed_holder(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Database(t)
	store := mongostore.New(db)
	var log bytes.Buffer
	name := segment.LeaseName("p", 0, 2)
	cpName := segment.CheckpointName("coll", 0, 2)
	mine, others := idsIn(0, 2), idsIn(1, 1)

	// The log: at 10, 20, ..., 100 an event of segment 0's documents, and
	// between them one of segment 1's, which A does not hold.
	type ev struct {
		id string
		at projector.Checkpoint
	}
	var log0 []ev
	for i := 1; i <= 10; i++ {
		log0 = append(log0, ev{mine[i%2], projector.Checkpoint{Position: uint64(10 * i)}},
			ev{others[0], projector.Checkpoint{Position: uint64(10*i + 5)}})
	}
	deliver := func(c *segmentCheckpoints, from, to uint64) (needed int) {
		for _, e := range log0 {
			if e.at.Position <= from || e.at.Position > to {
				continue
			}
			if c.NeedsEvent(e.id, e.at) {
				needed++
			}
			c.NeedsEvent(e.id, e.at) // asked again: counted once
		}
		return needed
	}

	a := checkpointsOf(segmentsOf(store, "A", 2, &log), map[int]*heldLease{0: unrenewed(t, store, name, "A", time.Minute)})
	if cp, err := a.LoadCheckpoint(ctx, "coll"); err != nil || cp != nil {
		t.Fatalf("A's load: %v %v", cp, err)
	}
	if n := deliver(a, 0, 100); n != 10 {
		t.Fatalf("A needs %d events of segment 0, want 10", n)
	}
	// A stores 50 (its events 10 to 50), and is killed before it stores
	// more: the events 60 to 100 it took (and may have applied) are not in
	// the count.
	if err := a.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 50}); err != nil {
		t.Fatal(err)
	}
	if got := eventsOf(t, store, cpName); got != 5 {
		t.Fatalf("after A stored 50, segment 0 counts %d events, want 5", got)
	}

	// B takes segment 0 (A's lease expired: a newer token), resumes from 50
	// and meets 60 to 100 again; the runner starts its subscription again
	// once on the way, from 70, so that 80 comes twice.
	var bl mongostore.Lease
	if err := db.Collection("projector_leases").FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: name}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "holder", Value: "B"}, {Key: "expires", Value: time.Now().Add(time.Minute)}}},
			{Key: "$inc", Value: bson.D{{Key: "token", Value: int64(1)}}}}).Decode(&bl); err != nil {
		t.Fatal(err)
	}
	bl.Token++
	bl.Holder = "B"
	b := checkpointsOf(segmentsOf(store, "B", 2, &log), map[int]*heldLease{0: unrenewedLease(store, bl, time.Minute)})
	if cp, err := b.LoadCheckpoint(ctx, "coll"); err != nil || cp == nil || cp.Position != 50 {
		t.Fatalf("B's load: %v %v", cp, err)
	}
	if n := deliver(b, 50, 80); n != 3 {
		t.Fatalf("B needs %d events up to 80, want 3", n)
	}
	if err := b.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 75}); err != nil {
		t.Fatal(err)
	}
	if n := deliver(b, 70, 100); n != 3 {
		t.Fatalf("B, its subscription started again from 70, needs %d more events, want 3 (80 again, 90 and 100)", n)
	}
	if err := b.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 100}); err != nil {
		t.Fatal(err)
	}
	if got := eventsOf(t, store, cpName); got != 10 {
		t.Errorf("after B stored 100, segment 0 counts %d events, want 10 (each of its events once)", got)
	}

	// A wakes up and stores 100 with its own count: refused, and the
	// count stays.
	if err := a.save(ctx, "coll", 0, projector.Checkpoint{Position: 100}); err != nil {
		t.Fatal(err)
	}
	if !a.held[0].isLost() {
		t.Errorf("A's save at 100 was not refused: its lease is not marked lost")
	}
	if got := eventsOf(t, store, cpName); got != 10 {
		t.Errorf("after A's late save, segment 0 counts %d events, want 10", got)
	}
	// The count is what status shows.
	st, err := store.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st[cpName].Events != 10 {
		t.Errorf("status would show %d events for segment 0, want 10", st[cpName].Events)
	}
}

// eventsOf reads the count stored with checkpoint name.
func eventsOf(t *testing.T, store *mongostore.Store, name string) uint64 {
	t.Helper()
	all, err := store.Checkpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return all[name].Events
}
