package mongostore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// Processes that add the unknown types they met at once (the processes of
// a segmented projection, stopped together) keep each other's types; the
// counts add up, beside the checkpoint, which the adds leave as it is.
func TestAddUnknownTypes_from_writers_at_once_keeps_every_type(t *testing.T) {
	ctx := context.Background()
	s := mongostore.New(mongotest.Database(t))
	if err := s.SaveCheckpoint(ctx, "tickets", projector.Checkpoint{Position: 42, Prepare: 42}); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			errs[i] = s.AddUnknownTypes(ctx, "tickets", map[string]uint64{fmt.Sprintf("type.%d", i): 1, "common": 1})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if err := s.AddUnknownTypes(ctx, "tickets", map[string]uint64{"type.0": 2}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := all["tickets"]
	t.Logf("record: %v", st.UnknownTypes)
	for i := range writers {
		if st.UnknownTypes[fmt.Sprintf("type.%d", i)] == 0 {
			t.Errorf("type.%d lost: %v", i, st.UnknownTypes)
		}
	}
	if st.UnknownTypes["type.0"] < 3 || st.UnknownTypes["common"] == 0 {
		t.Errorf("counts %v: want type.0 at least 3 (1, then 2 more), common at least 1", st.UnknownTypes)
	}
	if st.Checkpoint == nil || st.Checkpoint.Position != 42 {
		t.Errorf("checkpoint %v after the adds: want 42", st.Checkpoint)
	}
}

// Checkpoints given names reads those only, with their unknown types: a
// process of a segmented run reads its segments' counts without reading
// every checkpoint the database holds.
func TestCheckpoints_of_some_names_returns_those_only(t *testing.T) {
	ctx := context.Background()
	s := mongostore.New(mongotest.Database(t))
	for i, name := range []string{"tickets/segment-0-of-2", "tickets/segment-1-of-2", "orders"} {
		if err := s.SaveCheckpoint(ctx, name, projector.Checkpoint{Position: uint64(10 * (i + 1)), Prepare: uint64(10 * (i + 1))}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddUnknownTypes(ctx, name, map[string]uint64{"type." + name: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddUnknownTypes(ctx, "fresh", map[string]uint64{"type.fresh": 1}); err != nil { // no checkpoint yet
		t.Fatal(err)
	}
	got, err := s.Checkpoints(ctx, "tickets/segment-1-of-2", "fresh", "none")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d statuses (%v), want those of tickets/segment-1-of-2 and fresh only", len(got), got)
	}
	if st := got["tickets/segment-1-of-2"]; st.Checkpoint == nil || st.Checkpoint.Position != 20 || st.UnknownTypes["type.tickets/segment-1-of-2"] != 1 || len(st.UnknownTypes) != 1 {
		t.Errorf("tickets/segment-1-of-2: %+v, want position 20 and its one unknown type", st)
	}
	if st := got["fresh"]; st.Checkpoint != nil || st.UnknownTypes["type.fresh"] != 1 {
		t.Errorf("fresh: %+v, want no checkpoint and its unknown type", st)
	}
	all, err := s.Checkpoints(ctx)
	if err != nil || len(all) != 4 {
		t.Fatalf("every status: %d (%v), want 4", len(all), err)
	}
}
