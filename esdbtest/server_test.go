package esdbtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/revgate/projector/esdbtest"
)

// --- helpers ---

// testCtx bounds a test's calls and subscriptions.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func event(eventType, data string) esdb.EventData {
	return esdb.EventData{EventType: eventType, ContentType: esdb.ContentTypeJson, Data: []byte(data)}
}

// appendEvents appends n events of one type to a stream with ExpectedRevision Any.
func appendEvents(t *testing.T, ctx context.Context, c *esdb.Client, stream, eventType string, n int) *esdb.WriteResult {
	t.Helper()
	events := make([]esdb.EventData, n)
	for i := range events {
		events[i] = event(eventType, fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", i%7)))
	}
	res, err := c.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{}, events...)
	if err != nil {
		t.Fatalf("append to %s: %v", stream, err)
	}
	return res
}

// read drains a plain read: read(t)(c.ReadStream(...)).
func read(t *testing.T) func(*esdb.ReadStream, error) []*esdb.ResolvedEvent {
	t.Helper()
	return func(rs *esdb.ReadStream, err error) []*esdb.ResolvedEvent {
		t.Helper()
		return drain(t, rs, err)
	}
}

func drain(t *testing.T, rs *esdb.ReadStream, err error) []*esdb.ResolvedEvent {
	t.Helper()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	defer rs.Close()
	var out []*esdb.ResolvedEvent
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

func revisions(events []*esdb.ResolvedEvent) []uint64 {
	out := make([]uint64, len(events))
	for i, e := range events {
		out[i] = e.OriginalEvent().EventNumber
	}
	return out
}

func errorCode(err error) (esdb.ErrorCode, bool) {
	var e *esdb.Error
	if errors.As(err, &e) {
		return e.Code(), true
	}
	return 0, false
}

// next returns the next subscription message, failing on a drop.
func next(t *testing.T, sub *esdb.Subscription) *esdb.SubscriptionEvent {
	t.Helper()
	e := sub.Recv()
	if e.SubscriptionDropped != nil {
		t.Fatalf("subscription dropped: %v", e.SubscriptionDropped.Error)
	}
	return e
}

// nextEvent skips checkpoints and CaughtUp to the next event.
func nextEvent(t *testing.T, sub *esdb.Subscription) *esdb.ResolvedEvent {
	t.Helper()
	for {
		if e := next(t, sub); e.EventAppeared != nil {
			return e.EventAppeared
		}
	}
}

// nextPersistent returns the next persistent message, failing on a drop.
func nextPersistent(t *testing.T, sub *esdb.PersistentSubscription) *esdb.EventAppeared {
	t.Helper()
	e := sub.Recv()
	if e.SubscriptionDropped != nil {
		t.Fatalf("persistent subscription dropped: %v", e.SubscriptionDropped.Error)
	}
	return e.EventAppeared
}

func settings(mutate func(*esdb.PersistentSubscriptionSettings)) *esdb.PersistentSubscriptionSettings {
	s := esdb.SubscriptionSettingsDefault()
	if mutate != nil {
		mutate(&s)
	}
	return &s
}

func createGroup(t *testing.T, ctx context.Context, c *esdb.Client, stream, group string, from esdb.StreamPosition, st *esdb.PersistentSubscriptionSettings) {
	t.Helper()
	err := c.CreatePersistentSubscription(ctx, stream, group, esdb.PersistentStreamSubscriptionOptions{StartFrom: from, Settings: st})
	if err != nil {
		t.Fatalf("create group %s on %s: %v", group, stream, err)
	}
}

func connect(t *testing.T, ctx context.Context, c *esdb.Client, stream, group string, buffer uint32) *esdb.PersistentSubscription {
	t.Helper()
	sub, err := c.SubscribeToPersistentSubscription(ctx, stream, group, esdb.SubscribeToPersistentSubscriptionOptions{BufferSize: buffer})
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
		expected esdb.ExpectedRevision
		wantErr  bool
		wantNext uint64
	}{
		{"any on a new stream", "any", esdb.Any{}, false, 0},
		{"any again", "any", esdb.Any{}, false, 1},
		{"no stream on a new stream", "fresh", esdb.NoStream{}, false, 0},
		{"no stream on an existing stream", "fresh", esdb.NoStream{}, true, 0},
		{"stream exists on a missing stream", "missing", esdb.StreamExists{}, true, 0},
		{"stream exists on an existing stream", "fresh", esdb.StreamExists{}, false, 1},
		{"exact revision", "fresh", esdb.Revision(1), false, 2},
		{"stale revision", "fresh", esdb.Revision(1), true, 0},
		{"revision ahead", "fresh", esdb.Revision(7), true, 0},
		{"revision on a missing stream", "missing", esdb.Revision(0), true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.AppendToStream(ctx, tt.stream, esdb.AppendToStreamOptions{ExpectedRevision: tt.expected}, event("Happened", `{}`))
			if tt.wantErr {
				if code, ok := errorCode(err); !ok || code != esdb.ErrorCodeWrongExpectedVersion {
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
	if got := s.Len(); got != 5 {
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
	events := read(t)(c.ReadAll(ctx, esdb.ReadAllOptions{}, 100))
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
	first, err := c.AppendToStream(ctx, "idem", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, e1, e2)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.AppendToStream(ctx, "idem", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, e1, e2)
	if err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if *again != *first || s.Len() != 2 {
		t.Errorf("repeat = %+v (first %+v), Len %d; want the first result and 2 events", again, first, s.Len())
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
		opts  esdb.ReadStreamOptions
		count uint64
		want  []uint64
	}{
		{"forwards from start", esdb.ReadStreamOptions{}, 100, []uint64{0, 1, 2, 3, 4}},
		{"forwards from revision with count", esdb.ReadStreamOptions{From: esdb.Revision(2)}, 2, []uint64{2, 3}},
		{"forwards from end", esdb.ReadStreamOptions{From: esdb.End{}}, 100, nil},
		{"backwards from end", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 100, []uint64{4, 3, 2, 1, 0}},
		{"backwards from revision", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.Revision(2)}, 100, []uint64{2, 1, 0}},
		{"backwards from end with count", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1, []uint64{4}},
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
	rs, err := c.ReadStream(ctx, "nope", esdb.ReadStreamOptions{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	_, err = rs.Recv()
	if code, ok := errorCode(err); !ok || code != esdb.ErrorCodeResourceNotFound {
		t.Fatalf("err = %v, want ErrorCodeResourceNotFound", err)
	}
}

func TestRead_all(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "a", "A", 3)
	appendEvents(t, ctx, c, "b", "B", 3)
	all := read(t)(c.ReadAll(ctx, esdb.ReadAllOptions{}, 100))
	if len(all) != 6 {
		t.Fatalf("read %d events, want 6", len(all))
	}
	pos := func(i int) esdb.Position { return all[i].Event.Position }
	ids := func(events []*esdb.ResolvedEvent) []uuid.UUID {
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
		opts  esdb.ReadAllOptions
		count uint64
		want  []uuid.UUID
	}{
		{"forwards from a position includes it", esdb.ReadAllOptions{From: pos(3)}, 100, want(3, 4, 5)},
		{"forwards from a position with count", esdb.ReadAllOptions{From: pos(1)}, 2, want(1, 2)},
		{"forwards from end", esdb.ReadAllOptions{From: esdb.End{}}, 100, nil},
		{"backwards from end", esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 100, want(5, 4, 3, 2, 1, 0)},
		{"backwards from a position starts before it", esdb.ReadAllOptions{Direction: esdb.Backwards, From: pos(3)}, 100, want(2, 1, 0)},
		{"backwards with count", esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 2, want(5, 4)},
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
	link := esdb.EventData{EventType: "$>", ContentType: esdb.ContentTypeBinary, Data: []byte("1@cart-1")}
	if _, err := c.AppendToStream(ctx, "$ce-cart", esdb.AppendToStreamOptions{}, link); err != nil {
		t.Fatal(err)
	}
	got := read(t)(c.ReadStream(ctx, "$ce-cart", esdb.ReadStreamOptions{ResolveLinkTos: true}, 10))
	if len(got) != 1 || got[0].Link == nil || got[0].Event.StreamID != "cart-1" || got[0].Event.EventNumber != 1 || got[0].Link.StreamID != "$ce-cart" {
		t.Fatalf("resolved = %+v", got)
	}
	raw := read(t)(c.ReadStream(ctx, "$ce-cart", esdb.ReadStreamOptions{}, 10))
	if len(raw) != 1 || raw[0].Link != nil || raw[0].Event.EventType != "$>" {
		t.Fatalf("unresolved = %+v", raw)
	}
}

// --- catch-up subscriptions ---

func TestSubscribe_stream_catches_up_then_goes_live(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	tests := []struct {
		name       string
		from       esdb.StreamPosition
		wantBefore []uint64
	}{
		{"from start", esdb.Start{}, []uint64{0, 1, 2}},
		{"after a revision", esdb.Revision(0), []uint64{1, 2}},
		{"from end", esdb.End{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := "s-" + strings.ReplaceAll(tt.name, " ", "-")
			appendEvents(t, ctx, c, stream, "E", 3)
			sub, err := c.SubscribeToStream(ctx, stream, esdb.SubscribeToStreamOptions{From: tt.from})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			var got []uint64
			for {
				e := next(t, sub)
				if e.CaughtUp != nil {
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
	sub, err := c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: esdb.Position{Commit: first.CommitPosition, Prepare: first.PreparePosition}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []string
	for {
		e := next(t, sub)
		if e.CaughtUp != nil {
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

func TestSubscribe_all_filter_checkpoints_advance_past_filtered_out_events(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	appendEvents(t, ctx, c, "keep-1", "Kept", 5)
	for i := range 4 {
		appendEvents(t, ctx, c, fmt.Sprintf("other-%d", i), "Noise", 10)
	}
	lastNoise := s.Head()
	sub, err := c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{
		From:               esdb.Start{},
		Filter:             &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"keep-"}},
		MaxSearchWindow:    4,
		CheckpointInterval: 2, // a checkpoint every 8 scanned events
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var kept int
	var checkpoints []uint64
	for {
		e := next(t, sub)
		if e.CaughtUp != nil {
			break
		}
		if e.EventAppeared != nil {
			if e.EventAppeared.Event.StreamID != "keep-1" {
				t.Fatalf("filtered-out event delivered: %s", e.EventAppeared.Event.StreamID)
			}
			kept++
		}
		if e.CheckPointReached != nil {
			checkpoints = append(checkpoints, e.CheckPointReached.Commit)
		}
	}
	// 45 scanned: checkpoints after 8, 16, 24, 32, 40, then 45 at the head.
	if kept != 5 || len(checkpoints) != 6 || !slices.IsSorted(checkpoints) {
		t.Fatalf("kept %d, checkpoints %v", kept, checkpoints)
	}
	if got := checkpoints[len(checkpoints)-1]; got != lastNoise {
		t.Fatalf("last checkpoint %d, want the last filtered-out event's position %d", got, lastNoise)
	}

	// Live: a quiet filter's checkpoint still follows the head.
	appendEvents(t, ctx, c, "other-live", "Noise", 3)
	e := next(t, sub)
	if e.CheckPointReached == nil || e.CheckPointReached.Commit != s.Head() {
		t.Fatalf("live message %+v, want a checkpoint at %d", e, s.Head())
	}
	appendEvents(t, ctx, c, "keep-2", "Kept", 1)
	if e := nextEvent(t, sub); e.Event.StreamID != "keep-2" {
		t.Fatalf("live event from %s", e.Event.StreamID)
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
		filter esdb.SubscriptionFilter
		want   []string
	}{
		{"stream prefix", esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"cart-", "order-"}}, []string{"order-1", "cart-1"}},
		{"stream regex", esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Regex: "^c.*-1$"}, []string{"cart-1"}},
		{"event type prefix", esdb.SubscriptionFilter{Type: esdb.EventFilterType, Prefixes: []string{"Order"}}, []string{"order-1"}},
		{"event type regex excluding system events", esdb.SubscriptionFilter{Type: esdb.EventFilterType, Regex: "^[^$]"}, []string{"order-1", "cart-1"}},
		{"system streams by prefix", esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"$"}}, []string{"$internal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: esdb.Start{}, Filter: &tt.filter})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			var got []string
			for {
				e := next(t, sub)
				if e.CaughtUp != nil {
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
	createGroup(t, ctx, c, "s", "g", esdb.Start{}, nil)
	sub, err := c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: esdb.Start{}})
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
	sub, err := c.SubscribeToStream(ctx, "s", esdb.SubscribeToStreamOptions{From: esdb.Start{}})
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
	_, err = c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{}, event("E", `{}`))
	if code, ok := errorCode(err); !ok || code != esdb.ErrorUnavailable {
		t.Fatalf("append while refused: %v, want ErrorUnavailable", err)
	}
	// The client rediscovers the node; its next call waits for the window to end.
	res, err := c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{}, event("E", `{}`))
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
	createGroup(t, ctx, c, "s", "g", esdb.Start{}, nil)
	s.DuplicateDeliveries(1)

	sub, err := c.SubscribeToStream(ctx, "s", esdb.SubscribeToStreamOptions{From: esdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []uint64
	for {
		e := next(t, sub)
		if e.CaughtUp != nil {
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
		sub, err := c.SubscribeToStream(ctx, "s", esdb.SubscribeToStreamOptions{From: esdb.Start{}})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		var got []uint64
		for {
			e := next(t, sub)
			if e.CaughtUp != nil {
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
	createGroup(t, ctx, c, "s", "g", esdb.Start{}, nil)
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // writer
		defer wg.Done()
		for run.Err() == nil {
			_, _ = c.AppendToStream(run, "s", esdb.AppendToStreamOptions{}, event("E", `{}`))
		}
	}()
	go func() { // catch-up subscriber, resubscribing after drops
		defer wg.Done()
		for run.Err() == nil {
			sub, err := c.SubscribeToAll(run, esdb.SubscribeToAllOptions{From: esdb.Start{}})
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
			sub, err := c.SubscribeToPersistentSubscription(run, "s", "g", esdb.SubscribeToPersistentSubscriptionOptions{})
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
	got := read(t)(c.ReadStream(ctx, "after", esdb.ReadStreamOptions{}, 10))
	if !slices.Equal(revisions(got), []uint64{0, 1}) {
		t.Fatalf("after the faults: revisions %v", revisions(got))
	}
}

// --- persistent subscriptions ---

func TestPersistent_create_update_info_delete(t *testing.T) {
	s := esdbtest.New(t)
	c := s.Client(t)
	ctx := testCtx(t)
	createGroup(t, ctx, c, "s", "g", esdb.Start{}, settings(func(st *esdb.PersistentSubscriptionSettings) { st.MaxRetryCount = 3 }))
	err := c.CreatePersistentSubscription(ctx, "s", "g", esdb.PersistentStreamSubscriptionOptions{})
	if code, ok := errorCode(err); !ok || code != esdb.ErrorCodeResourceAlreadyExists {
		t.Fatalf("second create: %v, want ErrorCodeResourceAlreadyExists", err)
	}
	info, err := c.GetPersistentSubscriptionInfo(ctx, "s", "g", esdb.GetPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.EventSource != "s" || info.GroupName != "g" || info.Settings.MaxRetryCount != 3 || info.Settings.ConsumerStrategyName != esdb.ConsumerStrategyRoundRobin {
		t.Fatalf("info = %+v settings %+v", info, info.Settings)
	}
	err = c.UpdatePersistentSubscription(ctx, "s", "g", esdb.PersistentStreamSubscriptionOptions{StartFrom: esdb.Start{},
		Settings: settings(func(st *esdb.PersistentSubscriptionSettings) { st.ConsumerStrategyName = esdb.ConsumerStrategyPinned })})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ListPersistentSubscriptionsForStream(ctx, "s", esdb.ListPersistentSubscriptionsOptions{})
	if err != nil || len(list) != 1 || list[0].Settings.ConsumerStrategyName != esdb.ConsumerStrategyPinned {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if err := c.DeletePersistentSubscription(ctx, "s", "g", esdb.DeletePersistentSubscriptionOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetPersistentSubscriptionInfo(ctx, "s", "g", esdb.GetPersistentSubscriptionOptions{})
	if code, ok := errorCode(err); !ok || code != esdb.ErrorCodeResourceNotFound {
		t.Fatalf("info after delete: %v, want ErrorCodeResourceNotFound", err)
	}
	_, err = c.SubscribeToPersistentSubscription(ctx, "s", "g", esdb.SubscribeToPersistentSubscriptionOptions{})
	if code, ok := errorCode(err); !ok || code != esdb.ErrorCodeResourceNotFound {
		t.Fatalf("connect after delete: %v, want ErrorCodeResourceNotFound", err)
	}
}

// collect reads a persistent subscription in a goroutine, acking everything,
// and reports each message's revision on out until the subscription ends;
// cancel the subscription's context to end it. (Closing it instead would race
// with Ack: the client's Close calls CloseSend, which must not run
// concurrently with the Send of an Ack.)
func collect(t *testing.T, ctx context.Context, sub *esdb.PersistentSubscription, out chan<- uint64, wg *sync.WaitGroup) {
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
		strategy esdb.ConsumerStrategy
		buffer   uint32
		check    func(t *testing.T, a, b []uint64)
	}{
		// Room for everything: one dispatch pass alternates strictly.
		{esdb.ConsumerStrategyRoundRobin, 20, func(t *testing.T, a, b []uint64) {
			if len(a) != 10 || len(b) != 10 {
				t.Errorf("round robin split %d/%d, want 10/10", len(a), len(b))
			}
		}},
		// The first consumer's buffer fills, the rest goes to the second.
		{esdb.ConsumerStrategyDispatchToSingle, 5, func(t *testing.T, a, b []uint64) {
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
			createGroup(t, ctx, c1, "s", "g", esdb.Start{}, settings(func(st *esdb.PersistentSubscriptionSettings) { st.ConsumerStrategyName = tt.strategy }))
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
	err := c1.CreatePersistentSubscriptionToAll(ctx, "pinned", esdb.PersistentAllSubscriptionOptions{
		StartFrom: esdb.Start{},
		Filter:    &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"cart-"}},
		Settings:  settings(func(st *esdb.PersistentSubscriptionSettings) { st.ConsumerStrategyName = esdb.ConsumerStrategyPinned }),
	})
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(ctx)
	defer stop()
	subs := []*esdb.PersistentSubscription{}
	for _, c := range []*esdb.Client{c1, c2} {
		sub, err := c.SubscribeToPersistentSubscriptionToAll(run, "pinned", esdb.SubscribeToPersistentSubscriptionOptions{BufferSize: 50})
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
	createGroup(t, ctx, c, "s", "g", esdb.Start{}, nil)
	sub, err := c.SubscribeToPersistentSubscription(ctx, "s", "g", esdb.SubscribeToPersistentSubscriptionOptions{BufferSize: 10})
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
	info, err := c.GetPersistentSubscriptionInfo(ctx, "s", "g", esdb.GetPersistentSubscriptionOptions{})
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
	createGroup(t, ctx, c, "s", "g", esdb.Start{}, nil)
	sub := connect(t, ctx, c, "s", "g", 1) // one in flight at a time: a deterministic order

	m := nextPersistent(t, sub)
	if err := sub.Nack("try again", esdb.NackActionRetry, m.Event); err != nil {
		t.Fatal(err)
	}
	m = nextPersistent(t, sub)
	if m.Event.OriginalEvent().EventNumber != 0 || m.RetryCount != 1 {
		t.Fatalf("after retry: revision %d retry %d, want 0 retry 1", m.Event.OriginalEvent().EventNumber, m.RetryCount)
	}
	if err := sub.Nack("poison", esdb.NackActionPark, m.Event); err != nil {
		t.Fatal(err)
	}
	m = nextPersistent(t, sub)
	if m.Event.OriginalEvent().EventNumber != 1 {
		t.Fatalf("after park: revision %d, want 1", m.Event.OriginalEvent().EventNumber)
	}
	if err := sub.Nack("not mine", esdb.NackActionSkip, m.Event); err != nil {
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
	original := read(t)(c.ReadStream(ctx, "s", esdb.ReadStreamOptions{}, 1))[0].Event
	if p.Reason != "poison" || p.Stream != "s" || p.Revision != 0 || p.EventID != original.EventID.String() {
		t.Fatalf("parked %+v", p)
	}
	parked := read(t)(c.ReadStream(ctx, "$persistentsubscription-s::g-parked", esdb.ReadStreamOptions{ResolveLinkTos: true}, 10))
	if len(parked) != 1 || parked[0].Link == nil || parked[0].Event.EventID != original.EventID {
		t.Fatalf("parked stream %+v", parked)
	}
	if !strings.Contains(string(parked[0].Link.UserMetadata), "poison") {
		t.Errorf("parked link metadata %s", parked[0].Link.UserMetadata)
	}
	// Parked, skipped and acked: the checkpoint is past all three.
	waitFor(t, ctx, func() bool {
		info, err := c.GetPersistentSubscriptionInfo(ctx, "s", "g", esdb.GetPersistentSubscriptionOptions{})
		return err == nil && info.Stats.ParkedMessagesCount == 1 && info.Stats.LastCheckpointedEventRevision != nil && *info.Stats.LastCheckpointedEventRevision == 2
	})
	if st := s.Stats(); st.Nacks != 3 || st.Acks != 1 {
		t.Errorf("Stats = %+v, want 3 nacks and 1 ack", st)
	}

	// Replaying the parked message sends it again.
	if err := c.ReplayParkedMessages(ctx, "s", "g", esdb.ReplayParkedMessagesOptions{}); err != nil {
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
	createGroup(t, ctx, c, "s", "g", esdb.Start{}, nil)
	sub := connect(t, ctx, c, "s", "g", 10)
	m := nextPersistent(t, sub)
	if err := sub.Nack("stop", esdb.NackActionStop, m.Event); err != nil {
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
	createGroup(t, ctx, c, "s", "g", esdb.Start{}, settings(func(st *esdb.PersistentSubscriptionSettings) {
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
	createGroup(t, ctx, c, "s", "at-3", esdb.Revision(3), nil)
	createGroup(t, ctx, c, "s", "at-end", esdb.End{}, nil)
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
	err := c.CreatePersistentSubscriptionToAll(ctx, "g", esdb.PersistentAllSubscriptionOptions{
		StartFrom: esdb.Start{},
		Filter:    &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"cart-"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.SubscribeToPersistentSubscriptionToAll(ctx, "g", esdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	m := nextPersistent(t, sub)
	if m.Event.Event.StreamID != "cart-1" {
		t.Fatalf("first event from %s", m.Event.Event.StreamID)
	}
	if err := sub.Nack("bad cart", esdb.NackActionPark, m.Event); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, func() bool { return len(s.Parked("$all", "g")) == 1 })
	parked := read(t)(c.ReadStream(ctx, "$persistentsubscription-$all::g-parked", esdb.ReadStreamOptions{ResolveLinkTos: true}, 10))
	if len(parked) != 1 || parked[0].Event.StreamID != "cart-1" {
		t.Fatalf("parked stream %+v", parked)
	}
	info, err := c.GetPersistentSubscriptionInfoToAll(ctx, "g", esdb.GetPersistentSubscriptionOptions{})
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
