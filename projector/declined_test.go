package projector_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// A board summary that forgets to tie its card streams: a card's later
// events name no board, so its router declines them. Under the per-stream
// revision map such an event of a stream that feeds a board would never
// reach it (the card's last event, archived here, with nothing after it to
// find the hole), so it fails under the failure policy at once, naming the
// board and TieStreams; its document is not written. An event of a handled
// type in a stream that feeds no document is still the projection's to
// leave alone.
func TestDeclined_an_event_of_a_stream_that_feeds_a_document_is_not_left_alone(t *testing.T) {
	server := esdbtest.New(t)
	client := dialESDB(t, server)
	ctx := context.Background()
	reg := kanbanRegistry()
	appendOne := func(stream string, payload any) projector.Event {
		t.Helper()
		name, data, err := reg.Encode(payload)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (appender{client}).Append(ctx, stream, sourcetest.AnyRevision, sourcetest.Event{ID: uuid.New(), Type: name, Data: data}); err != nil {
			t.Fatal(err)
		}
		var last projector.Event // read back, as the catch-up delivers it
		if err := client.ReadStream(ctx, stream, 0, func(ev projector.Event) error { last = ev; return nil }); err != nil {
			t.Fatal(err)
		}
		return last
	}
	opened := appendOne("board-b1", BoardOpened{BoardID: "b1", Name: "sprint"})
	added := appendOne("card-c1", CardAdded{CardID: "c1", BoardID: "b1", Title: "write it"})
	archived := appendOne("card-c1", CardArchived{CardID: "c1"})
	stray := appendOne("card-c2", CardArchived{CardID: "c2"}) // a card this projection never saw

	for _, policy := range []projector.FailurePolicy{projector.Block, projector.Park} {
		t.Run(policy.String(), func(t *testing.T) {
			store := newStore(t)
			e, err := projector.NewEngine(store, kanbanRegistry(), []projector.Definition{boardsTying().OnFailure(policy)},
				projector.WithRetry(patient()), projector.WithStreamReader(client), projector.WithParker(store))
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			for _, ev := range []projector.Event{opened, added} {
				if rs, _ := e.Handle(ctx, ev); len(rs) != 1 || rs[0].Outcome != projector.Applied {
					t.Fatalf("%s: %+v", ev.Type, rs)
				}
			}
			rs, _ := e.Handle(ctx, archived)
			want := map[projector.FailurePolicy]projector.Outcome{projector.Block: projector.Failed, projector.Park: projector.Parked}[policy]
			if len(rs) != 1 || rs[0].Outcome != want || !errors.Is(rs[0].Err, projector.ErrUnroutable) ||
				!strings.Contains(rs[0].Err.Error(), `"b1"`) || !strings.Contains(rs[0].Err.Error(), "TieStreams") {
				t.Fatalf("the archived card, declined: %+v; want %v, unroutable, naming board b1 and TieStreams", rs, want)
			}
			var got board
			if found, _, err := projector.ReadDocument(ctx, store, boardsTying(), "b1", &got); err != nil || !found || got.Cards["c1"].Archived {
				t.Fatalf("board b1: found %v, %v, %+v; want it with card c1 not archived", found, err, got)
			}
			if rs, err := e.Handle(ctx, stray); len(rs) != 0 || err != nil {
				t.Fatalf("an archived card of a stream that feeds no board: %+v, %v; want it left alone", rs, err)
			}
		})
	}
}

// A projection under the revision map whose router declines every event of
// some streams (the cards of other boards): the engine learns, as their
// events come in order, that none of them routes, and reads such a stream
// once at most, not once an event.
func TestDeclined_streams_that_feed_no_document_are_not_read_an_event_at_a_time(t *testing.T) {
	p := projector.New[board]("kanban_b1", func(ev projector.Event) (string, bool) {
		if a, ok := ev.Payload.(CardAdded); ok && a.BoardID == "b1" {
			return "b1", true
		}
		return "", false
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(s board, e CardAdded) (board, error) { s.Name = e.Title; return s, nil })
	projector.On(p, func(s board, e CardMoved) (board, error) { return s, nil })
	log := projectortest.NewLog(kanbanRegistry())
	evs := log.MustAppend(t, "card-c9", CardAdded{CardID: "c9", BoardID: "b2", Title: "elsewhere"},
		CardMoved{CardID: "c9", Column: "doing"}, CardMoved{CardID: "c9", Column: "done"}, CardMoved{CardID: "c9", Column: "todo"})
	h := newStreams(evs...)
	e, err := projector.NewEngine(newStore(t), kanbanRegistry(), []projector.Definition{p},
		projector.WithRetry(patient()), projector.WithStreamReader(h))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if rs, err := e.Handle(context.Background(), ev); len(rs) != 0 || err != nil {
			t.Fatalf("%s@%d: %+v, %v; want it left alone", ev.Type, ev.StreamRevision, rs, err)
		}
	}
	if n := h.readsOf("card-c9"); n > 1 {
		t.Errorf("the stream of a card of another board was read %d times for its %d events; want once at most", n, len(evs))
	}
}

