package app

import (
	"fmt"
	"slices"
	"testing"

	"github.com/revgate/projector/projector"
)

// status lists parked events in the order they were parked, then each held
// document's events together, in the order a replay applies them, although
// two held documents' events were parked interleaved.
func TestOrderParked_keeps_parked_events_in_their_order_and_groups_each_held_document(t *testing.T) {
	held := func(doc string, rev uint64) projector.ParkedEvent {
		return projector.ParkedEvent{Held: true, Document: doc, Stream: "s-" + doc, Revision: rev}
	}
	parkedOne := func(stream string, rev uint64) projector.ParkedEvent {
		return projector.ParkedEvent{Stream: stream, Revision: rev}
	}
	in := []projector.ParkedEvent{held("b", 2), parkedOne("z", 9), held("a", 5), held("b", 3), parkedOne("c", 1), held("a", 6), held("b", 4)}
	orderParked(in)
	var got []string
	for _, p := range in {
		got = append(got, fmt.Sprintf("%v %s@%d", p.Held, p.Stream, p.Revision))
	}
	want := []string{"false z@9", "false c@1", "true s-a@5", "true s-a@6", "true s-b@2", "true s-b@3", "true s-b@4"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}

	// A document fed by several streams is replayed in the order of $all.
	multi := []projector.ParkedEvent{
		{Held: true, Document: "sum", Stream: "x", Revision: 7, Position: 300},
		{Held: true, Document: "sum", Stream: "y", Revision: 1, Position: 200},
		{Held: true, Document: "sum", Stream: "x", Revision: 6, Position: 100},
	}
	orderParked(multi)
	got = got[:0]
	for _, p := range multi {
		got = append(got, fmt.Sprintf("%s@%d", p.Stream, p.Revision))
	}
	if want := []string{"x@6", "y@1", "x@7"}; !slices.Equal(got, want) {
		t.Fatalf("order of a multi-stream document %q, want %q (by position)", got, want)
	}
}
