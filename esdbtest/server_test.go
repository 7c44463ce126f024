package esdbtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/revgate/projector/esdbtest"
)

// --- helpers ---

// testCtx bounds a test's calls and subscriptions.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func event(eventType, data string) kurrentdb.EventData {
	return kurrentdb.EventData{EventType: eventType, ContentType: kurrentdb.ContentTypeJson, Data: []byte(data)}
}

// appendEvents appends n events of one type to a stream with ExpectedRevision Any.
func appendEvents(t *testing.T, ctx context.Context, c *kurrentdb.Client, stream, eventType string, n int) *kurrentdb.WriteResult {
	t.Helper()
	events := make([]kurrentdb.EventData, n)
	for i := range events {
		events[i] = event(eventType, fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", i%7)))
	}
	res, err := c.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{}, events...)
	if err != nil {
		t.Fatalf("append to %s: %v", stream, err)
	}
	return res
}

// read drains a plain read: read(t)(c.ReadStream(...)).
func read(t *testing.T) func(*kurrentdb.ReadStream, error) []*kurrentdb.ResolvedEvent {
	t.Helper()
	return func(rs *kurrentdb.ReadStream, err error) []*kurrentdb.ResolvedEvent {
		t.Helper()
		return drain(t, rs, err)
	}
}

func drain(t *testing.T, rs *kurrentdb.ReadStream, err error) []*kurrentdb.ResolvedEvent {
	t.Helper()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	defer rs.Close()
	var out []*kurrentdb.ResolvedEvent
	for {
		e, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		out = append(out, e)
	}
}

func revisions(events []*kurrentdb.ResolvedEvent) []uint64 {
	out := make([]uint64, len(events))
	for i, e := range events {
		out[i] = e.OriginalEvent().EventNumber
	}
	return out
}

func errorCode(err error) (kurrentdb.ErrorCode, bool) {
	var e *kurrentdb.Error
	if errors.As(err, &e) {
		return e.Code(), true
	}
	return 0, false
}

// next returns the next subscription message, failing on a drop.
func next(t *testing.T, sub *kurrentdb.Subscription) *kurrentdb.SubscriptionEvent {
	t.Helper()
	e := sub.Recv()
	if e.SubscriptionDropped != nil {
		t.Fatalf("subscription dropped: %v", e.SubscriptionDropped.Error)
	}
	return e
}

// caughtUp says whether e is the server's CaughtUp. This server sends it
// without a timestamp, as EventStoreDB 23.10 does, and KurrentDB-Client-Go
// then delivers a message with every field nil (the server sends no
// FellBehind, so such a message is CaughtUp).
func caughtUp(e *kurrentdb.SubscriptionEvent) bool {
	return e.CaughtUp != nil || *e == (kurrentdb.SubscriptionEvent{})
}

// nextEvent skips checkpoints and CaughtUp to the next event.
func nextEvent(t *testing.T, sub *kurrentdb.Subscription) *kurrentdb.ResolvedEvent {
	t.Helper()
	for {
		if e := next(t, sub); e.EventAppeared != nil {
			return e.EventAppeared
		}
	}
}

// nextPersistent returns the next persistent message, failing on a drop.
func nextPersistent(t *testing.T, sub *kurrentdb.PersistentSubscription) *kurrentdb.EventAppeared {
	t.Helper()
	e := sub.Recv()
	if e.SubscriptionDropped != nil {
		t.Fatalf("persistent subscription dropped: %v", e.SubscriptionDropped.Error)
	}
	return e.EventAppeared
}

func settings(mutate func(*kurrentdb.PersistentSubscriptionSettings)) *kurrentdb.PersistentSubscriptionSettings {
	s := kurrentdb.SubscriptionSettingsDefault()
	if mutate != nil {
		mutate(&s)
	}
	return &s
}

func createGroup(t *testing.T, ctx context.Context, c *kurrentdb.Client, stream, group string, from kurrentdb.StreamPosition, st *kurrentdb.PersistentSubscriptionSettings) {
	t.Helper()
	err := c.CreatePersistentSubscription(ctx, stream, group, kurrentdb.PersistentStreamSubscriptionOptions{StartFrom: from, Settings: st})
	if err != nil {
		t.Fatalf("create group %s on %s: %v", group, stream, err)
	}
}

func connect(t *testing.T, ctx context.Context, c *kurrentdb.Client, stream, group string, buffer uint32) *kurrentdb.PersistentSubscription {
	t.Helper()
	sub, err := c.SubscribeToPersistentSubscription(ctx, stream, group, kurrentdb.SubscribeToPersistentSubscriptionOptions{BufferSize: buffer})
	if err != nil {
		t.Fatalf("connect to %s on %s: %v", group, stream, err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// --- appends ---

func TestAppend_expected_revisions(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	tests := []struct {
		name     string
		stream   string
		expected kurrentdb.StreamState
		wantErr  bool
		wantNext uint64
	}{
		{"any on a new stream", "any", kurrentdb.Any{}, false, 0},
		{"any again", "any", kurrentdb.Any{}, false, 1},
		{"no stream on a new stream", "fresh", kurrentdb.NoStream{}, false, 0},
		{"no stream on an existing stream", "fresh", kurrentdb.NoStream{}, true, 0},
		{"stream exists on a missing stream", "missing", kurrentdb.StreamExists{}, true, 0},
		{"stream exists on an existing stream", "fresh", kurrentdb.StreamExists{}, false, 1},
		{"exact revision", "fresh", kurrentdb.Revision(1), false, 2},
		{"stale revision", "fresh", kurrentdb.Revision(1), true, 0},
		{"revision ahead", "fresh", kurrentdb.Revision(7), true, 0},
		{"revision on a missing stream", "missing", kurrentdb.Revision(0), true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.AppendToStream(ctx, tt.stream, kurrentdb.AppendToStreamOptions{StreamState: tt.expected}, event("Happened", `{}`))
			if tt.wantErr {
				if code, ok := errorCode(err); !ok || code != kurrentdb.ErrorCodeWrongExpectedVersion {
					t.Fatalf("err = %v, want ErrorCodeWrongExpectedVersion", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("append: %v", err)
			}
			if res.NextExpectedVersion != tt.wantNext {
				t.Errorf("NextExpectedVersion = %d, want %d", res.NextExpectedVersion, tt.wantNext)
			}
			if res.CommitPosition == 0 || res.CommitPosition != res.PreparePosition || res.CommitPosition != s.Head() {
				t.Errorf("position C:%d/P:%d, want both = head %d", res.CommitPosition, res.PreparePosition, s.Head())
			}
		})
	}
	if got := esdbtest.Len(s); got != 5 {
		t.Errorf("Len = %d, want 5", got)
	}
	if st := s.Stats(); st.Appends != 5 || st.Events != 5 {
		t.Errorf("Stats = %+v, want 5 appends of 5 events", st)
	}
}

func TestAppend_positions_grow_by_event_size(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "sized", "Sized", 6)
	events := read(t)(c.ReadAll(ctx, kurrentdb.ReadAllOptions{}, 100))
	steps := map[uint64]bool{}
	var prev uint64
	for i, e := range events {
		pos := e.Event.Position
		if pos.Commit != pos.Prepare || pos.Commit <= prev {
			t.Fatalf("event %d at C:%d/P:%d after %d", i, pos.Commit, pos.Prepare, prev)
		}
		steps[pos.Commit-prev] = true
		prev = pos.Commit
	}
	if len(steps) < 2 {
		t.Errorf("positions grow by a constant step: %v", steps)
	}
	if s.Head() != prev {
		t.Errorf("Head = %d, want %d", s.Head(), prev)
	}
}

func TestAppend_same_event_ids_twice_is_idempotent(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	e1, e2 := event("A", `{}`), event("B", `{}`)
	e1.EventID, e2.EventID = uuid.New(), uuid.New()
	first, err := c.AppendToStream(ctx, "idem", kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.NoStream{}}, e1, e2)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.AppendToStream(ctx, "idem", kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.NoStream{}}, e1, e2)
	if err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if *again != *first || esdbtest.Len(s) != 2 {
		t.Errorf("repeat = %+v (first %+v), Len %d; want the first result and 2 events", again, first, esdbtest.Len(s))
	}
}

// --- reads ---

func TestRead_stream(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "other", "Noise", 2)
	appendEvents(t, ctx, c, "s", "E", 5)
	tests := []struct {
		name  string
		opts  kurrentdb.ReadStreamOptions
		count uint64
		want  []uint64
	}{
		{"forwards from start", kurrentdb.ReadStreamOptions{}, 100, []uint64{0, 1, 2, 3, 4}},
		{"forwards from revision with count", kurrentdb.ReadStreamOptions{From: kurrentdb.Revision(2)}, 2, []uint64{2, 3}},
		{"forwards from end", kurrentdb.ReadStreamOptions{From: kurrentdb.End{}}, 100, nil},
		{"backwards from end", kurrentdb.ReadStreamOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, 100, []uint64{4, 3, 2, 1, 0}},
		{"backwards from revision", kurrentdb.ReadStreamOptions{Direction: kurrentdb.Backwards, From: kurrentdb.Revision(2)}, 100, []uint64{2, 1, 0}},
		{"backwards from end with count", kurrentdb.ReadStreamOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, 1, []uint64{4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := read(t)(c.ReadStream(ctx, "s", tt.opts, tt.count))
			if !slices.Equal(revisions(got), tt.want) {
				t.Errorf("revisions = %v, want %v", revisions(got), tt.want)
			}
			for _, e := range got {
				if e.Event.StreamID != "s" || e.Event.EventType != "E" || e.Event.ContentType != "application/json" {
					t.Errorf("event %+v", e.Event)
				}
				if since := time.Since(e.Event.CreatedDate); since < 0 || since > time.Minute {
					t.Errorf("CreatedDate %v", e.Event.CreatedDate)
				}
			}
		})
	}
}