// A card stream deleted since its events were appended (a catch-up or a
// rebuild delivers them from $all): the declined event's stream cannot be
// read to tell whether it feeds a board, and that is not the event store
// failing to answer. The event is left alone, as without the check, instead
// of failing again and again as a store error.
func TestDeclined_an_event_of_a_stream_deleted_since_is_left_alone(t *testing.T) {
	server := esdbtest.New(t)
	client := dialESDB(t, server)
	ctx := context.Background()
	reg := kanbanRegistry()
	var evs []projector.Event
	for _, a := range []struct {
		stream  string
		payload any
	}{
		{"board-b1", BoardOpened{BoardID: "b1", Name: "sprint"}},
		{"card-c1", CardAdded{CardID: "c1", BoardID: "b1", Title: "write it"}},
		{"card-c1", CardArchived{CardID: "c1"}},
	} {
		name, data, err := reg.Encode(a.payload)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (appender{client}).Append(ctx, a.stream, sourcetest.AnyRevision, sourcetest.Event{ID: uuid.New(), Type: name, Data: data}); err != nil {
			t.Fatal(err)
		}
		if err := client.ReadStream(ctx, a.stream, 0, func(ev projector.Event) error {
			if len(evs) == 0 || ev.StreamID != evs[len(evs)-1].StreamID || ev.StreamRevision > evs[len(evs)-1].StreamRevision {
				evs = append(evs, ev)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := server.Client(t).DeleteStream(ctx, "card-c1", kurrentdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	store := newStore(t)
	e, err := projector.NewEngine(store, reg, []projector.Definition{boardsTying()},
		projector.WithRetry(patient()), projector.WithStreamReader(client))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("read back %d events, want 3", len(evs))
	}
	for _, ev := range evs[:2] {
		if rs, _ := e.Handle(ctx, ev); len(rs) != 1 || rs[0].Outcome != projector.Applied {
			t.Fatalf("%s: %+v", ev.Type, rs)
		}
	}
	hctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if rs, err := e.Handle(hctx, evs[2]); len(rs) != 0 || err != nil {
		t.Fatalf("the declined event of a deleted stream: %+v, %v; want it left alone", rs, err)
	}
}

// A card stream soft-deleted and written again (it goes on from its old
// revision) before the engine meets it: a catch-up or a rebuild delivers
// both lives from $all. The declined event of the first life cannot be
// found in the stream any more, but the engine saw the routed event before
// it: that is the stream's first routed event, as in the log, and the
// declined one goes there. The board is the fold of both lives, as live.
func TestTieStreams_a_stream_deleted_and_written_again_goes_to_its_first_routed_events_document(t *testing.T) {
	server := esdbtest.New(t)
	client := dialESDB(t, server)
	ctx := context.Background()
	reg := kanbanRegistry()
	put := func(payload any) {
		name, data, err := reg.Encode(payload)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (appender{client}).Append(ctx, "card-c1", sourcetest.AnyRevision, sourcetest.Event{ID: uuid.New(), Type: name, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	put(CardAdded{CardID: "c1", BoardID: "b1", Title: "first"})
	put(CardMoved{CardID: "c1", Column: "doing"})
	var evs []projector.Event
	if err := client.ReadStream(ctx, "card-c1", 0, func(ev projector.Event) error { evs = append(evs, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Client(t).DeleteStream(ctx, "card-c1", kurrentdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	put(CardAdded{CardID: "c1", BoardID: "b1", Title: "again"})
	put(CardMoved{CardID: "c1", Column: "done"})
	if err := client.ReadStream(ctx, "card-c1", 2, func(ev projector.Event) error { evs = append(evs, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || evs[2].StreamRevision != 2 {
		t.Fatalf("read back %d events (%+v), want the two lives' 4, the second from revision 2", len(evs), evs)
	}
	for _, pol := range []projector.FailurePolicy{projector.Block, projector.Park} {
		store := newStore(t)
		e, err := projector.NewEngine(store, reg, []projector.Definition{boardsTying(cardStreams)}, projector.WithRetry(patient()),
			projector.WithFailurePolicy(pol), projector.WithParker(store), projector.WithStreamReader(client))
		if err != nil {
			t.Fatal(err)
		}
		hctx, cancel := context.WithTimeout(ctx, time.Minute)
		for _, ev := range evs {
			if rs, err := e.Handle(hctx, ev); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Applied {
				t.Errorf("%v: %s@%d: %+v, %v; want it applied to b1", pol, ev.Type, ev.StreamRevision, rs, err)
			}
		}
		cancel()
		decoded := make([]projector.Event, len(evs))
		for i, ev := range evs {
			if decoded[i], err = reg.Decode(ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := projectortest.CheckDocument(ctx, store, boardsTying(cardStreams), "b1", decoded); err != nil {
			t.Errorf("%v: %v", pol, err)
		}
	}
}
