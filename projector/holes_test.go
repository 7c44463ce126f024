package projector_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// firstRevisions is what an event store says of where its streams start
// (the engine's [projector.StreamReader]); a stream it does not name starts
// at 0, and one set to -1 is deleted.
type firstRevisions struct {
	mu    sync.Mutex
	first map[string]int64
	asked int
}

func (f *firstRevisions) set(stream string, first int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == nil {
		f.first = map[string]int64{}
	}
	f.first[stream] = first
}

func (f *firstRevisions) FirstRevision(_ context.Context, stream string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	first, ok := f.first[stream]
	switch {
	case !ok:
		return 0, nil
	case first < 0:
		return 0, projector.ErrStreamDeleted
	}
	return uint64(first), nil
}

func holeEngine(t *testing.T, s *mongostore.Store, reader projector.StreamReader, policy projector.FailurePolicy, defs ...projector.Definition) *projector.Engine {
	t.Helper()
	quick := retry.Default()
	quick.InitialDelay, quick.MaxRetries = 5*time.Millisecond, 3
	opts := []projector.Option{projector.WithRetry(quick), projector.WithFailurePolicy(policy), projector.WithParker(s)}
	if reader != nil {
		opts = append(opts, projector.WithStreamReader(reader))
	}
	if len(defs) == 0 {
		defs = []projector.Definition{cart.NewDetailsProjection()}
	}
	e, err := projector.NewEngine(s, cart.Registry(), defs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func add(id, product string, n int) cart.ProductItemAddedToShoppingCart {
	return cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: product, Quantity: n}}
}

// Events gone from their stream (truncated by $maxCount, $maxAge or $tb, and
// scavenged from $all) leave a hole between a document and the next event:
// at the first sight of a stream that starts above 0, or while a document is
// behind. The event store says where the stream starts now, so the gate
// does not wait out its retries: under block the event fails for good with
// an error naming the missing revisions; under skip and park it applies on
// the document as it is (the zero state when there is none), and park
// records the hole, which replay cannot apply. A late predecessor (the
// stream still has it) is waited for as before.
func TestHole_events_gone_from_their_stream_go_through_the_failure_policy(t *testing.T) {
	// Hold does as park: holding the document would be for ever, since no
	// fix brings the events back and a replay meets the same hole.
	for _, policy := range []projector.FailurePolicy{projector.Block, projector.Skip, projector.Park, projector.Hold} {
		t.Run(policy.String(), func(t *testing.T) {
			s := newStore(t)
			reader := &firstRevisions{}
			e := holeEngine(t, s, reader, policy)
			log := projectortest.NewLog(cart.Registry())
			ctx := context.Background()

			// First sight above 0: revisions 0 to 4 of stream a are gone.
			a := log.MustAppend(t, cart.StreamID("a"), cart.ShoppingCartOpened{ShoppingCartID: "a", ClientID: "x", OpenedAt: t0},
				add("a", "p1", 1), add("a", "p2", 1), add("a", "p3", 1), add("a", "p4", 1), add("a", "p5", 2), add("a", "p6", 3))
			reader.set(cart.StreamID("a"), 5)
			// Behind: b's document is at 1, revisions 2 to 3 are gone.
			b := log.MustAppend(t, cart.StreamID("b"), cart.ShoppingCartOpened{ShoppingCartID: "b", ClientID: "y", OpenedAt: t0},
				add("b", "q1", 1), add("b", "q2", 1), add("b", "q3", 1), add("b", "q4", 4))
			for _, ev := range b[:2] {
				if r := handle(t, e, ev)[0]; r.Outcome != projector.Applied {
					t.Fatalf("b@%d: %v %v", ev.StreamRevision, r.Outcome, r.Err)
				}
			}
			reader.set(cart.StreamID("b"), 4)

			for _, c := range []struct {
				ev       projector.Event
				gone     string
				fold     []projector.Event // the document after it, under skip and park
				afterAll []projector.Event // and after the rest of the stream
			}{
				{a[5], `revisions 0 to 4 of stream "shopping_cart-a"`, a[5:6], a[5:]},
				{b[4], `revisions 2 to 3 of stream "shopping_cart-b"`, append(b[:2:2], b[4]), append(b[:2:2], b[4])},
			} {
				r := handle(t, e, c.ev)[0]
				if policy == projector.Block {
					var perr *projector.Error
					if r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrRevisionsGone) || !strings.Contains(r.Err.Error(), c.gone) ||
						!errors.As(r.Err, &perr) || perr.Retryable() {
						t.Fatalf("%s@%d: %v %v, want a permanent failure naming %s", c.ev.StreamID, c.ev.StreamRevision, r.Outcome, r.Err, c.gone)
					}
					continue
				}
				if r.Outcome != projector.Applied {
					t.Fatalf("%s@%d: %v %v, want applied past the hole", c.ev.StreamID, c.ev.StreamRevision, r.Outcome, r.Err)
				}
				if err := checkState(ctx, s, c.ev.StreamID, c.fold); err != nil {
					t.Fatal(err)
				}
			}
			if policy == projector.Block {
				// Nothing was written past the hole.
				if found, _, _ := projector.ReadDocument(ctx, s, cart.NewDetailsProjection(), "a", new(cart.Details)); found {
					t.Fatal("a document was written for a stream whose start is gone, under block")
				}
				return
			}
			if r := handle(t, e, a[6])[0]; r.Outcome != projector.Applied {
				t.Fatalf("a@6 after the hole: %v %v", r.Outcome, r.Err)
			}
			if err := checkState(ctx, s, cart.StreamID("a"), a[5:]); err != nil {
				t.Fatal(err)
			}
			parked, err := s.Parked(ctx, cart.DetailsName)
			if err != nil {
				t.Fatal(err)
			}
			if policy == projector.Skip {
				if len(parked) != 0 {
					t.Fatalf("parked under skip: %+v", parked)
				}
				return
			}
			if len(parked) != 2 {
				t.Fatalf("parked %+v, want the two holes", parked)
			}
			for _, pe := range parked {
				if pe.Type != projector.GoneType || !strings.Contains(pe.Error, "gone from their stream") || pe.Held {
					t.Errorf("hole record %+v", pe)
				}
				if r := e.Replay(ctx, pe); r.Outcome != projector.Failed || !strings.Contains(r.Err.Error(), "nothing to replay") {
					t.Errorf("replay of a hole: %v %v", r.Outcome, r.Err)
				}
			}
		})
	}
}