func TestRead_missing_stream_is_not_found(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	rs, err := c.ReadStream(ctx, "nope", kurrentdb.ReadStreamOptions{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	_, err = rs.Recv()
	if code, ok := errorCode(err); !ok || code != kurrentdb.ErrorCodeResourceNotFound {
		t.Fatalf("err = %v, want ErrorCodeResourceNotFound", err)
	}
}

func TestRead_all(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "a", "A", 3)
	appendEvents(t, ctx, c, "b", "B", 3)
	all := read(t)(c.ReadAll(ctx, kurrentdb.ReadAllOptions{}, 100))
	if len(all) != 6 {
		t.Fatalf("read %d events, want 6", len(all))
	}
	pos := func(i int) kurrentdb.Position { return all[i].Event.Position }
	ids := func(events []*kurrentdb.ResolvedEvent) []uuid.UUID {
		var out []uuid.UUID
		for _, e := range events {
			out = append(out, e.Event.EventID)
		}
		return out
	}
	want := func(idx ...int) []uuid.UUID {
		var out []uuid.UUID
		for _, i := range idx {
			out = append(out, all[i].Event.EventID)
		}
		return out
	}
	tests := []struct {
		name  string
		opts  kurrentdb.ReadAllOptions
		count uint64
		want  []uuid.UUID
	}{
		{"forwards from a position includes it", kurrentdb.ReadAllOptions{From: pos(3)}, 100, want(3, 4, 5)},
		{"forwards from a position with count", kurrentdb.ReadAllOptions{From: pos(1)}, 2, want(1, 2)},
		{"forwards from end", kurrentdb.ReadAllOptions{From: kurrentdb.End{}}, 100, nil},
		{"backwards from end", kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, 100, want(5, 4, 3, 2, 1, 0)},
		{"backwards from a position starts before it", kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: pos(3)}, 100, want(2, 1, 0)},
		{"backwards with count", kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, 2, want(5, 4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ids(read(t)(c.ReadAll(ctx, tt.opts, tt.count)))
			if !slices.Equal(got, tt.want) {
				t.Errorf("ids = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRead_resolves_links(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "cart-1", "Opened", 2)
	link := kurrentdb.EventData{EventType: "$>", ContentType: kurrentdb.ContentTypeBinary, Data: []byte("1@cart-1")}
	if _, err := c.AppendToStream(ctx, "$ce-cart", kurrentdb.AppendToStreamOptions{}, link); err != nil {
		t.Fatal(err)
	}
	got := read(t)(c.ReadStream(ctx, "$ce-cart", kurrentdb.ReadStreamOptions{ResolveLinkTos: true}, 10))
	if len(got) != 1 || got[0].Link == nil || got[0].Event.StreamID != "cart-1" || got[0].Event.EventNumber != 1 || got[0].Link.StreamID != "$ce-cart" {
		t.Fatalf("resolved = %+v", got)
	}
	raw := read(t)(c.ReadStream(ctx, "$ce-cart", kurrentdb.ReadStreamOptions{}, 10))
	if len(raw) != 1 || raw[0].Link != nil || raw[0].Event.EventType != "$>" {
		t.Fatalf("unresolved = %+v", raw)
	}
}

// The server encodes an event's message once and sends it again as it is:
// a second read, a subscription and a link's resolution must still give
// each what the first gave, and a link resolved or not its own message.
func TestRead_an_event_served_again_is_the_event_served_first(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "cart-1", "Opened", 3)
	link := kurrentdb.EventData{EventType: "$>", ContentType: kurrentdb.ContentTypeBinary, Data: []byte("1@cart-1")}
	if _, err := c.AppendToStream(ctx, "$ce-cart", kurrentdb.AppendToStreamOptions{}, link); err != nil {
		t.Fatal(err)
	}
	first := read(t)(c.ReadStream(ctx, "cart-1", kurrentdb.ReadStreamOptions{}, 10))
	again := read(t)(c.ReadStream(ctx, "cart-1", kurrentdb.ReadStreamOptions{}, 10))
	fromAll := read(t)(c.ReadAll(ctx, kurrentdb.ReadAllOptions{}, 100))
	if len(first) != 3 || len(again) != 3 {
		t.Fatalf("read %d then %d events, want 3 each", len(first), len(again))
	}
	var inAll []*kurrentdb.ResolvedEvent
	for _, e := range fromAll {
		if e.Event.StreamID == "cart-1" {
			inAll = append(inAll, e)
		}
	}
	if len(inAll) != 3 {
		t.Fatalf("$all gave %d events of cart-1, want 3", len(inAll))
	}
	for i, e := range first {
		// A read of a stream gives no position (a node's -1); $all and a
		// subscription give the event's.
		if e.Event.Position.Commit != math.MaxUint64 || e.Event.Position.Prepare != math.MaxUint64 || inAll[i].Event.Position.Commit == math.MaxUint64 {
			t.Errorf("event %d: position %+v read from its stream, %+v from $all", i, e.Event.Position, inAll[i].Event.Position)
		}
		if !reflect.DeepEqual(e.Event, again[i].Event) {
			t.Errorf("event %d read again = %+v, first %+v", i, again[i].Event, e.Event)
		}
		withPosition := *e.Event
		withPosition.Position = inAll[i].Event.Position
		if !reflect.DeepEqual(&withPosition, inAll[i].Event) {
			t.Errorf("event %d read from $all = %+v, from its stream %+v", i, inAll[i].Event, e.Event)
		}
		if e.Event.EventNumber != uint64(i) || string(e.Event.Data) != string(again[i].Event.Data) {
			t.Errorf("event %d: revision %d, data %q then %q", i, e.Event.EventNumber, e.Event.Data, again[i].Event.Data)
		}
	}
	for range 2 {
		resolved := read(t)(c.ReadStream(ctx, "$ce-cart", kurrentdb.ReadStreamOptions{ResolveLinkTos: true}, 10))
		if len(resolved) != 1 || resolved[0].Link == nil || resolved[0].Event.EventNumber != 1 || resolved[0].Link.EventType != "$>" ||
			!reflect.DeepEqual(resolved[0].Event, first[1].Event) {
			t.Fatalf("resolved = %+v", resolved)
		}
		raw := read(t)(c.ReadStream(ctx, "$ce-cart", kurrentdb.ReadStreamOptions{}, 10))
		if len(raw) != 1 || raw[0].Link != nil || raw[0].Event.EventType != "$>" {
			t.Fatalf("unresolved = %+v", raw)
		}
	}
	sub, err := c.SubscribeToStream(ctx, "cart-1", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for i := range first {
		e := next(t, sub)
		if e.EventAppeared == nil || !reflect.DeepEqual(e.EventAppeared.Event, inAll[i].Event) {
			t.Fatalf("subscription's event %d = %+v, want %+v", i, e, inAll[i].Event)
		}
	}
	// A read that asks for ids as strings (the official client asks for
	// them structured) gets them so, after the structured ones were sent.
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rs, err := streams.NewStreamsClient(conn).Read(ctx, &streams.ReadReq{Options: &streams.ReadReq_Options{
		StreamOption: &streams.ReadReq_Options_Stream{Stream: &streams.ReadReq_Options_StreamOptions{
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte("cart-1")},
			RevisionOption:   &streams.ReadReq_Options_StreamOptions_Start{Start: &shared.Empty{}},
		}},
		CountOption:  &streams.ReadReq_Options_Count{Count: 10},
		FilterOption: &streams.ReadReq_Options_NoFilter{NoFilter: &shared.Empty{}},
		UuidOption:   &streams.ReadReq_Options_UUIDOption{Content: &streams.ReadReq_Options_UUIDOption_String_{String_: &shared.Empty{}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		msg, err := rs.Recv()
		if err != nil {
			t.Fatalf("raw read, event %d: %v", i, err)
		}
		id := msg.GetEvent().GetEvent().GetId()
		if id.GetString_() != first[i].Event.EventID.String() || id.GetStructured() != nil {
			t.Errorf("raw read, event %d: id %v, want the string %s", i, id, first[i].Event.EventID)
		}
	}
}

// --- catch-up subscriptions ---

func TestSubscribe_stream_catches_up_then_goes_live(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	tests := []struct {
		name       string
		from       kurrentdb.StreamPosition
		wantBefore []uint64
	}{
		{"from start", kurrentdb.Start{}, []uint64{0, 1, 2}},
		{"after a revision", kurrentdb.Revision(0), []uint64{1, 2}},
		{"from end", kurrentdb.End{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := "s-" + strings.ReplaceAll(tt.name, " ", "-")
			appendEvents(t, ctx, c, stream, "E", 3)
			sub, err := c.SubscribeToStream(ctx, stream, kurrentdb.SubscribeToStreamOptions{From: tt.from})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			var got []uint64
			for {
				e := next(t, sub)
				if caughtUp(e) {
					break
				}
				got = append(got, e.EventAppeared.Event.EventNumber)
			}
			if !slices.Equal(got, tt.wantBefore) {
				t.Fatalf("before CaughtUp: %v, want %v", got, tt.wantBefore)
			}
			res := appendEvents(t, ctx, c, stream, "E", 1)
			if e := nextEvent(t, sub); e.Event.EventNumber != res.NextExpectedVersion {
				t.Fatalf("live event %d, want %d", e.Event.EventNumber, res.NextExpectedVersion)
			}
		})
	}
}

func TestSubscribe_all_from_a_position_is_exclusive(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	first := appendEvents(t, ctx, c, "a", "A", 1)
	appendEvents(t, ctx, c, "b", "B", 2)
	sub, err := c.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{From: kurrentdb.Position{Commit: first.CommitPosition, Prepare: first.PreparePosition}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []string
	for {
		e := next(t, sub)
		if caughtUp(e) {
			break
		}
		if e.CheckPointReached != nil {
			t.Fatalf("checkpoint on an unfiltered subscription")
		}
		got = append(got, fmt.Sprintf("%s/%d", e.EventAppeared.Event.StreamID, e.EventAppeared.Event.EventNumber))
	}
	if want := []string{"b/0", "b/1"}; !slices.Equal(got, want) {
		t.Fatalf("catch-up = %v, want %v", got, want)
	}
	appendEvents(t, ctx, c, "c", "C", 1)
	if e := nextEvent(t, sub); e.Event.StreamID != "c" {
		t.Fatalf("live event from %s", e.Event.StreamID)
	}
}

// positionsOf reads $all and returns each event's position, keyed by
// "stream/revision".
func positionsOf(t *testing.T, ctx context.Context, c *kurrentdb.Client) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, e := range read(t)(c.ReadAll(ctx, kurrentdb.ReadAllOptions{}, 10_000)) {
		out[fmt.Sprintf("%s/%d", e.Event.StreamID, e.Event.EventNumber)] = e.Event.Position.Commit
	}
	return out
}

func TestSubscribe_all_filter_checkpoints_as_23_10_sends_them(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "keep-1", "Kept", 5)
	for i := range 4 {
		appendEvents(t, ctx, c, fmt.Sprintf("other-%d", i), "Noise", 10)
	}
	pos := positionsOf(t, ctx, c)
	sub, err := c.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{
		From:               kurrentdb.Start{},
		Filter:             &kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: []string{"keep-"}},
		MaxSearchWindow:    4,
		CheckpointInterval: 2, // a checkpoint every 8 scanned events, at the end of a page
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []string
	for {
		e := next(t, sub)
		if caughtUp(e) {
			break
		}
		switch {
		case e.EventAppeared != nil:
			got = append(got, fmt.Sprintf("%s/%d", e.EventAppeared.Event.StreamID, e.EventAppeared.Event.EventNumber))
		case e.CheckPointReached != nil:
			got = append(got, fmt.Sprintf("checkpoint %d", e.CheckPointReached.Commit))
		}
	}
	// Pages of 4 scanned events: keep-1/0-3 | keep-1/4 other-0/0-2 (8
	// scanned: at the last kept event) | other-0/3-6 | other-0/7-9
	// other-1/0 (16: where the page started, after other-0/6) | ... | the
	// page with other-3/9 reaches the end: no checkpoint there.
	want := []string{"keep-1/0", "keep-1/1", "keep-1/2", "keep-1/3", "keep-1/4",
		fmt.Sprintf("checkpoint %d", pos["keep-1/4"]),
		fmt.Sprintf("checkpoint %d", pos["other-0/6"]),
		fmt.Sprintf("checkpoint %d", pos["other-1/4"]),
		fmt.Sprintf("checkpoint %d", pos["other-2/2"]),
		fmt.Sprintf("checkpoint %d", pos["other-3/0"]),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("catch-up:\n got %v\nwant %v", got, want)
	}

	// Live: the 5 events scanned since the last checkpoint count on; the
	// 8th scanned event brings one, at its own position.
	appendEvents(t, ctx, c, "other-live", "Noise", 2)
	res := appendEvents(t, ctx, c, "keep-2", "Kept", 1)
	if e := next(t, sub); e.EventAppeared == nil || e.EventAppeared.Event.StreamID != "keep-2" {
		t.Fatalf("live message %+v, want keep-2's event", e)
	}
	if e := next(t, sub); e.CheckPointReached == nil || e.CheckPointReached.Commit != res.CommitPosition {
		t.Fatalf("live message %+v, want a checkpoint at %d", e, res.CommitPosition)
	}
	appendEvents(t, ctx, c, "other-live", "Noise", 7)
	last := appendEvents(t, ctx, c, "other-live", "Noise", 1)
	if e := next(t, sub); e.CheckPointReached == nil || e.CheckPointReached.Commit != last.CommitPosition {
		t.Fatalf("live message %+v, want a checkpoint at %d", e, last.CommitPosition)
	}
}

func TestSubscribe_all_filter_count_window_is_32_and_a_first_empty_page_checkpoints_at_0(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "other", "Noise", 40)
	sub, err := c.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{
		From:            kurrentdb.Start{},
		Filter:          &kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: []string{"keep-"}},
		MaxSearchWindow: kurrentdb.NoMaxSearchWindow, // a "count" window: the node's default, 32
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if e := next(t, sub); e.CheckPointReached == nil || e.CheckPointReached.Commit != 0 {
		t.Fatalf("first message %+v, want a checkpoint at 0 (where the first page started)", e)
	}
	if e := next(t, sub); !caughtUp(e) {
		t.Fatalf("second message %+v, want CaughtUp", e)
	}
	// 8 scanned before going live: the 24th live event makes 32.
	appendEvents(t, ctx, c, "other", "Noise", 23)
	res := appendEvents(t, ctx, c, "other", "Noise", 1)
	if e := next(t, sub); e.CheckPointReached == nil || e.CheckPointReached.Commit != res.CommitPosition {
		t.Fatalf("live message %+v, want a checkpoint at %d", e, res.CommitPosition)
	}
}

func TestSubscribe_all_filters(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "order-1", "OrderPlaced", 1)
	appendEvents(t, ctx, c, "cart-1", "CartOpened", 1)
	appendEvents(t, ctx, c, "$internal", "$settings", 1)
	tests := []struct {
		name   string
		filter kurrentdb.SubscriptionFilter
		want   []string
	}{
		{"stream prefix", kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: []string{"cart-", "order-"}}, []string{"order-1", "cart-1"}},
		{"stream regex", kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Regex: "^c.*-1$"}, []string{"cart-1"}},
		{"event type prefix", kurrentdb.SubscriptionFilter{Type: kurrentdb.EventFilterType, Prefixes: []string{"Order"}}, []string{"order-1"}},
		{"event type regex excluding system events", kurrentdb.SubscriptionFilter{Type: kurrentdb.EventFilterType, Regex: "^[^$]"}, []string{"order-1", "cart-1"}},
		{"system streams by prefix", kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: []string{"$"}}, []string{"$internal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := c.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{From: kurrentdb.Start{}, Filter: &tt.filter})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			var got []string
			for {
				e := next(t, sub)
				if caughtUp(e) {
					break
				}
				if e.EventAppeared != nil {
					got = append(got, e.EventAppeared.Event.StreamID)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("streams = %v, want %v", got, tt.want)
			}
		})
	}
}

// --- faults ---

func TestDropSubscriptions_drops_catch_up_and_persistent(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "s", "E", 1)
	createGroup(t, ctx, c, "s", "g", kurrentdb.Start{}, nil)
	sub, err := c.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{From: kurrentdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	nextEvent(t, sub)
	psub := connect(t, ctx, c, "s", "g", 10)
	nextPersistent(t, psub) // revision 0, not acked

	if n := s.DropSubscriptions(); n != 2 {
		t.Fatalf("dropped %d, want 2", n)
	}
	for {
		e := sub.Recv()
		if e.SubscriptionDropped != nil {
			if status.Code(e.SubscriptionDropped.Error) != codes.Unavailable {
				t.Fatalf("drop error %v, want Unavailable", e.SubscriptionDropped.Error)
			}
			break
		}
	}
	if e := psub.Recv(); e.SubscriptionDropped == nil || status.Code(e.SubscriptionDropped.Error) != codes.Unavailable {
		t.Fatalf("persistent: %+v, want dropped with Unavailable", e)
	}
	if got := s.Stats().Dropped; got != 2 {
		t.Errorf("Stats.Dropped = %d, want 2", got)
	}
	// The group redelivers the unacked event to the next consumer.
	again := connect(t, ctx, c, "s", "g", 10)
	if m := nextPersistent(t, again); m.Event.OriginalEvent().EventNumber != 0 || m.RetryCount != 1 {
		t.Fatalf("redelivered revision %d retry %d", m.Event.OriginalEvent().EventNumber, m.RetryCount)
	}
}

func TestRefuse_fails_calls_then_the_same_client_works_again(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "s", "E", 1)
	sub, err := c.SubscribeToStream(ctx, "s", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	nextEvent(t, sub)

	const window = 500 * time.Millisecond
	refusedAt := time.Now()
	s.Refuse(window)
	for {
		if e := sub.Recv(); e.SubscriptionDropped != nil {
			break
		}
	}
	_, err = c.AppendToStream(ctx, "s", kurrentdb.AppendToStreamOptions{}, event("E", `{}`))
	if code, ok := errorCode(err); !ok || code != kurrentdb.ErrorUnavailable {
		t.Fatalf("append while refused: %v, want ErrorUnavailable", err)
	}
	// The client rediscovers the node; its next call waits for the window to end.
	res, err := c.AppendToStream(ctx, "s", kurrentdb.AppendToStreamOptions{}, event("E", `{}`))
	if err != nil {
		t.Fatalf("append after the window: %v", err)
	}
	if time.Since(refusedAt) < window {
		t.Errorf("append succeeded %v after Refuse(%v)", time.Since(refusedAt), window)
	}
	if res.NextExpectedVersion != 1 {
		t.Errorf("NextExpectedVersion = %d, want 1 (the refused append wrote nothing)", res.NextExpectedVersion)
	}
}

func TestDuplicateDeliveries_sends_every_event_twice(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "s", "E", 3)
	createGroup(t, ctx, c, "s", "g", kurrentdb.Start{}, nil)
	s.DuplicateDeliveries(1)

	sub, err := c.SubscribeToStream(ctx, "s", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []uint64
	for {
		e := next(t, sub)
		if caughtUp(e) {
			break
		}
		got = append(got, e.EventAppeared.Event.EventNumber)
	}
	if want := []uint64{0, 0, 1, 1, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("catch-up = %v, want %v", got, want)
	}

	psub := connect(t, ctx, c, "s", "g", 10)
	got = nil
	for range 6 {
		m := nextPersistent(t, psub)
		got = append(got, m.Event.OriginalEvent().EventNumber)
		if err := psub.Ack(m.Event); err != nil {
			t.Fatal(err)
		}
	}
	if want := []uint64{0, 0, 1, 1, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("persistent = %v, want %v", got, want)
	}
	if st := s.Stats(); st.Duplicates != 6 || st.Delivered != 6 {
		t.Errorf("Stats = %+v, want 6 delivered and 6 duplicates", st)
	}
	s.DuplicateDeliveries(0)
	appendEvents(t, ctx, c, "s", "E", 1)
	if e := nextEvent(t, sub); e.Event.EventNumber != 3 {
		t.Fatalf("event %d", e.Event.EventNumber)
	}
	if e := nextPersistent(t, psub); e.Event.OriginalEvent().EventNumber != 3 {
		t.Fatalf("persistent event %d", e.Event.OriginalEvent().EventNumber)
	}
}

func TestDuplicateDeliveries_is_seeded(t *testing.T) {
	pattern := func(seed int64) []uint64 {
		s, err := esdbtest.Start(esdbtest.Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := s.Client(t)
		defer c.Close()
		ctx := testCtx(t)
		appendEvents(t, ctx, c, "s", "E", 30)
		s.DuplicateDeliveries(0.5)
		sub, err := c.SubscribeToStream(ctx, "s", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		var got []uint64
		for {
			e := next(t, sub)
			if caughtUp(e) {
				return got
			}
			got = append(got, e.EventAppeared.Event.EventNumber)
		}
	}
	a, b := pattern(7), pattern(7)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different deliveries:\n%v\n%v", a, b)
	}
	if len(a) <= 30 || len(a) >= 60 {
		t.Fatalf("%d deliveries of 30 events at rate 0.5", len(a))
	}
}

func TestFaults_during_traffic_do_not_deadlock(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	createGroup(t, ctx, c, "s", "g", kurrentdb.Start{}, nil)
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // writer
		defer wg.Done()
		for run.Err() == nil {
			_, _ = c.AppendToStream(run, "s", kurrentdb.AppendToStreamOptions{}, event("E", `{}`))
		}
	}()
	go func() { // catch-up subscriber, resubscribing after drops
		defer wg.Done()
		for run.Err() == nil {
			sub, err := c.SubscribeToAll(run, kurrentdb.SubscribeToAllOptions{From: kurrentdb.Start{}})
			if err != nil {
				continue
			}
			for sub.Recv().SubscriptionDropped == nil {
			}
			_ = sub.Close()
		}
	}()
	go func() { // persistent consumer, reconnecting after drops
		defer wg.Done()
		for run.Err() == nil {
			sub, err := c.SubscribeToPersistentSubscription(run, "s", "g", kurrentdb.SubscribeToPersistentSubscriptionOptions{})
			if err != nil {
				continue
			}
			for e := sub.Recv(); e.EventAppeared != nil; e = sub.Recv() {
				_ = sub.Ack(e.EventAppeared.Event)
			}
			_ = sub.Close()
		}
	}()
	// One refusal only: periodic ones in step with the client's 100 ms
	// discovery interval could keep it from ever reconnecting.
	for i := range 30 {
		s.DuplicateDeliveries(float64(i%3) / 2)
		s.DropSubscriptions()
		if i == 15 {
			s.Refuse(30 * time.Millisecond)
		}
		time.Sleep(15 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if st := s.Stats(); st.Appends == 0 || st.Delivered == 0 || st.Dropped == 0 {
		t.Errorf("Stats = %+v, want traffic and drops", st)
	}
	// Everything works afterwards. (A fresh stream: an append the writer
	// gave up on when stop() cancelled it may still land in "s".)
	appendEvents(t, ctx, c, "after", "E", 2)
	got := read(t)(c.ReadStream(ctx, "after", kurrentdb.ReadStreamOptions{}, 10))
	if !slices.Equal(revisions(got), []uint64{0, 1}) {
		t.Fatalf("after the faults: revisions %v", revisions(got))
	}
}

// --- persistent subscriptions ---

func TestPersistent_create_update_info_delete(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	createGroup(t, ctx, c, "s", "g", kurrentdb.Start{}, settings(func(st *kurrentdb.PersistentSubscriptionSettings) { st.MaxRetryCount = 3 }))
	err := c.CreatePersistentSubscription(ctx, "s", "g", kurrentdb.PersistentStreamSubscriptionOptions{})
	if code, ok := errorCode(err); !ok || code != kurrentdb.ErrorCodeResourceAlreadyExists {
		t.Fatalf("second create: %v, want ErrorCodeResourceAlreadyExists", err)
	}
	info, err := c.GetPersistentSubscriptionInfo(ctx, "s", "g", kurrentdb.GetPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.EventSource != "s" || info.GroupName != "g" || info.Settings.MaxRetryCount != 3 || info.Settings.ConsumerStrategyName != kurrentdb.ConsumerStrategyRoundRobin {
		t.Fatalf("info = %+v settings %+v", info, info.Settings)
	}
	err = c.UpdatePersistentSubscription(ctx, "s", "g", kurrentdb.PersistentStreamSubscriptionOptions{StartFrom: kurrentdb.Start{},
		Settings: settings(func(st *kurrentdb.PersistentSubscriptionSettings) {
			st.ConsumerStrategyName = kurrentdb.ConsumerStrategyPinned
		})})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ListPersistentSubscriptionsForStream(ctx, "s", kurrentdb.ListPersistentSubscriptionsOptions{})
	if err != nil || len(list) != 1 || list[0].Settings.ConsumerStrategyName != kurrentdb.ConsumerStrategyPinned {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if err := c.DeletePersistentSubscription(ctx, "s", "g", kurrentdb.DeletePersistentSubscriptionOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetPersistentSubscriptionInfo(ctx, "s", "g", kurrentdb.GetPersistentSubscriptionOptions{})
	if code, ok := errorCode(err); !ok || code != kurrentdb.ErrorCodeResourceNotFound {
		t.Fatalf("info after delete: %v, want ErrorCodeResourceNotFound", err)
	}
	_, err = c.SubscribeToPersistentSubscription(ctx, "s", "g", kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if code, ok := errorCode(err); !ok || code != kurrentdb.ErrorCodeResourceNotFound {
		t.Fatalf("connect after delete: %v, want ErrorCodeResourceNotFound", err)
	}
}

// collect reads a persistent subscription in a goroutine, acking everything,
// and reports each message's revision on out until the subscription ends;
// cancel the subscription's context to end it. (Closing it instead would race
// with Ack: the client's Close calls CloseSend, which must not run
// concurrently with the Send of an Ack.)
func collect(t *testing.T, ctx context.Context, sub *kurrentdb.PersistentSubscription, out chan<- uint64, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			e := sub.Recv()
			if e.EventAppeared == nil {
				return
			}
			if err := sub.Ack(e.EventAppeared.Event); err != nil {
				if ctx.Err() == nil {
					t.Errorf("ack: %v", err)
				}
				return
			}
			out <- e.EventAppeared.Event.OriginalEvent().EventNumber
		}
	}()
}

func TestPersistent_two_consumers_share_the_events(t *testing.T) {
	tests := []struct {
		strategy kurrentdb.ConsumerStrategy
		buffer   uint32
		check    func(t *testing.T, a, b []uint64)
	}{
		// Room for everything: one dispatch pass alternates strictly.
		{kurrentdb.ConsumerStrategyRoundRobin, 20, func(t *testing.T, a, b []uint64) {
			if len(a) != 10 || len(b) != 10 {
				t.Errorf("round robin split %d/%d, want 10/10", len(a), len(b))
			}
		}},
		// The first consumer's buffer fills, the rest goes to the second.
		{kurrentdb.ConsumerStrategyDispatchToSingle, 5, func(t *testing.T, a, b []uint64) {
			if len(a) == 0 || len(b) == 0 {
				t.Errorf("dispatch to single split %d/%d, want both used", len(a), len(b))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.strategy), func(t *testing.T) {
			s := esdbtest.New(t)
			ctx := testCtx(t)
			c1, c2 := s.Client(t), s.Client(t)
			createGroup(t, ctx, c1, "s", "g", kurrentdb.Start{}, settings(func(st *kurrentdb.PersistentSubscriptionSettings) { st.ConsumerStrategyName = tt.strategy }))
			run, stop := context.WithCancel(ctx)
			defer stop()
			sub1 := connect(t, run, c1, "s", "g", tt.buffer)
			sub2 := connect(t, run, c2, "s", "g", tt.buffer)
			ch1, ch2 := make(chan uint64, 20), make(chan uint64, 20)
			var wg sync.WaitGroup
			t.Cleanup(wg.Wait) // before the subscriptions' Close, even on failure
			collect(t, run, sub1, ch1, &wg)
			collect(t, run, sub2, ch2, &wg)
			appendEvents(t, ctx, c1, "s", "E", 20)

			var a, b []uint64
			for len(a)+len(b) < 20 {
				select {
				case r := <-ch1:
					a = append(a, r)
				case r := <-ch2:
					b = append(b, r)
				case <-ctx.Done():
					t.Fatalf("got %v and %v before the deadline", a, b)
				}
			}
			stop()
			wg.Wait()
			union := slices.Sorted(slices.Values(append(slices.Clone(a), b...)))
			if want := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}; !slices.Equal(union, want) {
				t.Fatalf("together %v", union)
			}
			tt.check(t, a, b)
		})
	}
}

func TestPersistent_pinned_keeps_a_stream_on_one_consumer(t *testing.T) {
	s := esdbtest.New(t)
	ctx := testCtx(t)
	c1, c2 := s.Client(t), s.Client(t)
	// A group on $all sees events of many streams.
	err := c1.CreatePersistentSubscriptionToAll(ctx, "pinned", kurrentdb.PersistentAllSubscriptionOptions{
		StartFrom: kurrentdb.Start{},
		Filter:    &kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: []string{"cart-"}},
		Settings: settings(func(st *kurrentdb.PersistentSubscriptionSettings) {
			st.ConsumerStrategyName = kurrentdb.ConsumerStrategyPinned
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(ctx)
	defer stop()
	subs := []*kurrentdb.PersistentSubscription{}
	for _, c := range []*kurrentdb.Client{c1, c2} {
		sub, err := c.SubscribeToPersistentSubscriptionToAll(run, "pinned", kurrentdb.SubscribeToPersistentSubscriptionOptions{BufferSize: 50})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Close() })
		subs = append(subs, sub)
	}
	type got struct {
		consumer int
		stream   string
	}
	ch := make(chan got, 100)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // before the subscriptions' Close, even on failure
	for i, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				e := sub.Recv()
				if e.EventAppeared == nil {
					return
				}
				_ = sub.Ack(e.EventAppeared.Event)
				ch <- got{i, e.EventAppeared.Event.Event.StreamID}
			}
		}()
	}
	for i := range 8 {
		appendEvents(t, ctx, c1, fmt.Sprintf("cart-%d", i), "E", 3)
		appendEvents(t, ctx, c1, "noise", "N", 1)
	}
	owner := map[string]int{}
	for range 24 {
		select {
		case g := <-ch:
			if o, ok := owner[g.stream]; ok && o != g.consumer {
				t.Errorf("stream %s went to consumers %d and %d", g.stream, o, g.consumer)
			}
			owner[g.stream] = g.consumer
		case <-ctx.Done():
			t.Fatalf("timed out with %v", owner)
		}
	}
	stop() // not Close: see collect
	wg.Wait()
	if len(owner) != 8 {
		t.Errorf("streams seen: %v", owner)
	}
}

func TestPersistent_ack_advances_the_checkpoint_and_reconnect_continues(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "s", "E", 10)
	createGroup(t, ctx, c, "s", "g", kurrentdb.Start{}, nil)
	sub, err := c.SubscribeToPersistentSubscription(ctx, "s", "g", kurrentdb.SubscribeToPersistentSubscriptionOptions{BufferSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		m := nextPersistent(t, sub)
		if m.Event.OriginalEvent().EventNumber != uint64(i) {
			t.Fatalf("message %d is revision %d", i, m.Event.OriginalEvent().EventNumber)
		}
		if i < 5 {
			if err := sub.Ack(m.Event); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, ctx, func() bool { return s.Stats().Acks == 5 })
	info, err := c.GetPersistentSubscriptionInfo(ctx, "s", "g", kurrentdb.GetPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cp := info.Stats.LastCheckpointedEventRevision; cp == nil || *cp != 4 {
		t.Fatalf("checkpoint = %v, want 4", cp)
	}
	_ = sub.Close()

	again := connect(t, ctx, c, "s", "g", 10)
	for i := 5; i < 10; i++ {
		m := nextPersistent(t, again)
		if got := m.Event.OriginalEvent().EventNumber; got != uint64(i) || m.RetryCount != 1 {
			t.Fatalf("after reconnect: revision %d retry %d, want %d retry 1", got, m.RetryCount, i)
		}
		if err := again.Ack(m.Event); err != nil {
			t.Fatal(err)
		}
	}
	appendEvents(t, ctx, c, "s", "E", 1)
	if m := nextPersistent(t, again); m.Event.OriginalEvent().EventNumber != 10 || m.RetryCount != 0 {
		t.Fatalf("live: revision %d retry %d", m.Event.OriginalEvent().EventNumber, m.RetryCount)
	}
}

func TestPersistent_nack_actions(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "s", "E", 3)
	createGroup(t, ctx, c, "s", "g", kurrentdb.Start{}, nil)
	sub := connect(t, ctx, c, "s", "g", 1) // one in flight at a time: a deterministic order

	m := nextPersistent(t, sub)
	if err := sub.Nack("try again", kurrentdb.NackActionRetry, m.Event); err != nil {
		t.Fatal(err)
	}
	m = nextPersistent(t, sub)
	if m.Event.OriginalEvent().EventNumber != 0 || m.RetryCount != 1 {
		t.Fatalf("after retry: revision %d retry %d, want 0 retry 1", m.Event.OriginalEvent().EventNumber, m.RetryCount)
	}
	if err := sub.Nack("poison", kurrentdb.NackActionPark, m.Event); err != nil {
		t.Fatal(err)
	}
	m = nextPersistent(t, sub)
	if m.Event.OriginalEvent().EventNumber != 1 {
		t.Fatalf("after park: revision %d, want 1", m.Event.OriginalEvent().EventNumber)
	}
	if err := sub.Nack("not mine", kurrentdb.NackActionSkip, m.Event); err != nil {
		t.Fatal(err)
	}
	m = nextPersistent(t, sub)
	if m.Event.OriginalEvent().EventNumber != 2 || m.RetryCount != 0 {
		t.Fatalf("after skip: revision %d retry %d", m.Event.OriginalEvent().EventNumber, m.RetryCount)
	}
	if err := sub.Ack(m.Event); err != nil {
		t.Fatal(err)
	}

	waitFor(t, ctx, func() bool { return len(s.Parked("s", "g")) == 1 })
	p := s.Parked("s", "g")[0]
	original := read(t)(c.ReadStream(ctx, "s", kurrentdb.ReadStreamOptions{}, 1))[0].Event
	if p.Reason != "poison" || p.Stream != "s" || p.Revision != 0 || p.EventID != original.EventID.String() {
		t.Fatalf("parked %+v", p)
	}
	parked := read(t)(c.ReadStream(ctx, "$persistentsubscription-s::g-parked", kurrentdb.ReadStreamOptions{ResolveLinkTos: true}, 10))
	if len(parked) != 1 || parked[0].Link == nil || parked[0].Event.EventID != original.EventID {
		t.Fatalf("parked stream %+v", parked)
	}
	if !strings.Contains(string(parked[0].Link.UserMetadata), "poison") {
		t.Errorf("parked link metadata %s", parked[0].Link.UserMetadata)
	}
	// Parked, skipped and acked: the checkpoint is past all three.
	waitFor(t, ctx, func() bool {
		info, err := c.GetPersistentSubscriptionInfo(ctx, "s", "g", kurrentdb.GetPersistentSubscriptionOptions{})
		return err == nil && info.Stats.ParkedMessagesCount == 1 && info.Stats.LastCheckpointedEventRevision != nil && *info.Stats.LastCheckpointedEventRevision == 2
	})
	if st := s.Stats(); st.Nacks != 3 || st.Acks != 1 {
		t.Errorf("Stats = %+v, want 3 nacks and 1 ack", st)
	}

	// Replaying the parked message sends it again.
	if err := c.ReplayParkedMessages(ctx, "s", "g", kurrentdb.ReplayParkedMessagesOptions{}); err != nil {
		t.Fatal(err)
	}
	m = nextPersistent(t, sub)
	if m.Event.OriginalEvent().EventID != original.EventID {
		t.Fatalf("replayed %v", m.Event.OriginalEvent().EventID)
	}
	if len(s.Parked("s", "g")) != 0 {
		t.Errorf("still parked after replay: %v", s.Parked("s", "g"))
	}
}

func TestPersistent_nack_stop_ends_the_consumer(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "s", "E", 1)
	createGroup(t, ctx, c, "s", "g", kurrentdb.Start{}, nil)
	sub := connect(t, ctx, c, "s", "g", 10)
	m := nextPersistent(t, sub)
	if err := sub.Nack("stop", kurrentdb.NackActionStop, m.Event); err != nil {
		t.Fatal(err)
	}
	if e := sub.Recv(); e.SubscriptionDropped == nil {
		t.Fatalf("after stop: %+v, want dropped", e)
	}
	again := connect(t, ctx, c, "s", "g", 10)
	if m := nextPersistent(t, again); m.Event.OriginalEvent().EventNumber != 0 || m.RetryCount != 1 {
		t.Fatalf("redelivered revision %d retry %d", m.Event.OriginalEvent().EventNumber, m.RetryCount)
	}
}

func TestPersistent_message_timeout_redelivers_then_parks(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "s", "E", 1)
	createGroup(t, ctx, c, "s", "g", kurrentdb.Start{}, settings(func(st *kurrentdb.PersistentSubscriptionSettings) {
		st.MessageTimeout = 150
		st.MaxRetryCount = 2
	}))
	start := time.Now() // before the first delivery
	sub := connect(t, ctx, c, "s", "g", 10)
	for want := range 3 {
		m := nextPersistent(t, sub)
		if m.Event.OriginalEvent().EventNumber != 0 || m.RetryCount != want {
			t.Fatalf("delivery %d: revision %d retry %d", want, m.Event.OriginalEvent().EventNumber, m.RetryCount)
		}
	}
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Errorf("three deliveries in %v, want two timeouts of 150ms between them", elapsed)
	}
	waitFor(t, ctx, func() bool { return len(s.Parked("s", "g")) == 1 })
	if p := s.Parked("s", "g")[0]; p.Reason != "max retry count exceeded" {
		t.Fatalf("parked %+v", p)
	}
}

func TestPersistent_start_points(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "s", "E", 5)
	createGroup(t, ctx, c, "s", "at-3", kurrentdb.Revision(3), nil)
	createGroup(t, ctx, c, "s", "at-end", kurrentdb.End{}, nil)
	if m := nextPersistent(t, connect(t, ctx, c, "s", "at-3", 10)); m.Event.OriginalEvent().EventNumber != 3 {
		t.Fatalf("from revision 3: first revision %d", m.Event.OriginalEvent().EventNumber)
	}
	end := connect(t, ctx, c, "s", "at-end", 10)
	appendEvents(t, ctx, c, "s", "E", 1)
	if m := nextPersistent(t, end); m.Event.OriginalEvent().EventNumber != 5 {
		t.Fatalf("from end: first revision %d", m.Event.OriginalEvent().EventNumber)
	}
}

func TestPersistent_to_all_parks_with_the_all_stream_name(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "noise", "N", 2)
	appendEvents(t, ctx, c, "cart-1", "E", 1)
	err := c.CreatePersistentSubscriptionToAll(ctx, "g", kurrentdb.PersistentAllSubscriptionOptions{
		StartFrom: kurrentdb.Start{},
		Filter:    &kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: []string{"cart-"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.SubscribeToPersistentSubscriptionToAll(ctx, "g", kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	m := nextPersistent(t, sub)
	if m.Event.Event.StreamID != "cart-1" {
		t.Fatalf("first event from %s", m.Event.Event.StreamID)
	}
	if err := sub.Nack("bad cart", kurrentdb.NackActionPark, m.Event); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, func() bool { return len(s.Parked("$all", "g")) == 1 })
	parked := read(t)(c.ReadStream(ctx, "$persistentsubscription-$all::g-parked", kurrentdb.ReadStreamOptions{ResolveLinkTos: true}, 10))
	if len(parked) != 1 || parked[0].Event.StreamID != "cart-1" {
		t.Fatalf("parked stream %+v", parked)
	}
	info, err := c.GetPersistentSubscriptionInfoToAll(ctx, "g", kurrentdb.GetPersistentSubscriptionOptions{})
	if err != nil || info.EventSource != "$all" || info.Stats.LastCheckpointedPosition == nil {
		t.Fatalf("info %+v, %v", info, err)
	}
}

func TestClose_is_idempotent(t *testing.T) {
	s, err := esdbtest.Start(esdbtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close()
}

// waitFor polls cond until it holds or the context ends.
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not reached before the deadline")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// --- stream metadata, deletes, scavenge ---

// clock is a test's clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func setMetadata(t *testing.T, ctx context.Context, c *kurrentdb.Client, stream string, set func(*kurrentdb.StreamMetadata)) {
	t.Helper()
	var m kurrentdb.StreamMetadata
	set(&m)
	if _, err := c.SetStreamMetadata(ctx, stream, kurrentdb.AppendToStreamOptions{}, m); err != nil {
		t.Fatalf("set metadata of %s: %v", stream, err)
	}
}

// readErr reads a stream to its end and returns the error that ended it (nil
// at io.EOF) and the revisions read.
func readErr(ctx context.Context, c *kurrentdb.Client, stream string, opts kurrentdb.ReadStreamOptions) ([]uint64, error) {
	rs, err := c.ReadStream(ctx, stream, opts, 1000)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var revs []uint64
	for {
		e, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return revs, nil
		}
		if err != nil {
			return revs, err
		}
		revs = append(revs, e.OriginalEvent().EventNumber)
	}
}

// grpcStatus returns the gRPC status an error of the client wraps.
func grpcStatus(err error) *status.Status {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus()
	}
	return status.New(codes.Unknown, fmt.Sprint(err))
}

func wantCode(t *testing.T, what string, err error, want kurrentdb.ErrorCode) {
	t.Helper()
	if code, ok := errorCode(err); !ok || code != want {
		t.Fatalf("%s: err = %v, want error code %d", what, err, want)
	}
}

// allOf returns the revisions of one stream's events in $all.
func allOf(t *testing.T, ctx context.Context, c *kurrentdb.Client, stream string) []uint64 {
	t.Helper()
	var out []uint64
	for _, e := range read(t)(c.ReadAll(ctx, kurrentdb.ReadAllOptions{}, 10_000)) {
		if e.Event.StreamID == stream {
			out = append(out, e.Event.EventNumber)
		}
	}
	return out
}

func reversedRevs(revs []uint64) []uint64 {
	out := slices.Clone(revs)
	slices.Reverse(out)
	return out
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestMetadata_truncates_stream_reads_forwards_and_backwards(t *testing.T) {
	clk := newClock()
	s := esdbtest.NewWith(t, esdbtest.Options{Now: clk.now})
	c := s.Client(t)
	ctx := testCtx(t)
	tests := []struct {
		name string
		set  func(*kurrentdb.StreamMetadata)
		want []uint64 // forwards from the start, of 10 events
	}{
		{"maxCount", func(m *kurrentdb.StreamMetadata) { m.SetMaxCount(3) }, seq(7, 9)},
		{"tb", func(m *kurrentdb.StreamMetadata) { m.SetTruncateBefore(6) }, seq(6, 9)},
		{"the higher of tb and maxCount", func(m *kurrentdb.StreamMetadata) { m.SetTruncateBefore(2); m.SetMaxCount(3) }, seq(7, 9)},
		{"maxAge", func(m *kurrentdb.StreamMetadata) { m.SetMaxAge(time.Hour) }, seq(5, 9)},
		{"tb past the end reads empty, not not found", func(m *kurrentdb.StreamMetadata) { m.SetTruncateBefore(20) }, nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := fmt.Sprintf("meta-%d", i)
			appendEvents(t, ctx, c, stream, "E", 5)
			clk.advance(2 * time.Hour) // events 0-4 are two hours old
			appendEvents(t, ctx, c, stream, "E", 5)
			setMetadata(t, ctx, c, stream, tt.set)

			got, err := readErr(ctx, c, stream, kurrentdb.ReadStreamOptions{})
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("forwards: %v, %v; want %v", got, err, tt.want)
			}
			got, err = readErr(ctx, c, stream, kurrentdb.ReadStreamOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}})
			if want := reversedRevs(tt.want); err != nil || !slices.Equal(got, want) {
				t.Fatalf("backwards: %v, %v; want the reverse of %v", got, err, tt.want)
			}
			got, err = readErr(ctx, c, stream, kurrentdb.ReadStreamOptions{From: kurrentdb.Revision(8)})
			if wantFrom8 := slices.DeleteFunc(slices.Clone(tt.want), func(r uint64) bool { return r < 8 }); err != nil || !slices.Equal(got, wantFrom8) {
				t.Fatalf("forwards from 8: %v, %v; want %v", got, err, wantFrom8)
			}
			meta, err := c.GetStreamMetadata(ctx, stream, kurrentdb.ReadStreamOptions{})
			var want kurrentdb.StreamMetadata
			tt.set(&want)
			if err != nil || !reflectEqualMeta(meta, &want) {
				t.Fatalf("GetStreamMetadata = %+v, %v; want %+v", meta, err, want)
			}
			// $all still has them all.
			if got := allOf(t, ctx, c, stream); !slices.Equal(got, seq(0, 9)) {
				t.Fatalf("$all has %v", got)
			}
		})
	}
}

