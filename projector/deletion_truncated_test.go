package projector_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/subscription"
)

// A soft-deleted cart stream written again, on the protocol test server,
// with the engine reading the server's streams: the record of the deletion
// comes in the log's order, or late (after events of the stream written
// again that another worker, or the run before a restart, applied), and the
// stream written again is then truncated ($maxCount), or all its events
// expire ($maxAge). A late record marks or removes nothing: the document
// holds events written after it (the node keeps where the stream starts
// again as the $tb of its metadata). A record in order applies the policy,
// as it did live, whatever the stream holds by the time it is handled: under
// RemoveDocument the events written again then fold on nothing. Before, a
// late record marked or removed the live document once the stream written
// again was truncated, and for a time a record in order removed nothing in
// a catch-up, which a live run had removed.
func TestDeletion_a_record_of_a_stream_written_again_on_a_node(t *testing.T) {
	type deletedCase struct {
		name   string
		late   bool
		policy projector.DeletionPolicy
		// truncate is the metadata a user sets on the stream written again;
		// age, how far the server's clock moves on after it.
		truncate func(*kurrentdb.StreamMetadata)
		age      time.Duration
		// batched: handled by HandleBatch, as a catch-up does.
		batched bool
	}
	// A user who sets metadata keeps the $tb the node set, or not.
	maxCount := func(m *kurrentdb.StreamMetadata) { m.SetTruncateBefore(2); m.SetMaxCount(2) }
	maxAge := func(m *kurrentdb.StreamMetadata) { m.SetTruncateBefore(2); m.SetMaxAge(time.Minute) }
	noTB := func(m *kurrentdb.StreamMetadata) { m.AddCustomProperty("owner", "ops") }
	var cases []deletedCase
	for _, policy := range []projector.DeletionPolicy{projector.MarkDeleted, projector.RemoveDocument} {
		cases = append(cases,
			deletedCase{"in_order", false, policy, nil, 0, false},
			deletedCase{"in_order_batched", false, policy, nil, 0, true},
			deletedCase{"in_order_then_truncated", false, policy, maxCount, 0, false},
			deletedCase{"late_then_truncated", true, policy, maxCount, 0, false},
			deletedCase{"late_then_all_expired", true, policy, maxAge, time.Hour, false},
		)
	}
	// Metadata without the node's $tb shows the events before the deletion
	// again: the record in order still applies. (Removed, the document's
	// events written again would then wait for those: the README's table
	// of cases says so.)
	cases = append(cases, deletedCase{"in_order_then_metadata_without_tb", false, projector.MarkDeleted, noTB, 0, false})
	for _, tc := range cases {
		t.Run(tc.policy.String()+"/"+tc.name, func(t *testing.T) {
			ctx := context.Background()
			var clock atomic.Int64
			server := esdbtest.NewWith(t, esdbtest.Options{Now: func() time.Time { return time.Now().Add(time.Duration(clock.Load())) }})
			client := dialESDB(t, server)
			log := projectortest.NewLog(cart.Registry())
			stream := cart.StreamID("w")
			write := func(payloads ...any) []projector.Event { return appendCart(t, client, log, stream, payloads...) }
			old := write(cart.ShoppingCartOpened{ShoppingCartID: "w", ClientID: "x", OpenedAt: t0}, add("w", "p", 1))
			if _, err := server.Client(t).DeleteStream(ctx, stream, kurrentdb.DeleteStreamOptions{}); err != nil {
				t.Fatal(err)
			}
			record := projector.Event{ID: "m-w", Type: "$metadata", StreamID: "$$" + stream, Position: old[1].Position + 1,
				Data: []byte(fmt.Sprintf(`{"$tb":%d}`, int64(math.MaxInt64))), Created: t0}
			// Written again from revision 2: in order, the stream going on
			// (2 and 3); late, opened anew (2 to 5), and a worker applied
			// 2 and 3 before the record.
			var again []projector.Event
			if tc.late {
				again = write(cart.ShoppingCartOpened{ShoppingCartID: "w", ClientID: "y", OpenedAt: t0}, add("w", "q", 2), add("w", "r", 3), add("w", "s", 4))
			} else {
				again = write(add("w", "q", 2), add("w", "r", 3))
			}
			if tc.truncate != nil {
				var m kurrentdb.StreamMetadata
				tc.truncate(&m)
				if _, err := server.Client(t).SetStreamMetadata(ctx, stream, kurrentdb.AppendToStreamOptions{}, m); err != nil {
					t.Fatal(err)
				}
			}
			clock.Add(int64(tc.age))
			s := newStore(t)
			e := holeEngine(t, s, client, projector.Skip, cart.NewDetailsProjection().OnDelete(tc.policy))
			order := append(append(append([]projector.Event{}, old...), record), again...)
			if tc.late {
				order = append(append(append(append([]projector.Event{}, old...), again[:2]...), record), again[2:]...)
			}
			var onRecord []projector.Result
			if tc.batched {
				for i, rs := range e.HandleBatch(ctx, order) {
					if order[i].ID == record.ID {
						onRecord = rs
					}
				}
			}
			for _, ev := range order {
				if tc.batched {
					break
				}
				rs, err := e.Handle(ctx, ev)
				if err != nil {
					t.Fatalf("%s@%d: %+v %v", ev.StreamID, ev.StreamRevision, rs, err)
				}
				if ev.ID == record.ID {
					onRecord = rs
				}
			}
			var doc bson.M
			err := s.Database().Collection(cart.DetailsName).FindOne(ctx, bson.D{{Key: "_id", Value: "w"}}).Decode(&doc)
			if err != nil {
				t.Fatalf("the document is gone: %v", err)
			}
			if doc["_deleted"] == true {
				t.Errorf("the document is marked deleted, after events of the stream written again: %v", doc)
			}
			if tc.late {
				if len(onRecord) != 1 || onRecord[0].Outcome != projector.Duplicate {
					t.Errorf("the late record: %+v, want a duplicate: the document holds events written after it", onRecord)
				}
				if err := checkState(ctx, s, stream, again); err != nil {
					t.Error(err)
				}
				return
			}
			// A batch under MarkDeleted folds the document from its stream
			// past the record (the mark the events written again would
			// clear): the record finds it written since, and the document
			// ends as live, unmarked.
			if len(onRecord) != 1 || onRecord[0].Outcome != projector.Applied && !(tc.batched && tc.policy == projector.MarkDeleted && onRecord[0].Outcome == projector.Duplicate) {
				t.Errorf("the record in order: %+v, want the policy applied, as live", onRecord)
			}
			// Marked, the document keeps its state and the events written
			// again clear the mark; removed, they fold on nothing.
			want := old[:2:2]
			if tc.policy == projector.RemoveDocument {
				want = nil
			}
			var got cart.Details
			if _, _, err := projector.ReadDocument(ctx, s, cart.NewDetailsProjection(), "w", &got); err != nil {
				t.Fatal(err)
			}
			wantState, _ := cart.NewDetailsProjection().Fold(append(want, again...)...)
			if fmt.Sprint(got.ClientID, got.ProductItems) != fmt.Sprint(wantState.ClientID, wantState.ProductItems) {
				t.Errorf("document %+v, want %+v", got, wantState)
			}
		})
	}
}

