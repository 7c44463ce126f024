package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// status lists parked events in the order they were parked, then each held
// document's events together, in the order a replay applies them, although
// two held documents' events were parked interleaved.
func TestOrderParked_keeps_parked_events_in_their_order_and_groups_each_held_document(t *testing.T) {
	held := func(doc string, rev uint64) projector.ParkedEvent {
		return projector.ParkedEvent{Held: true, Document: doc, Event: projector.Event{StreamID: "s-" + doc, StreamRevision: rev}}
	}
	parkedOne := func(stream string, rev uint64) projector.ParkedEvent {
		return projector.ParkedEvent{Event: projector.Event{StreamID: stream, StreamRevision: rev}}
	}
	in := []projector.ParkedEvent{held("b", 2), parkedOne("z", 9), held("a", 5), held("b", 3), parkedOne("c", 1), held("a", 6), held("b", 4)}
	orderParked(in)
	var got []string
	for _, p := range in {
		got = append(got, fmt.Sprintf("%v %s@%d", p.Held, p.StreamID, p.StreamRevision))
	}
	want := []string{"false z@9", "false c@1", "true s-a@5", "true s-a@6", "true s-b@2", "true s-b@3", "true s-b@4"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}

	// A document fed by several streams is replayed in the order of $all.
	multi := []projector.ParkedEvent{
		{Held: true, Document: "sum", Event: projector.Event{StreamID: "x", StreamRevision: 7, Position: 300}},
		{Held: true, Document: "sum", Event: projector.Event{StreamID: "y", StreamRevision: 1, Position: 200}},
		{Held: true, Document: "sum", Event: projector.Event{StreamID: "x", StreamRevision: 6, Position: 100}},
	}
	orderParked(multi)
	got = got[:0]
	for _, p := range multi {
		got = append(got, fmt.Sprintf("%s@%d", p.StreamID, p.StreamRevision))
	}
	if want := []string{"x@6", "y@1", "x@7"}; !slices.Equal(got, want) {
		t.Fatalf("order of a multi-stream document %q, want %q (by position)", got, want)
	}
}

// status --parked tags an event with its collection only when it is not the
// one readers use, also after a rebuild switched them to another.
func TestPrintParked_names_the_collection_only_of_an_event_parked_in_a_build(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	def := projector.New[struct{ N int }]("tix", projector.StreamSuffix("t-"))
	building, err := store.StartRebuild(ctx, "tix", "tix_r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.FinishRebuild(ctx, "tix", building, "tix"); err != nil {
		t.Fatal(err)
	}
	for i, coll := range []string{"tix_r1", "tix_r2"} {
		pe := projector.ParkedEvent{Projection: "tix", Document: "7", Event: projector.Event{StreamID: "t-7", StreamRevision: uint64(i),
			ID: fmt.Sprint("e", i), Type: "noted"}, Error: "bad", Attempts: 1, ParkedAt: time.Now().UTC(), Collection: coll}
		if recorded, err := store.Park(ctx, pe); err != nil || !recorded {
			t.Fatalf("recorded %v: %v", recorded, err)
		}
	}
	var out, errOut strings.Builder
	if err := printParked(ctx, &out, &errOut, store, []Projection{{Definition: def}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "[tix_r1]") || !strings.Contains(out.String(), "[tix_r2] 7: bad") {
		t.Errorf("status --parked, readers on tix_r1:\n%s\nwant only the event of tix_r2 tagged with its collection", out.String())
	}
}

// The command's last lines: a line for each failed projection, each
// without its stack (Run puts the command's name before each).
func TestExitLines_gives_a_line_for_each_joined_error_without_stacks(t *testing.T) {
	err := errors.Join(errors.New("a: panic: boom\ngoroutine 1 [running]:\nmain.f()"), errors.New("b: bad"))
	want := []string{"a: panic: boom [and 2 more lines, in the log]", "b: bad"}
	if got := exitLines(err); !slices.Equal(got, want) {
		t.Errorf("exitLines = %q, want %q", got, want)
	}
	if got := exitLines(errors.New("plain")); !slices.Equal(got, []string{"plain"}) {
		t.Errorf("exitLines = %q", got)
	}
}