func reflectEqualMeta(a, b *kurrentdb.StreamMetadata) bool {
	ja, err1 := a.ToJson()
	jb, err2 := b.ToJson()
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func TestMetadata_catch_up_subscription_skips_truncated_events_then_goes_live(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "s", "E", 10)
	setMetadata(t, ctx, c, "s", func(m *kurrentdb.StreamMetadata) { m.SetMaxCount(3) })
	for _, from := range []kurrentdb.StreamPosition{kurrentdb.Start{}, kurrentdb.Revision(2)} {
		sub, err := c.SubscribeToStream(ctx, "s", kurrentdb.SubscribeToStreamOptions{From: from})
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for {
			e := next(t, sub)
			if caughtUp(e) {
				break
			}
			got = append(got, e.EventAppeared.Event.EventNumber)
		}
		_ = sub.Close()
		if !slices.Equal(got, seq(7, 9)) {
			t.Fatalf("from %v: %v, want 7-9", from, got)
		}
	}
	// Reading $all and subscribing to it see the truncated events until a
	// scavenge.
	if got := allOf(t, ctx, c, "s"); !slices.Equal(got, seq(0, 9)) {
		t.Fatalf("$all before scavenge: %v", got)
	}
	if n := s.Scavenge(); n != 7 {
		t.Fatalf("Scavenge removed %d, want 7", n)
	}
	if got := allOf(t, ctx, c, "s"); !slices.Equal(got, seq(7, 9)) {
		t.Fatalf("$all after scavenge: %v", got)
	}
	sub, err := c.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{From: kurrentdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []uint64
	for {
		e := next(t, sub)
		if caughtUp(e) {
			break
		}
		if e.EventAppeared.Event.StreamID == "s" {
			got = append(got, e.EventAppeared.Event.EventNumber)
		}
	}
	if !slices.Equal(got, seq(7, 9)) {
		t.Fatalf("$all subscription after scavenge: %v", got)
	}
	if got, err := readErr(ctx, c, "s", kurrentdb.ReadStreamOptions{}); err != nil || !slices.Equal(got, seq(7, 9)) {
		t.Fatalf("stream read after scavenge: %v, %v", got, err)
	}
}

func TestMetadata_that_does_not_parse_is_no_metadata(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	for i, data := range []string{
		`{"$maxCount": 2.0}`,          // not an integer: the node drops it all
		`{"$maxCount": 2, "$acl": 1}`, // a bad $acl: likewise
		`not json`,
	} {
		stream := fmt.Sprintf("bad-%d", i)
		appendEvents(t, ctx, c, stream, "E", 3)
		if _, err := c.AppendToStream(ctx, "$$"+stream, kurrentdb.AppendToStreamOptions{}, event("$metadata", data)); err != nil {
			t.Fatal(err)
		}
		if got, err := readErr(ctx, c, stream, kurrentdb.ReadStreamOptions{}); err != nil || !slices.Equal(got, seq(0, 2)) {
			t.Fatalf("%s: %v, %v", data, got, err)
		}
	}
	// A $maxCount of 0 alone is ignored; the rest applies.
	appendEvents(t, ctx, c, "zero", "E", 3)
	if _, err := c.AppendToStream(ctx, "$$zero", kurrentdb.AppendToStreamOptions{}, event("$metadata", `{"$maxCount":0,"$tb":1}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := readErr(ctx, c, "zero", kurrentdb.ReadStreamOptions{}); err != nil || !slices.Equal(got, seq(1, 2)) {
		t.Fatalf("zero: %v, %v", got, err)
	}
}

func TestScavenge_keeps_the_last_event_of_each_stream(t *testing.T) {
	clk := newClock()
	s := esdbtest.NewWith(t, esdbtest.Options{Now: clk.now})
	c := s.Client(t)
	ctx := testCtx(t)
	for _, stream := range []string{"soft", "hard", "aged", "plain"} {
		appendEvents(t, ctx, c, stream, "E", 3)
	}
	if _, err := c.DeleteStream(ctx, "soft", kurrentdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	setMetadata(t, ctx, c, "hard", func(m *kurrentdb.StreamMetadata) { m.SetMaxCount(2) })
	if _, err := c.TombstoneStream(ctx, "hard", kurrentdb.TombstoneStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	setMetadata(t, ctx, c, "aged", func(m *kurrentdb.StreamMetadata) { m.SetMaxCount(10) })
	setMetadata(t, ctx, c, "aged", func(m *kurrentdb.StreamMetadata) { m.SetMaxAge(time.Minute) })
	clk.advance(time.Hour)
	before := esdbtest.Len(s)
	removed := s.Scavenge()
	want := map[string][]uint64{
		"soft":   {2},             // its last event stays
		"$$soft": {0},             // the soft delete's metadata
		"hard":   {math.MaxInt64}, // only the tombstone
		"$$hard": nil,             // gone with its tombstoned stream
		"aged":   {2},             // all too old but the last
		"$$aged": {1},             // only the last metadata
		"plain":  {0, 1, 2},       // no metadata: kept
	}
	for stream, revs := range want {
		if got := allOf(t, ctx, c, stream); !slices.Equal(got, revs) {
			t.Errorf("$all of %s after scavenge: %v, want %v", stream, got, revs)
		}
	}
	if removed != 2+3+1+2+1 || esdbtest.Len(s) != before-removed {
		t.Errorf("removed %d, Len %d -> %d", removed, before, esdbtest.Len(s))
	}
	if n := s.Scavenge(); n != 0 {
		t.Errorf("second scavenge removed %d", n)
	}
}

func TestDeleteStream_soft_delete_reads_not_found_and_an_append_continues_the_revisions(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "cart-1", "E", 3)
	res, err := c.DeleteStream(ctx, "cart-1", kurrentdb.DeleteStreamOptions{StreamState: kurrentdb.Revision(2)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Position.Commit != s.Head() {
		t.Errorf("delete position %d, want the head %d", res.Position.Commit, s.Head())
	}
	_, err = readErr(ctx, c, "cart-1", kurrentdb.ReadStreamOptions{})
	wantCode(t, "read after delete", err, kurrentdb.ErrorCodeResourceNotFound)
	// What the node writes: metadata with $tb = long.MaxValue.
	last := read(t)(c.ReadAll(ctx, kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, 1))[0].Event
	if last.StreamID != "$$cart-1" || last.EventType != "$metadata" || last.EventNumber != 0 ||
		string(last.Data) != `{"$tb":9223372036854775807}` || last.ContentType != "application/json" {
		t.Fatalf("last event of $all: %s/%d %s %s %s", last.StreamID, last.EventNumber, last.EventType, last.ContentType, last.Data)
	}
	if meta, err := c.GetStreamMetadata(ctx, "cart-1", kurrentdb.ReadStreamOptions{}); err != nil || meta.TruncateBefore() == nil || *meta.TruncateBefore() < math.MaxInt64 {
		t.Fatalf("GetStreamMetadata = %+v, %v", meta, err)
	}
	// $all still has the events.
	if got := allOf(t, ctx, c, "cart-1"); !slices.Equal(got, seq(0, 2)) {
		t.Fatalf("$all: %v", got)
	}

	sub, err := c.SubscribeToStream(ctx, "cart-1", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if e := next(t, sub); !caughtUp(e) {
		t.Fatalf("subscription to a soft-deleted stream: %+v, want CaughtUp", e)
	}

	// An append with NoStream writes it again, after the old revisions.
	again, err := c.AppendToStream(ctx, "cart-1", kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.NoStream{}}, event("E", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if again.NextExpectedVersion != 3 {
		t.Fatalf("NextExpectedVersion = %d, want 3", again.NextExpectedVersion)
	}
	if got, err := readErr(ctx, c, "cart-1", kurrentdb.ReadStreamOptions{}); err != nil || !slices.Equal(got, []uint64{3}) {
		t.Fatalf("read after recreation: %v, %v", got, err)
	}
	if e := nextEvent(t, sub); e.Event.EventNumber != 3 {
		t.Fatalf("live event %d, want 3", e.Event.EventNumber)
	}
	// ... and the node writes the metadata that hides the old events.
	tail := read(t)(c.ReadAll(ctx, kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, 2))
	if tail[0].Event.StreamID != "$$cart-1" || string(tail[0].Event.Data) != `{"$tb":3}` || tail[0].Event.EventNumber != 1 ||
		tail[1].Event.StreamID != "cart-1" || tail[1].Event.EventNumber != 3 {
		t.Fatalf("tail of $all: %s/%d %s, %s/%d", tail[0].Event.StreamID, tail[0].Event.EventNumber, tail[0].Event.Data,
			tail[1].Event.StreamID, tail[1].Event.EventNumber)
	}
}

func TestDeleteStream_expected_revisions_on_deleted_streams(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	softDeleted := func(t *testing.T, stream string) {
		t.Helper()
		appendEvents(t, ctx, c, stream, "E", 3)
		if _, err := c.DeleteStream(ctx, stream, kurrentdb.DeleteStreamOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	appendTo := func(stream string, exp kurrentdb.StreamState) (*kurrentdb.WriteResult, error) {
		return c.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{StreamState: exp}, event("E", `{}`))
	}
	tests := []struct {
		name string
		run  func(t *testing.T, stream string)
	}{
		{"append any continues", func(t *testing.T, stream string) {
			softDeleted(t, stream)
			if res, err := appendTo(stream, kurrentdb.Any{}); err != nil || res.NextExpectedVersion != 3 {
				t.Fatalf("%+v, %v", res, err)
			}
		}},
		{"append at the last revision before the delete continues", func(t *testing.T, stream string) {
			softDeleted(t, stream)
			if res, err := appendTo(stream, kurrentdb.Revision(2)); err != nil || res.NextExpectedVersion != 3 {
				t.Fatalf("%+v, %v", res, err)
			}
		}},
		{"append at another revision is a wrong expected version at the old last", func(t *testing.T, stream string) {
			softDeleted(t, stream)
			_, err := appendTo(stream, kurrentdb.Revision(0))
			wantCode(t, "append", err, kurrentdb.ErrorCodeWrongExpectedVersion)
		}},
		{"append with stream exists is stream deleted", func(t *testing.T, stream string) {
			softDeleted(t, stream)
			_, err := appendTo(stream, kurrentdb.StreamExists{})
			wantCode(t, "append", err, kurrentdb.ErrorCodeStreamDeleted)
		}},
		{"delete again with any", func(t *testing.T, stream string) {
			softDeleted(t, stream)
			if _, err := c.DeleteStream(ctx, stream, kurrentdb.DeleteStreamOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"delete again with stream exists is stream deleted", func(t *testing.T, stream string) {
			softDeleted(t, stream)
			_, err := c.DeleteStream(ctx, stream, kurrentdb.DeleteStreamOptions{StreamState: kurrentdb.StreamExists{}})
			wantCode(t, "delete", err, kurrentdb.ErrorCodeStreamDeleted)
		}},
		{"delete a missing stream is a wrong expected version the client cannot name", func(t *testing.T, stream string) {
			_, err := c.DeleteStream(ctx, stream, kurrentdb.DeleteStreamOptions{})
			wantCode(t, "delete", err, kurrentdb.ErrorCodeUnknown)
			st := grpcStatus(err)
			want := "Delete failed due to WrongExpectedVersion. Stream: " + stream + ", Expected version: -2, Actual version: -1"
			if st.Code() != codes.FailedPrecondition || st.Message() != want {
				t.Fatalf("status %v %q, want FailedPrecondition %q", st.Code(), st.Message(), want)
			}
		}},
		{"delete at a wrong revision", func(t *testing.T, stream string) {
			appendEvents(t, ctx, c, stream, "E", 3)
			_, err := c.DeleteStream(ctx, stream, kurrentdb.DeleteStreamOptions{StreamState: kurrentdb.Revision(1)})
			if st := grpcStatus(err); !strings.Contains(st.Message(), "Expected version: 1, Actual version: 2") {
				t.Fatalf("err = %v", err)
			}
		}},
		{"metadata written to a soft-deleted stream recreates it", func(t *testing.T, stream string) {
			softDeleted(t, stream)
			setMetadata(t, ctx, c, stream, func(m *kurrentdb.StreamMetadata) { m.SetMaxCount(10) })
			got, err := readErr(ctx, c, stream, kurrentdb.ReadStreamOptions{})
			if err != nil || len(got) != 0 {
				t.Fatalf("read: %v, %v; want an empty stream", got, err)
			}
			meta, err := c.GetStreamMetadata(ctx, stream, kurrentdb.ReadStreamOptions{})
			if err != nil || meta.TruncateBefore() == nil || *meta.TruncateBefore() != 3 || *meta.MaxCount() != 10 {
				t.Fatalf("metadata %+v, %v; want $maxCount 10 and $tb 3", meta, err)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, fmt.Sprintf("del-%d", i)) })
	}
}

func TestTombstoneStream_deletes_for_good(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "cart-1", "E", 3)
	setMetadata(t, ctx, c, "cart-1", func(m *kurrentdb.StreamMetadata) { m.SetMaxCount(5) })
	res, err := c.TombstoneStream(ctx, "cart-1", kurrentdb.TombstoneStreamOptions{StreamState: kurrentdb.StreamExists{}})
	if err != nil {
		t.Fatal(err)
	}
	tomb := read(t)(c.ReadAll(ctx, kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, 1))[0].Event
	if tomb.StreamID != "cart-1" || tomb.EventType != "$streamDeleted" || tomb.EventNumber != math.MaxInt64 ||
		len(tomb.Data) != 0 || tomb.ContentType != "application/octet-stream" || tomb.Position.Commit != res.Position.Commit {
		t.Fatalf("tombstone in $all: %s/%d %s %s %q at %d", tomb.StreamID, tomb.EventNumber, tomb.EventType, tomb.ContentType, tomb.Data, tomb.Position.Commit)
	}
	_, err = readErr(ctx, c, "cart-1", kurrentdb.ReadStreamOptions{})
	wantCode(t, "read", err, kurrentdb.ErrorCodeStreamDeleted)
	_, err = readErr(ctx, c, "$$cart-1", kurrentdb.ReadStreamOptions{})
	wantCode(t, "read metadata stream", err, kurrentdb.ErrorCodeStreamDeleted)
	for _, exp := range []kurrentdb.StreamState{kurrentdb.Any{}, kurrentdb.NoStream{}, kurrentdb.Revision(2)} {
		_, err = c.AppendToStream(ctx, "cart-1", kurrentdb.AppendToStreamOptions{StreamState: exp}, event("E", `{}`))
		wantCode(t, fmt.Sprintf("append %T", exp), err, kurrentdb.ErrorCodeStreamDeleted)
	}
	_, err = c.SetStreamMetadata(ctx, "cart-1", kurrentdb.AppendToStreamOptions{}, kurrentdb.StreamMetadata{})
	wantCode(t, "set metadata", err, kurrentdb.ErrorCodeStreamDeleted)
	_, err = c.DeleteStream(ctx, "cart-1", kurrentdb.DeleteStreamOptions{})
	wantCode(t, "soft delete", err, kurrentdb.ErrorCodeStreamDeleted)
	_, err = c.TombstoneStream(ctx, "cart-1", kurrentdb.TombstoneStreamOptions{})
	wantCode(t, "tombstone again", err, kurrentdb.ErrorCodeStreamDeleted)
	// A stream that never was can be tombstoned.
	if _, err := c.TombstoneStream(ctx, "never", kurrentdb.TombstoneStreamOptions{StreamState: kurrentdb.NoStream{}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.TombstoneStream(ctx, "cart-2", kurrentdb.TombstoneStreamOptions{StreamState: kurrentdb.Revision(0)})
	wantCode(t, "tombstone a missing stream at a revision", err, kurrentdb.ErrorCodeUnknown)
}

func TestTombstoneStream_ends_and_refuses_subscriptions(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "cart-1", "E", 2)
	sub, err := c.SubscribeToStream(ctx, "cart-1", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	all, err := c.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{From: kurrentdb.End{}})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	for range 2 {
		nextEvent(t, sub)
	}
	if e := next(t, sub); !caughtUp(e) {
		t.Fatalf("%+v, want CaughtUp", e)
	}
	if _, err := c.TombstoneStream(ctx, "cart-1", kurrentdb.TombstoneStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	// A live subscription gets the tombstone, then ends with StreamDeleted.
	if e := nextEvent(t, sub); e.Event.EventType != "$streamDeleted" || e.Event.EventNumber != math.MaxInt64 {
		t.Fatalf("live: %s %d", e.Event.EventType, e.Event.EventNumber)
	}
	e := sub.Recv()
	if e.SubscriptionDropped == nil {
		t.Fatalf("after the tombstone: %+v, want a drop", e)
	}
	if st := grpcStatus(e.SubscriptionDropped.Error); st.Code() != codes.FailedPrecondition || st.Message() != "Event stream 'cart-1' is deleted." {
		t.Fatalf("drop error %v", e.SubscriptionDropped.Error)
	}
	// $all shows it like any event.
	if e := nextEvent(t, all); e.Event.EventType != "$streamDeleted" || e.Event.StreamID != "cart-1" {
		t.Fatalf("$all: %s %s", e.Event.StreamID, e.Event.EventType)
	}
	// Subscribing to it again is refused (23.10 refuses before the
	// confirmation)...
	for _, from := range []kurrentdb.StreamPosition{kurrentdb.Start{}, kurrentdb.Revision(0)} {
		_, err = c.SubscribeToStream(ctx, "cart-1", kurrentdb.SubscribeToStreamOptions{From: from})
		wantCode(t, fmt.Sprintf("subscribe from %T", from), err, kurrentdb.ErrorCodeStreamDeleted)
	}
	// ... except from the end, which is live only: CaughtUp, then nothing.
	end, err := c.SubscribeToStream(ctx, "cart-1", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.End{}})
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()
	if e := next(t, end); !caughtUp(e) {
		t.Fatalf("from the end: %+v, want CaughtUp", e)
	}
}

// --- system projections and links ---

// linkMeta decodes a link's metadata.
func linkMeta(t *testing.T, e *kurrentdb.RecordedEvent) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.UserMetadata, &m); err != nil {
		t.Fatalf("link metadata %q: %v", e.UserMetadata, err)
	}
	return m
}

func TestSystemProjections_link_categories_and_event_types(t *testing.T) {
	s := esdbtest.NewWith(t, esdbtest.Options{SystemProjections: true})
	c := s.Client(t)
	ctx := testCtx(t)
	opened := event("CartOpened", `{}`)
	opened.Metadata = []byte(`{"$correlationId":"req-1"}`)
	if _, err := c.AppendToStream(ctx, "cart-1", kurrentdb.AppendToStreamOptions{}, opened, event("ItemAdded", `{}`)); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, ctx, c, "cart-2", "CartOpened", 1)
	appendEvents(t, ctx, c, "orders", "OrderPlaced", 1) // no "-": no category
	pos := positionsOf(t, ctx, c)
	ids := map[string]string{}
	for _, e := range read(t)(c.ReadAll(ctx, kurrentdb.ReadAllOptions{}, 100)) {
		ids[fmt.Sprintf("%s/%d", e.Event.StreamID, e.Event.EventNumber)] = e.Event.EventID.String()
	}

	links := read(t)(c.ReadStream(ctx, "$ce-cart", kurrentdb.ReadStreamOptions{}, 10))
	var data []string
	for _, l := range links {
		data = append(data, string(l.Event.Data))
		if l.Event.EventType != "$>" || l.Event.ContentType != "application/octet-stream" {
			t.Errorf("link %s %s", l.Event.EventType, l.Event.ContentType)
		}
	}
	if want := []string{"0@cart-1", "1@cart-1", "0@cart-2"}; !slices.Equal(data, want) {
		t.Fatalf("$ce-cart: %v, want %v", data, want)
	}
	m := linkMeta(t, links[0].Event)
	want := map[string]any{"$v": "3:-1:1:4", "$c": float64(pos["cart-1/0"]), "$p": float64(pos["cart-1/0"]),
		"$o": "cart-1", "$causedBy": ids["cart-1/0"], "$correlationId": "req-1"}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Errorf("$ce-cart link metadata %v, want %v", m, want)
	}
	acl := read(t)(c.ReadStream(ctx, "$$$ce-cart", kurrentdb.ReadStreamOptions{}, 10))
	if len(acl) != 1 || string(acl[0].Event.Data) != `{"$acl":{"$r":"$all","$mr":"$all"}}` {
		t.Errorf("$$$ce-cart: %v", acl)
	}

	types := read(t)(c.ReadStream(ctx, "$et-CartOpened", kurrentdb.ReadStreamOptions{ResolveLinkTos: true}, 10))
	if len(types) != 2 || types[0].Event.StreamID != "cart-1" || types[1].Event.StreamID != "cart-2" || types[0].Link.StreamID != "$et-CartOpened" {
		t.Fatalf("$et-CartOpened: %+v", types)
	}
	m = linkMeta(t, types[1].Link)
	want = map[string]any{"$v": "4:-1:1:4", "$c": float64(pos["cart-2/0"]), "$p": float64(pos["cart-2/0"]), "$causedBy": ids["cart-2/0"]}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Errorf("$et-CartOpened link metadata %v, want %v", m, want)
	}
	if _, err := readErr(ctx, c, "$et-OrderPlaced", kurrentdb.ReadStreamOptions{}); err != nil {
		t.Errorf("$et-OrderPlaced: %v", err)
	}
	_, err := readErr(ctx, c, "$ce-orders", kurrentdb.ReadStreamOptions{})
	wantCode(t, "$ce-orders", err, kurrentdb.ErrorCodeResourceNotFound)

	// A catch-up subscription to a category resolves the links, then goes
	// live.
	sub, err := c.SubscribeToStream(ctx, "$ce-cart", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}, ResolveLinkTos: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []string
	for {
		e := next(t, sub)
		if caughtUp(e) {
			break
		}
		got = append(got, fmt.Sprintf("%s/%d", e.EventAppeared.Event.StreamID, e.EventAppeared.Event.EventNumber))
	}
	if want := []string{"cart-1/0", "cart-1/1", "cart-2/0"}; !slices.Equal(got, want) {
		t.Fatalf("catch-up: %v", got)
	}
	appendEvents(t, ctx, c, "cart-3", "CartOpened", 1)
	if e := nextEvent(t, sub); e.Event.StreamID != "cart-3" || e.Link == nil || e.Link.EventNumber != 3 {
		t.Fatalf("live: %+v", e)
	}

	// Without the option there are no such streams.
	plain := esdbtest.New(t)
	pc := plain.Client(t)
	appendEvents(t, ctx, pc, "cart-1", "CartOpened", 1)
	_, err = readErr(ctx, pc, "$ce-cart", kurrentdb.ReadStreamOptions{})
	wantCode(t, "without projections", err, kurrentdb.ErrorCodeResourceNotFound)
}

func TestSystemProjections_link_deletions_as_the_node_does(t *testing.T) {
	s := esdbtest.NewWith(t, esdbtest.Options{SystemProjections: true})
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "cart-1", "E", 1)
	appendEvents(t, ctx, c, "cart-2", "E", 1)
	if _, err := c.DeleteStream(ctx, "cart-1", kurrentdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TombstoneStream(ctx, "cart-2", kurrentdb.TombstoneStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	dataOf := func(stream string) []string {
		var out []string
		for _, l := range read(t)(c.ReadStream(ctx, stream, kurrentdb.ReadStreamOptions{}, 10)) {
			out = append(out, string(l.Event.Data))
		}
		return out
	}
	// The soft delete's metadata is categorized under the stream it
	// deletes, and links to itself; the tombstone links to its revision.
	if got, want := dataOf("$ce-cart"), []string{"0@cart-1", "0@cart-2", "0@$$cart-1", "9223372036854775807@cart-2"}; !slices.Equal(got, want) {
		t.Fatalf("$ce-cart: %v, want %v", got, want)
	}
	// By type, both are "$deleted", and name the deleted stream.
	if got, want := dataOf("$et-$deleted"), []string{"0@cart-1", "9223372036854775807@cart-2"}; !slices.Equal(got, want) {
		t.Fatalf("$et-$deleted: %v, want %v", got, want)
	}
	ce := read(t)(c.ReadStream(ctx, "$ce-cart", kurrentdb.ReadStreamOptions{ResolveLinkTos: true}, 10))
	if m := linkMeta(t, ce[2].Link); m["$deleted"] != float64(-1) || m["$o"] != "cart-1" {
		t.Errorf("soft delete link metadata %v", m)
	}
	// Resolved: the deleted events are gone (dangling links), the soft
	// delete's link resolves to the metadata event.
	for i, want := range []string{"", "", "$$cart-1/0", ""} {
		got := ""
		if ce[i].Event != nil {
			got = fmt.Sprintf("%s/%d", ce[i].Event.StreamID, ce[i].Event.EventNumber)
		}
		if got != want || ce[i].Link == nil {
			t.Errorf("$ce-cart link %d resolves to %q, want %q", i, got, want)
		}
	}
}

func TestResolveLinks_a_dangling_link_comes_without_its_event(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "kept", "E", 1)
	appendEvents(t, ctx, c, "truncated", "E", 2)
	setMetadata(t, ctx, c, "truncated", func(m *kurrentdb.StreamMetadata) { m.SetTruncateBefore(1) })
	appendEvents(t, ctx, c, "soft", "E", 1)
	appendEvents(t, ctx, c, "hard", "E", 1)
	if _, err := c.DeleteStream(ctx, "soft", kurrentdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TombstoneStream(ctx, "hard", kurrentdb.TombstoneStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	targets := []struct {
		data     string
		dangling bool
		asEvent  bool // the revision does not parse: the link is sent as an event
	}{
		{"0@kept", false, false},
		{"0@truncated", true, false},
		{"1@truncated", false, false},
		{"0@soft", true, false},
		{"0@hard", true, false},
		{"0@missing", true, false},
		{"5", true, false},
		{"x@kept", false, true},
	}
	var links []kurrentdb.EventData
	for _, tt := range targets {
		links = append(links, kurrentdb.EventData{EventType: "$>", ContentType: kurrentdb.ContentTypeBinary, Data: []byte(tt.data)})
	}
	if _, err := c.AppendToStream(ctx, "links", kurrentdb.AppendToStreamOptions{}, links...); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, how string, got []*kurrentdb.ResolvedEvent) {
		t.Helper()
		if len(got) != len(targets) {
			t.Fatalf("%s: %d events", how, len(got))
		}
		for i, tt := range targets {
			e := got[i]
			switch {
			case tt.asEvent:
				if e.Link != nil || e.Event == nil || e.Event.EventType != "$>" {
					t.Errorf("%s: %s: %+v, want the link as the event", how, tt.data, e)
				}
			case tt.dangling:
				if e.Event != nil || e.Link == nil || string(e.Link.Data) != tt.data || e.OriginalEvent() != e.Link {
					t.Errorf("%s: %s: %+v, want Event nil and the link", how, tt.data, e)
				}
			default:
				if e.Event == nil || e.Link == nil || e.Event.StreamID == "links" {
					t.Errorf("%s: %s: %+v, want the event and the link", how, tt.data, e)
				}
			}
		}
	}
	check(t, "read", read(t)(c.ReadStream(ctx, "links", kurrentdb.ReadStreamOptions{ResolveLinkTos: true}, 100)))
	sub, err := c.SubscribeToStream(ctx, "links", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}, ResolveLinkTos: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []*kurrentdb.ResolvedEvent
	for range targets {
		got = append(got, nextEvent(t, sub))
	}
	check(t, "subscription", got)
	s.Scavenge()
	check(t, "read after scavenge", read(t)(c.ReadStream(ctx, "links", kurrentdb.ReadStreamOptions{ResolveLinkTos: true}, 100)))
}

// --- $all and the node's own streams ---

func TestRead_all_leaves_out_the_parked_messages_of_groups_on_all(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "cart-1", "E", 1)
	if err := c.CreatePersistentSubscriptionToAll(ctx, "g", kurrentdb.PersistentAllSubscriptionOptions{StartFrom: kurrentdb.Start{}}); err != nil {
		t.Fatal(err)
	}
	sub, err := c.SubscribeToPersistentSubscriptionToAll(ctx, "g", kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Nack("bad", kurrentdb.NackActionPark, nextPersistent(t, sub).Event); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, func() bool { return len(s.Parked("$all", "g")) == 1 })
	for _, e := range read(t)(c.ReadAll(ctx, kurrentdb.ReadAllOptions{}, 100)) {
		if strings.HasPrefix(e.Event.StreamID, "$persistentsubscription-$all::") {
			t.Fatalf("$all shows %s", e.Event.StreamID)
		}
	}
	if got := read(t)(c.ReadStream(ctx, "$persistentsubscription-$all::g-parked", kurrentdb.ReadStreamOptions{}, 10)); len(got) != 1 {
		t.Fatalf("parked stream: %d events", len(got))
	}
}

// --- authentication ---

func TestAuth_credentials_and_the_node_default_access_rules(t *testing.T) {
	users := append(esdbtest.DefaultUsers(), esdbtest.User{Name: "alice", Password: "secret"})
	s := esdbtest.NewWith(t, esdbtest.Options{Users: users})
	if !strings.Contains(s.URI(), "tls=true") {
		t.Fatalf("URI %s: credentials go only over TLS", s.URI())
	}
	ctx := testCtx(t)
	anon := s.Client(t)
	admin := esdbtest.ClientAs(s, t, "admin", "changeit")
	ops := esdbtest.ClientAs(s, t, "ops", "changeit")
	alice := esdbtest.ClientAs(s, t, "alice", "secret")
	wrong := esdbtest.ClientAs(s, t, "alice", "wrong")
	appendTo := func(c *kurrentdb.Client, stream string) error {
		_, err := c.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{}, event("E", `{}`))
		return err
	}
	readAll := func(c *kurrentdb.Client) error {
		rs, err := c.ReadAll(ctx, kurrentdb.ReadAllOptions{}, 10)
		if err != nil {
			return err
		}
		defer rs.Close()
		_, err = rs.Recv()
		return err
	}
	subscribeAll := func(c *kurrentdb.Client) error {
		sub, err := c.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{From: kurrentdb.Start{}})
		if err == nil {
			_ = sub.Close()
		}
		return err
	}
	createGroup := func(c *kurrentdb.Client, group string) error {
		return c.CreatePersistentSubscription(ctx, "cart-1", group, kurrentdb.PersistentStreamSubscriptionOptions{StartFrom: kurrentdb.Start{}})
	}

	// Credentials that match no user: refused before anything else.
	wantCode(t, "wrong password append", appendTo(wrong, "cart-1"), kurrentdb.ErrorCodeUnauthenticated)
	wantCode(t, "wrong password read", readAll(wrong), kurrentdb.ErrorCodeUnauthenticated)
	if st := grpcStatus(appendTo(wrong, "cart-1")); st.Code() != codes.Unauthenticated || st.Message() != "Unauthenticated" {
		t.Errorf("wrong password: %v %q", st.Code(), st.Message())
	}
	// No credentials: the anonymous user, who may do nothing with streams.
	err := appendTo(anon, "cart-1")
	wantCode(t, "anonymous append", err, kurrentdb.ErrorCodeAccessDenied)
	if st := grpcStatus(err); st.Code() != codes.PermissionDenied || st.Message() != "Access Denied" {
		t.Errorf("anonymous: %v %q", st.Code(), st.Message())
	}
	wantCode(t, "anonymous read", readAll(anon), kurrentdb.ErrorCodeAccessDenied)
	// ... unless a call carries credentials.
	if _, err := anon.AppendToStream(ctx, "cart-1", kurrentdb.AppendToStreamOptions{Authenticated: &kurrentdb.Credentials{Login: "alice", Password: "secret"}}, event("E", `{}`)); err != nil {
		t.Fatalf("append with the call's credentials: %v", err)
	}

	// A user: streams yes (the default ACL of user streams is every user),
	// $all and system streams no (only $admins), managing groups no.
	if err := appendTo(alice, "cart-1"); err != nil {
		t.Fatalf("alice append: %v", err)
	}
	if _, err := readErr(ctx, alice, "cart-1", kurrentdb.ReadStreamOptions{}); err != nil {
		t.Fatalf("alice read: %v", err)
	}
	setMetadata(t, ctx, alice, "cart-1", func(m *kurrentdb.StreamMetadata) { m.SetMaxCount(100) })
	wantCode(t, "alice reads $all", readAll(alice), kurrentdb.ErrorCodeAccessDenied)
	wantCode(t, "alice subscribes to $all", subscribeAll(alice), kurrentdb.ErrorCodeAccessDenied)
	wantCode(t, "alice writes a system stream", appendTo(alice, "$system"), kurrentdb.ErrorCodeAccessDenied)
	wantCode(t, "alice creates a group", createGroup(alice, "g"), kurrentdb.ErrorCodeAccessDenied)

	// An operator manages groups but, by the default ACL, does not read $all.
	if err := createGroup(ops, "g"); err != nil {
		t.Fatalf("ops creates a group: %v", err)
	}
	if err := ops.CreatePersistentSubscriptionToAll(ctx, "all", kurrentdb.PersistentAllSubscriptionOptions{}); err != nil {
		t.Fatalf("ops creates a group on $all: %v", err)
	}
	wantCode(t, "ops reads $all", readAll(ops), kurrentdb.ErrorCodeAccessDenied)
	_, err = ops.SubscribeToPersistentSubscriptionToAll(ctx, "all", kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	wantCode(t, "ops connects to a group on $all", err, kurrentdb.ErrorCodeAccessDenied)

	// Any user reads group statistics and connects to a group on a stream
	// it may read.
	if _, err := alice.GetPersistentSubscriptionInfo(ctx, "cart-1", "g", kurrentdb.GetPersistentSubscriptionOptions{}); err != nil {
		t.Fatalf("alice reads group info: %v", err)
	}
	_, err = anon.GetPersistentSubscriptionInfo(ctx, "cart-1", "g", kurrentdb.GetPersistentSubscriptionOptions{})
	wantCode(t, "anonymous reads group info", err, kurrentdb.ErrorCodeAccessDenied)
	sub, err := alice.SubscribeToPersistentSubscription(ctx, "cart-1", "g", kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatalf("alice connects to a group: %v", err)
	}
	if m := nextPersistent(t, sub); m.Event.OriginalEvent().StreamID != "cart-1" {
		t.Fatalf("alice's group sent %+v", m)
	}
	_ = sub.Close()

	// An admin does all of it.
	if err := readAll(admin); err != nil {
		t.Fatalf("admin reads $all: %v", err)
	}
	if err := subscribeAll(admin); err != nil {
		t.Fatalf("admin subscribes to $all: %v", err)
	}
	if err := appendTo(admin, "$system"); err != nil {
		t.Fatalf("admin writes a system stream: %v", err)
	}
	allSub, err := admin.SubscribeToPersistentSubscriptionToAll(ctx, "all", kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatalf("admin connects to a group on $all: %v", err)
	}
	_ = allSub.Close()
	if _, err := admin.TombstoneStream(ctx, "cart-1", kurrentdb.TombstoneStreamOptions{}); err != nil {
		t.Fatalf("admin tombstones: %v", err)
	}
}

func TestAuth_a_stream_acl_in_its_metadata_applies(t *testing.T) {
	users := append(esdbtest.DefaultUsers(),
		esdbtest.User{Name: "alice", Password: "secret"},
		esdbtest.User{Name: "bob", Password: "secret", Groups: []string{"readers"}})
	s := esdbtest.NewWith(t, esdbtest.Options{Users: users, SystemProjections: true})
	ctx := testCtx(t)
	admin := esdbtest.ClientAs(s, t, "admin", "changeit")
	alice := esdbtest.ClientAs(s, t, "alice", "secret")
	bob := esdbtest.ClientAs(s, t, "bob", "secret")
	appendEvents(t, ctx, admin, "cart-1", "E", 1)
	acl := kurrentdb.Acl{}
	acl.AddReadRoles("readers")
	setMetadata(t, ctx, admin, "cart-1", func(m *kurrentdb.StreamMetadata) { m.SetAcl(acl) })
	_, err := readErr(ctx, alice, "cart-1", kurrentdb.ReadStreamOptions{})
	wantCode(t, "alice reads", err, kurrentdb.ErrorCodeAccessDenied)
	if _, err := readErr(ctx, bob, "cart-1", kurrentdb.ReadStreamOptions{}); err != nil {
		t.Fatalf("bob reads: %v", err)
	}
	// Writing falls back to the default: every user.
	if _, err := alice.AppendToStream(ctx, "cart-1", kurrentdb.AppendToStreamOptions{}, event("E", `{}`)); err != nil {
		t.Fatalf("alice writes: %v", err)
	}
	// The projections' streams are system streams that every user may read
	// (their metadata's $acl says so).
	if _, err := readErr(ctx, alice, "$ce-cart", kurrentdb.ReadStreamOptions{}); err != nil {
		t.Fatalf("alice reads $ce-cart: %v", err)
	}
}

// --- the append size limit ---

func TestAppend_over_the_size_limit_is_refused(t *testing.T) {
	bytesOf := func(n int) []byte { return []byte(strings.Repeat("x", n)) }
	sized := func(data int) kurrentdb.EventData {
		// Only the data counts (23.10's Event.SizeOnDisk): big metadata and
		// type do not.
		return kurrentdb.EventData{EventType: strings.Repeat("T", 200), ContentType: kurrentdb.ContentTypeBinary, Data: bytesOf(data), Metadata: bytesOf(5000)}
	}
	s := esdbtest.NewWith(t, esdbtest.Options{MaxAppendSize: 100})
	c := s.Client(t)
	ctx := testCtx(t)
	if _, err := c.AppendToStream(ctx, "s", kurrentdb.AppendToStreamOptions{}, sized(60), sized(40)); err != nil {
		t.Fatalf("100 bytes of data: %v", err)
	}
	_, err := c.AppendToStream(ctx, "s", kurrentdb.AppendToStreamOptions{}, sized(60), sized(41))
	wantCode(t, "101 bytes of data", err, kurrentdb.ErrorCodeUnknown)
	if st := grpcStatus(err); st.Code() != codes.InvalidArgument || st.Message() != "Maximum Append Size of 100 Exceeded." {
		t.Fatalf("status %v %q", st.Code(), st.Message())
	}
	if got, _ := readErr(ctx, c, "s", kurrentdb.ReadStreamOptions{}); len(got) != 2 {
		t.Fatalf("the refused append wrote: %v", got)
	}

	d := esdbtest.New(t) // the default: 1 MiB
	dc := d.Client(t)
	if _, err := dc.AppendToStream(ctx, "s", kurrentdb.AppendToStreamOptions{}, sized(1<<20)); err != nil {
		t.Fatalf("1 MiB: %v", err)
	}
	_, err = dc.AppendToStream(ctx, "s", kurrentdb.AppendToStreamOptions{}, sized(1<<19), sized(1<<19+1))
	if st := grpcStatus(err); st.Code() != codes.InvalidArgument || st.Message() != "Maximum Append Size of 1048576 Exceeded." {
		t.Fatalf("1 MiB + 1: %v", err)
	}
}
