package projector

import (
	"strings"
	"testing"
	"time"
)

// The merge of a document's streams takes the event written first next,
// and keeps each stream's order even where a stream's creation times go
// back (a clock moved between two appends).
func TestMergeByCreation_keeps_each_streams_order_and_otherwise_the_times(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	at := func(id string, s int) mapEvent {
		return mapEvent{ev: Event{ID: id, Created: t0.Add(time.Duration(s) * time.Second)}}
	}
	streams := [][]mapEvent{
		{at("a0", 1), at("a1", 4), at("a2", 2)}, // a2 written "before" a1: after it all the same
		{at("b0", 0), at("b1", 3), at("b2", 5)},
		{},
		{at("c0", 3)}, // the same time as b1: the earlier stream first
	}
	var got []string
	for _, m := range mergeByCreation(streams) {
		got = append(got, m.ev.ID)
	}
	if want := "b0 a0 b1 c0 a1 a2 b2"; strings.Join(got, " ") != want {
		t.Fatalf("merged %v, want %s", got, want)
	}
}