// checkState checks the cart document of stream against the fold of events,
// at the last one's revision.
func checkState(ctx context.Context, s *mongostore.Store, stream string, events []projector.Event) error {
	return projectortest.CheckDocument(ctx, s, cart.NewDetailsProjection(), strings.TrimPrefix(stream, cart.StreamPrefix), events)
}

// A predecessor the stream still holds is late, not gone: the gate waits
// for it, and applies the event once it has come.
func TestHole_a_late_predecessor_is_waited_for(t *testing.T) {
	s := newStore(t)
	reader := &firstRevisions{}
	e := holeEngine(t, s, reader, projector.Skip)
	patientEngine := newEngineWith(t, s, reader)
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("c"), cart.ShoppingCartOpened{ShoppingCartID: "c", ClientID: "x", OpenedAt: t0}, add("c", "p", 1))
	// Without its predecessor, the event waits out the retries and fails
	// (retryable): it is not skipped.
	if r := handle(t, e, evs[1])[0]; r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrPredecessorMissing) {
		t.Fatalf("late predecessor: %v %v", r.Outcome, r.Err)
	}
	done := make(chan projector.Result, 1)
	go func() { rs, _ := patientEngine.Handle(context.Background(), evs[1]); done <- rs[0] }()
	if r := handle(t, e, evs[0])[0]; r.Outcome != projector.Applied {
		t.Fatalf("creation: %v %v", r.Outcome, r.Err)
	}
	if r := <-done; r.Outcome != projector.Applied {
		t.Fatalf("after its predecessor came: %v %v", r.Outcome, r.Err)
	}
	if err := checkState(context.Background(), s, cart.StreamID("c"), evs); err != nil {
		t.Fatal(err)
	}
}

