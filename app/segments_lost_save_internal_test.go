package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// A segment whose lease is lost has its events passed over at once by
// NeedsEvent (they are not applied); the run's later checkpoints are not
// stored under that segment either, also where the fence would let them
// (the lease expired and nobody took it yet, or another process took it
// and its run has not claimed the checkpoint yet): whoever runs the
// segment next resumes before the events passed over.
func TestSegments_a_lost_segments_checkpoint_does_not_move_past_the_events_it_passed_over(t *testing.T) {
	for _, takenByB := range []bool{false, true} {
		t.Run(fmt.Sprintf("taken_by_another=%v", takenByB), func(t *testing.T) {
			ctx := context.Background()
			db := mongotest.Database(t)
			store := mongostore.New(db)
			var log bytes.Buffer
			g := segmentsOf(store, "A", 2, &log)
			name := segment.LeaseName("p", 0, 2)
			h := unrenewed(t, store, name, "A", time.Minute)
			if err := store.SaveCheckpoint(ctx, segment.CheckpointName("coll", 0, 2), projector.Checkpoint{Position: 100}); err != nil {
				t.Fatal(err)
			}
			c := checkpointsOf(g, map[int]*heldLease{0: h})
			if cp, err := c.LoadCheckpoint(ctx, "coll"); err != nil || cp == nil || cp.Position != 100 {
				t.Fatalf("load: %v %v", cp, err)
			}
			id := ""
			for i := 0; ; i++ {
				if id = fmt.Sprintf("doc-%d", i); segment.Of(id, 2) == 0 {
					break
				}
			}
			var bl mongostore.Lease
			if takenByB {
				// B takes segment 0 (as after A's lease expired): a newer token.
				if err := db.Collection("projector_leases").FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: name}},
					bson.D{{Key: "$set", Value: bson.D{{Key: "holder", Value: "B"}, {Key: "expires", Value: time.Now().Add(time.Minute)}}},
						{Key: "$inc", Value: bson.D{{Key: "token", Value: int64(1)}}}}).Decode(&bl); err != nil {
					t.Fatal(err)
				}
				bl.Token++
				bl.Holder = "B"
				h.markLost(mongostore.ErrLeaseLost) // A's renewal finds it
			} else {
				h.markLost(errors.New("could not renew the lease before it expired"))
			}
			applied := c.NeedsEvent(id, projector.Checkpoint{Position: 150})
			// A's run reaches 200 and stores it (periodically, or as it stops).
			if err := c.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 200}); err != nil {
				t.Fatal(err)
			}
			cp, err := store.LoadCheckpoint(ctx, segment.CheckpointName("coll", 0, 2))
			if err != nil {
				t.Fatal(err)
			}
			resume := cp.Position
			if takenByB {
				gb := segmentsOf(store, "B", 2, &log)
				cb := checkpointsOf(gb, map[int]*heldLease{0: unrenewedLease(store, bl, time.Minute)})
				from, err := cb.LoadCheckpoint(ctx, "coll")
				if err != nil {
					t.Fatal(err)
				}
				resume = from.Position
			}
			if !applied && resume > 150 {
				t.Errorf("segment 0's event at 150 (document %s) was passed over by A (NeedsEvent false: its lease is lost), "+
					"yet segment 0 resumes at %d: the next run of segment 0 never applies it", id, resume)
			}
		})
	}
}

// A segment's checkpoint left under a rebuild's lease (the rebuild
// stopped between its switch and the release of its leases) is not
// stored by the run that holds the segment until that lease expires: the
// save says so, and is not taken as stored (a runner under a HandledIDs
// window reads no further than the window past the checkpoint stored).
// The load goes on from the checkpoint meanwhile; once the lease has
// expired, the save stores it.
func TestSegments_a_checkpoint_under_a_rebuilds_lease_is_not_said_stored_until_it_is(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Database(t)
	store := mongostore.New(db)
	const ttl = 3 * time.Second
	rl, err := store.AcquireLease(ctx, segment.LeaseName(rebuildGroup("coll"), 0, 2), "rebuild host/9/dead", ttl)
	if err != nil {
		t.Fatal(err)
	}
	name := segment.CheckpointName("coll", 0, 2)
	if err := store.SaveCheckpointUnder(ctx, name, projector.Checkpoint{Position: 50}, rl, 0); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	g := segmentsOf(store, "A", 2, &log)
	c := checkpointsOf(g, map[int]*heldLease{0: unrenewed(t, store, segment.LeaseName("p", 0, 2), "A", time.Minute)})
	if cp, err := c.LoadCheckpoint(ctx, "coll"); err != nil || cp == nil || cp.Position != 50 {
		t.Fatalf("load under the rebuild's lease: %v, %v; want position 50 and no error", cp, err)
	}
	stored := func() uint64 {
		t.Helper()
		cp, err := store.LoadCheckpoint(ctx, name)
		if err != nil || cp == nil {
			t.Fatalf("segment 0's checkpoint: %v, %v", cp, err)
		}
		return cp.Position
	}
	err = c.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 60})
	if at := stored(); at == 50 && !errors.Is(err, errUnderAnotherLease) {
		t.Fatalf("a save refused under the rebuild's lease returned %v with the checkpoint still at 50: the runner takes it as stored", err)
	}
	if c.held[0].isLost() {
		t.Fatal("the segment was dropped: its own lease is valid")
	}
	deadline := time.Now().Add(ttl + 20*time.Second)
	for {
		err = c.SaveCheckpoint(ctx, "coll", projector.Checkpoint{Position: 70})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || stored() != 70 {
		t.Fatalf("after the rebuild's lease expired: save %v, checkpoint at %d; want nil and 70", err, stored())
	}
}