// A soft delete's record of a stream tombstoned since, in the log's order:
// the policy applies (the node refuses a read of a tombstoned stream's
// metadata, which says nothing of where it starts again: it never does).
func TestDeletion_a_soft_delete_record_of_a_stream_tombstoned_since_applies(t *testing.T) {
	for _, policy := range []projector.DeletionPolicy{projector.MarkDeleted, projector.RemoveDocument} {
		t.Run(policy.String(), func(t *testing.T) {
			ctx := context.Background()
			server := esdbtest.New(t)
			client := dialESDB(t, server)
			stream := cart.StreamID("w")
			old := appendCart(t, client, projectortest.NewLog(cart.Registry()), stream,
				cart.ShoppingCartOpened{ShoppingCartID: "w", ClientID: "x", OpenedAt: t0}, add("w", "p", 1))
			if _, err := server.Client(t).DeleteStream(ctx, stream, kurrentdb.DeleteStreamOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := server.Client(t).TombstoneStream(ctx, stream, kurrentdb.TombstoneStreamOptions{}); err != nil {
				t.Fatal(err)
			}
			record := projector.Event{ID: "m-w", Type: "$metadata", StreamID: "$$" + stream, Position: old[1].Position + 1,
				Data: []byte(fmt.Sprintf(`{"$tb":%d}`, int64(math.MaxInt64))), Created: t0}
			e := holeEngine(t, newStore(t), client, projector.Block, cart.NewDetailsProjection().OnDelete(policy))
			for _, ev := range old {
				if rs, err := e.Handle(ctx, ev); err != nil {
					t.Fatalf("%+v %v", rs, err)
				}
			}
			if rs, err := e.Handle(ctx, record); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Applied {
				t.Errorf("the soft delete's record: %+v %v, want the policy applied", rs, err)
			}
		})
	}
}

// appendCart appends payloads to stream in log and, as they are, to the
// server client writes to: the events log gives have the server's
// revisions.
func appendCart(t *testing.T, client *subscription.Client, log *projectortest.Log, stream string, payloads ...any) []projector.Event {
	t.Helper()
	evs := log.MustAppend(t, stream, payloads...)
	for _, ev := range evs {
		name, data, err := cart.Registry().Encode(ev.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (appender{client}).Append(context.Background(), stream, sourcetest.AnyRevision, sourcetest.Event{ID: uuid.New(), Type: name, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

// failingMetadata is a node's stream history whose reads of metadata
// streams fail as a transient error does (the connection closing).
type failingMetadata struct{ projector.StreamHistory }

var errTransient = errors.New("rpc error: code = Unavailable desc = transport is closing")

func (f failingMetadata) ReadStream(ctx context.Context, stream string, from uint64, each func(projector.Event) error) error {
	if strings.HasPrefix(stream, "$$") {
		return errTransient
	}
	return f.StreamHistory.ReadStream(ctx, stream, from, each)
}

// A late record of a stream written again and truncated ($maxCount, the
// node's $tb kept), while the read of the stream's metadata, which tells
// it is late, fails for a moment: the record fails, to be tried again, and
// the document, which holds events written after the deletion, stays as it
// is. Before, the engine took a failed read for metadata without $tb and
// the record removed or marked the live document.
func TestDeletion_a_late_record_is_not_applied_when_the_metadata_read_fails(t *testing.T) {
	for _, policy := range []projector.DeletionPolicy{projector.MarkDeleted, projector.RemoveDocument} {
		t.Run(policy.String(), func(t *testing.T) {
			ctx := context.Background()
			server := esdbtest.New(t)
			client := dialESDB(t, server)
			log := projectortest.NewLog(cart.Registry())
			stream := cart.StreamID("w")
			old := appendCart(t, client, log, stream, cart.ShoppingCartOpened{ShoppingCartID: "w", ClientID: "x", OpenedAt: t0}, add("w", "p", 1))
			if _, err := server.Client(t).DeleteStream(ctx, stream, kurrentdb.DeleteStreamOptions{}); err != nil {
				t.Fatal(err)
			}
			record := projector.Event{ID: "m-w", Type: "$metadata", StreamID: "$$" + stream, Position: old[1].Position + 1,
				Data: []byte(fmt.Sprintf(`{"$tb":%d}`, int64(math.MaxInt64))), Created: t0}
			// Written again from revision 2 (2 to 5), truncated to its last
			// two: the document, at 3, is before the stream's first
			// revision, so only the $tb of the metadata tells.
			again := appendCart(t, client, log, stream, cart.ShoppingCartOpened{ShoppingCartID: "w", ClientID: "y", OpenedAt: t0}, add("w", "q", 2), add("w", "r", 3), add("w", "s", 4))
			var m kurrentdb.StreamMetadata
			m.SetTruncateBefore(2)
			m.SetMaxCount(2)
			if _, err := server.Client(t).SetStreamMetadata(ctx, stream, kurrentdb.AppendToStreamOptions{}, m); err != nil {
				t.Fatal(err)
			}
			s := newStore(t)
			e := holeEngine(t, s, failingMetadata{client}, projector.Skip, cart.NewDetailsProjection().OnDelete(policy))
			for _, ev := range append(append([]projector.Event{}, old...), again[:2]...) {
				if rs, err := e.Handle(ctx, ev); err != nil {
					t.Fatalf("%+v %v", rs, err)
				}
			}
			rs, _ := e.Handle(ctx, record)
			if len(rs) != 1 || rs[0].Outcome != projector.Failed || !errors.Is(rs[0].Err, errTransient) {
				t.Errorf("the late record, the metadata read failing: %+v, want it failed with the read's error, to be tried again", rs)
			}
			if err := checkState(ctx, s, stream, again[:2]); err != nil {
				t.Error(err)
			}
		})
	}
}