// An event after a hole whose step fails, under park, moves its document
// past both with the state as stored, not as the failing step left it: a
// handler may change the state's map in place before it fails.
func TestHole_a_failing_step_after_a_hole_moves_past_it_with_the_state_stored(t *testing.T) {
	s := newStore(t)
	reader := &firstRevisions{}
	quick := retry.Default()
	quick.InitialDelay, quick.MaxRetries = 5*time.Millisecond, 3
	e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{cardsInPlace()}, projector.WithRetry(quick),
		projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(reader))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(kanbanRegistry())
	evs := log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", Title: "t"}, CardMoved{CardID: "z", Column: "doing"},
		CardMoved{CardID: "z", Column: "gone"}, CardMoved{CardID: "z", Column: "bad"})
	reader.set(cardStreams+"z", 3) // revision 2 is gone from the stream
	for _, ev := range []projector.Event{evs[0], evs[1], evs[3]} {
		rs, err := e.Handle(context.Background(), ev)
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s@%d: %v %v", ev.Type, ev.StreamRevision, rs, err)
		}
		if want := map[bool]projector.Outcome{false: projector.Applied, true: projector.Parked}[ev.StreamRevision == 3]; rs[0].Outcome != want {
			t.Fatalf("%s@%d: %v %v, want %v", ev.Type, ev.StreamRevision, rs[0].Outcome, rs[0].Err, want)
		}
	}
	var got board
	if _, rev, err := projector.ReadDocument(context.Background(), s, cardsInPlace(), "z", &got); err != nil || rev != 3 {
		t.Fatalf("revision %d (%v), want 3", rev, err)
	}
	if want := (boardCard{Title: "t", Column: "doing", Moves: 1}); got.Cards["z"] != want {
		t.Errorf("card %+v, want %+v: the failed move's change was written", got.Cards["z"], want)
	}
}

func newEngineWith(t *testing.T, s *mongostore.Store, reader projector.StreamReader) *projector.Engine {
	t.Helper()
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(patient()), projector.WithStreamReader(reader))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A stream deleted and written again goes on from its old revision. A new
// creation event starts its document over (the old events are no longer
// the stream's): not a second creation, and Fold, over all of the stream's
// events, agrees. Without a reader the engine cannot
// tell, and refuses it as one.
func TestHole_a_stream_deleted_and_written_again_starts_its_document_over(t *testing.T) {
	for _, withReader := range []bool{true, false} {
		name := "with_reader"
		if !withReader {
			name = "without_reader"
		}
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			reader := &firstRevisions{}
			var r projector.StreamReader
			if withReader {
				r = reader
			}
			e := holeEngine(t, s, r, projector.Block)
			log := projectortest.NewLog(cart.Registry())
			old := log.MustAppend(t, cart.StreamID("d"), cart.ShoppingCartOpened{ShoppingCartID: "d", ClientID: "old", OpenedAt: t0}, add("d", "p", 1), add("d", "q", 2))
			for _, ev := range old {
				handle(t, e, ev)
			}
			reader.set(cart.StreamID("d"), 3) // deleted, then written again from revision 3
			again := log.MustAppend(t, cart.StreamID("d"), cart.ShoppingCartOpened{ShoppingCartID: "d", ClientID: "new", OpenedAt: t0}, add("d", "z", 5))
			res := handle(t, e, again[0])[0]
			if !withReader {
				if res.Outcome != projector.Failed || !errors.Is(res.Err, projector.ErrAlreadyCreated) {
					t.Fatalf("without a reader: %v %v, want a second creation refused", res.Outcome, res.Err)
				}
				return
			}
			if res.Outcome != projector.Applied {
				t.Fatalf("the new creation: %v %v", res.Outcome, res.Err)
			}
			if r := handle(t, e, again[1])[0]; r.Outcome != projector.Applied {
				t.Fatalf("the next event: %v %v", r.Outcome, r.Err)
			}
			var got cart.Details
			want, _ := cart.NewDetailsProjection().Fold(again...)
			found, rev, err := projector.ReadDocument(context.Background(), s, cart.NewDetailsProjection(), "d", &got)
			if err != nil || !found || rev != 4 || got.ClientID != "new" || len(got.ProductItems) != len(want.ProductItems) {
				t.Fatalf("document %+v at %d (%v), want the fold of the new events %+v at 4", got, rev, err, want)
			}
			// The test kit agrees, given all the stream's events: its
			// fold applies the new creation anew.
			if err := projectortest.CheckDocument(context.Background(), s, cart.NewDetailsProjection(), "d", append(old, again...)); err != nil {
				t.Fatalf("CheckDocument: %v", err)
			}
			// An old event delivered again is a duplicate.
			if r := handle(t, e, old[1])[0]; r.Outcome != projector.Duplicate {
				t.Fatalf("old event again: %v %v", r.Outcome, r.Err)
			}
		})
	}
}

