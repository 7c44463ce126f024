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
