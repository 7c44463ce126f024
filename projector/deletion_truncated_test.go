package projector_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// A soft delete's record handled once the stream has been written again
// and then truncated past the first revision written again ($maxCount,
// $maxAge, $tb): where the stream starts now says nothing of which
// incarnation the document's revision is from. Whether the record comes
// late (the document holds revisions written again) or in the log's order
// (the document is the old incarnation's), it marks or removes nothing, and
// the stream's later events leave the fold of the events written again.
// Before, the late record marked the live document deleted, or removed it
// and the later events were applied on the zero state.
func TestDeletion_a_record_of_a_stream_written_again_and_truncated_marks_nothing(t *testing.T) {
	for _, policy := range []projector.DeletionPolicy{projector.MarkDeleted, projector.RemoveDocument} {
		for _, late := range []bool{true, false} {
			name := policy.String() + "/in_order"
			if late {
				name = policy.String() + "/late"
			}
			t.Run(name, func(t *testing.T) {
				s := newStore(t)
				reader := &firstRevisions{}
				e := holeEngine(t, s, reader, projector.Skip, cart.NewDetailsProjection().OnDelete(policy))
				log := projectortest.NewLog(cart.Registry())
				ctx := context.Background()
				old := log.MustAppend(t, cart.StreamID("w"), cart.ShoppingCartOpened{ShoppingCartID: "w", ClientID: "x", OpenedAt: t0}, add("w", "p", 1))
				// Written again from revision 2 (revisions 2 to 5).
				again := log.MustAppend(t, cart.StreamID("w"), cart.ShoppingCartOpened{ShoppingCartID: "w", ClientID: "y", OpenedAt: t0},
					add("w", "q", 2), add("w", "r", 3), add("w", "s", 4))
				record := projector.Event{ID: "m-w", Type: "$metadata", StreamID: "$$" + cart.StreamID("w"), Position: old[1].Position + 1,
					Data: []byte(`{"$tb":9223372036854775807}`), Created: t0}
				reader.set(cart.StreamID("w"), 4) // truncated since: it starts at 4 now
				before := old
				if late {
					// Another worker, or the run before a crash, applied
					// revisions 2 and 3 of the stream written again.
					before = append(append([]projector.Event{}, old...), again[:2]...)
				}
				for _, ev := range before {
					if _, err := e.Handle(ctx, ev); err != nil {
						t.Fatal(err)
					}
				}
				if rs, err := e.Handle(ctx, record); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Duplicate {
					t.Errorf("the record: %+v %v, want a duplicate: the stream was written again", rs, err)
				}
				var doc bson.M
				err := s.Database().Collection(cart.DetailsName).FindOne(ctx, bson.D{{Key: "_id", Value: "w"}}).Decode(&doc)
				switch {
				case err != nil:
					t.Errorf("the document is gone: %v", err)
				case doc["_deleted"] == true:
					t.Errorf("the document is marked deleted: %v", doc)
				}
				for _, ev := range again[len(before)-len(old):] {
					if _, err := e.Handle(ctx, ev); err != nil {
						t.Logf("%s@%d: %v", ev.StreamID, ev.StreamRevision, err)
					}
				}
				if late {
					if err := checkState(ctx, s, cart.StreamID("w"), again); err != nil {
						t.Errorf("after the stream's later events: %v", err)
					}
				}
			})
		}
	}
}