// A node's records of a deleted stream (the tombstone's $streamDeleted event,
// at the largest revision, and the $metadata of "$$<stream>" that a soft
// delete writes) are never waited for as events of the stream. Under the
// revision gate the projection's deletion policy applies to the document:
// keep it, mark it deleted, or remove it; on the batch path too. Metadata
// that only truncates changes nothing. Old events of a removed document's
// deleted stream, delivered again, do not bring it back as a hole.
func TestDeletion_records_apply_the_projections_deletion_policy(t *testing.T) {
	tombstone := func(stream string) projector.Event {
		return projector.Event{ID: "t-" + stream, Type: "$streamDeleted", StreamID: stream, StreamRevision: math.MaxInt64, Position: 1000, Created: t0}
	}
	softDelete := func(stream string) projector.Event {
		return projector.Event{ID: "m-" + stream, Type: "$metadata", StreamID: "$$" + stream, StreamRevision: 0, Position: 1001,
			Data: []byte(`{"$tb":9223372036854775807}`), Created: t0}
	}
	truncate := projector.Event{ID: "m-trunc", Type: "$metadata", StreamID: "$$" + cart.StreamID("e"), Position: 1002, Data: []byte(`{"$maxCount":2}`), Created: t0}
	for _, policy := range []projector.DeletionPolicy{projector.KeepDocument, projector.MarkDeleted, projector.RemoveDocument} {
		for _, batched := range []bool{false, true} {
			name := policy.String()
			if batched {
				name += "_batched"
			}
			t.Run(name, func(t *testing.T) {
				s := newStore(t)
				reader := &firstRevisions{}
				summary := cart.NewClientSummaryProjection()
				e := holeEngine(t, s, reader, projector.Block, cart.NewDetailsProjection().OnDelete(policy), summary)
				log := projectortest.NewLog(cart.Registry())
				ctx := context.Background()
				meta := []byte(`{"clientId":"x"}`)
				var all []projector.Event
				for _, id := range []string{"e", "f"} {
					evs, err := log.AppendWithMetadata(cart.StreamID(id), meta, cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "x", OpenedAt: t0}, add(id, "p", 1))
					if err != nil {
						t.Fatal(err)
					}
					all = append(all, evs...)
				}
				records := []projector.Event{truncate, tombstone(cart.StreamID("e")), softDelete(cart.StreamID("f"))}
				reader.set(cart.StreamID("e"), -1)
				reader.set(cart.StreamID("f"), -1)
				if batched {
					for i, rs := range e.HandleBatch(ctx, append(append([]projector.Event{}, all...), records...)) {
						for _, r := range rs {
							if r.Outcome == projector.Failed {
								t.Fatalf("event %d: %v", i, r.Err)
							}
						}
					}
				} else {
					for _, ev := range append(append([]projector.Event{}, all...), records...) {
						if rs, err := e.Handle(ctx, ev); err != nil {
							t.Fatalf("%s of %s: %+v %v", ev.Type, ev.StreamID, rs, err)
						}
					}
				}
				for _, id := range []string{"e", "f"} {
					var got cart.Details
					found, _, err := projector.ReadDocument(ctx, s, cart.NewDetailsProjection(), id, &got)
					if err != nil {
						t.Fatal(err)
					}
					raw, rerr := s.Database().Collection(cart.DetailsName).FindOne(ctx, map[string]any{"_id": id}).Raw()
					marked, _ := raw.Lookup(mongostore.FieldDeleted).BooleanOK()
					marked = marked && rerr == nil
					switch policy {
					case projector.KeepDocument:
						if !found || marked || got.ClientID != "x" {
							t.Errorf("%s kept: found %v marked %v %+v", id, found, marked, got)
						}
					case projector.MarkDeleted:
						if !found || !marked || got.ClientID != "x" {
							t.Errorf("%s marked: found %v marked %v %+v", id, found, marked, got)
						}
					case projector.RemoveDocument:
						if found {
							t.Errorf("%s not removed: %+v", id, got)
						}
					}
				}
				// The summary (a revision map, fed by many streams) keeps its document.
				var sum cart.ClientSummary
				if found, _, err := projector.ReadDocument(ctx, s, summary, "x", &sum); err != nil || !found || sum.CartsOpened != 2 {
					t.Fatalf("summary %+v (%v)", sum, err)
				}
				// Old events of a deleted stream delivered again: nothing comes back wrong.
				rs, err := e.Handle(ctx, all[1])
				if err != nil {
					t.Fatalf("an old event of a deleted stream again: %+v %v", rs, err)
				}
				for _, r := range rs {
					if r.Outcome != projector.Duplicate {
						t.Errorf("an old event of a deleted stream again, in %s: %v %v", r.Projection, r.Outcome, r.Err)
					}
				}
			})
		}
	}
}

// The per-stream revision map finds the same holes, one stream at a time:
// a summary fed by many carts, one of which lost events, blocks at it under
// block (naming them) and applies past it under skip and park.
func TestHole_a_revision_map_finds_the_hole_of_one_of_its_streams(t *testing.T) {
	for _, policy := range []projector.FailurePolicy{projector.Block, projector.Skip, projector.Park, projector.Hold} {
		t.Run(policy.String(), func(t *testing.T) {
			s := newStore(t)
			reader := &firstRevisions{}
			summary := cart.NewClientSummaryProjection()
			e := holeEngine(t, s, reader, policy, summary)
			log := projectortest.NewLog(cart.Registry())
			ctx := context.Background()
			meta := []byte(`{"clientId":"x"}`)
			g, err := log.AppendWithMetadata(cart.StreamID("g"), meta, cart.ShoppingCartOpened{ShoppingCartID: "g", ClientID: "x", OpenedAt: t0},
				add("g", "p", 1), add("g", "q", 2), add("g", "r", 3))
			if err != nil {
				t.Fatal(err)
			}
			h, err := log.AppendWithMetadata(cart.StreamID("h"), meta, cart.ShoppingCartOpened{ShoppingCartID: "h", ClientID: "x", OpenedAt: t0}, add("h", "z", 7))
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range append(g[:1:1], h...) {
				if r := handle(t, e, ev)[0]; r.Outcome != projector.Applied {
					t.Fatalf("%s@%d: %v %v", ev.StreamID, ev.StreamRevision, r.Outcome, r.Err)
				}
			}
			reader.set(cart.StreamID("g"), 3) // revisions 1 and 2 of g are gone
			r := handle(t, e, g[3])[0]
			if policy == projector.Block {
				if r.Outcome != projector.Failed || !strings.Contains(r.Err.Error(), `revisions 1 to 2 of stream "shopping_cart-g"`) {
					t.Fatalf("under block: %v %v", r.Outcome, r.Err)
				}
				return
			}
			if r.Outcome != projector.Applied {
				t.Fatalf("past the hole: %v %v", r.Outcome, r.Err)
			}
			if err := projectortest.CheckDocument(ctx, s, summary, "x", []projector.Event{g[0], h[0], h[1], g[3]}); err != nil {
				t.Fatal(err)
			}
			parked, err := s.Parked(ctx, cart.ClientSummaryName)
			if err != nil || (policy == projector.Park || policy == projector.Hold) != (len(parked) == 1) || (len(parked) == 1 && parked[0].Held) {
				t.Fatalf("parked under %v: %+v %v", policy, parked, err)
			}
		})
	}
}

// A soft delete's record that comes after the events of the stream written
// again since (another worker's, or delivered again after a restart): the
// document holds events of the stream as it is now, and is not marked
// deleted.
func TestDeletion_a_late_record_of_a_stream_written_again_marks_nothing(t *testing.T) {
	s := newStore(t)
	reader := &firstRevisions{}
	e := holeEngine(t, s, reader, projector.Block, cart.NewDetailsProjection().OnDelete(projector.MarkDeleted))
	log := projectortest.NewLog(cart.Registry())
	ctx := context.Background()
	old := log.MustAppend(t, cart.StreamID("w"), cart.ShoppingCartOpened{ShoppingCartID: "w", ClientID: "x", OpenedAt: t0}, add("w", "p", 1))
	again := log.MustAppend(t, cart.StreamID("w"), cart.ShoppingCartOpened{ShoppingCartID: "w", ClientID: "y", OpenedAt: t0}, add("w", "q", 2))
	record := projector.Event{ID: "m-w", Type: "$metadata", StreamID: "$$" + cart.StreamID("w"), Position: old[1].Position + 1,
		Data: []byte(`{"$tb":9223372036854775807}`), Created: t0}
	reader.set(cart.StreamID("w"), 2) // deleted, and written again from revision 2
	for _, ev := range append(old, again...) {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if rs, err := e.Handle(ctx, record); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Duplicate {
		t.Fatalf("the late record: %+v %v, want a duplicate", rs, err)
	}
	var doc bson.M
	if err := s.Database().Collection(cart.DetailsName).FindOne(ctx, bson.D{{Key: "_id", Value: "w"}}).Decode(&doc); err != nil || doc["_deleted"] == true {
		t.Errorf("the live document is marked deleted: %v (%v)", doc, err)
	}
	if err := checkState(ctx, s, cart.StreamID("w"), again); err != nil {
		t.Error(err)
	}
}
