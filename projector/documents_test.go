package projector_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/retry"
)

// halfStore is a checkpoint store whose checkpoints cover the documents
// keep accepts only.
type halfStore struct {
	projector.CheckpointStore
	keep func(string) bool
}

func (h halfStore) NeedsEvent(id string, _ projector.Checkpoint) bool { return h.keep(id) }

// Two runners share one projection's documents, each keeping half of them
// (a checkpoint store that covers those only): each applies the events of its own documents only, and
// passes over the others' as checkpoints; together they apply every event
// once, and every document equals its fold.
func TestRunner_checkpoints_of_some_documents_apply_only_the_documents_it_keeps(t *testing.T) {
	s := newStore(t)
	all, by := cartEvents(t, 8)
	mine := map[string]bool{}
	for i, id := range []string{"ra", "rb", "rc", "rd", "re", "rf", "rg", "rh"} {
		if i%2 == 0 {
			mine[id] = true
		}
	}
	half := func(want bool) func(string) bool { return func(id string) bool { return mine[id] == want } }
	applied := uint64(0)
	for i, keep := range []func(string) bool{half(true), half(false)} {
		name := []string{"even", "odd"}[i]
		r, err := projector.NewRunner(name, newEngine(t, s, retry.Default()), &scripted{events: all}, halfStore{s, keep})
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(len(all) / 2)
		if err := runUntil(t, r, func(st projector.RunnerStats) bool { return st.CaughtUp }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		st := r.Stats()
		if st.Applied != want || st.Events != want || st.Checkpoints != uint64(len(all))-want {
			t.Errorf("%s: applied %d of %d deliveries and %d checkpoints; want %d events applied, the other %d passed over",
				name, st.Applied, st.Events, st.Checkpoints, want, uint64(len(all))-want)
		}
		applied += st.Applied
		if cp, err := s.LoadCheckpoint(context.Background(), name); err != nil || cp == nil || cp.Position != all[len(all)-1].Position {
			t.Errorf("%s: checkpoint %v, %v; want the last position, past the events passed over", name, cp, err)
		}
		if i == 0 {
			for id := range by {
				if _, found, err := s.Load(context.Background(), cart.DetailsName, id, 0, new(cart.Details)); err != nil || found != mine[id] {
					t.Errorf("after the even runner, document %s found %v (%v)", id, found, err)
				}
			}
		}
	}
	if applied != uint64(len(all)) {
		t.Errorf("applied %d in all, want %d", applied, len(all))
	}
	for id, evs := range by {
		assertDocument(t, s, id, evs)
	}
}

func TestNewRunner_checkpoints_of_some_documents_need_an_engine_of_one_projection(t *testing.T) {
	s := newStore(t)
	_, err := projector.NewRunner("r", newEngine(t, s, retry.Default(), cart.NewDetailsProjection(), cart.NewClientSummaryProjection()), &scripted{},
		halfStore{s, func(string) bool { return true }}, projector.WithCheckpointEvery(1, time.Second))
	if err == nil || !strings.Contains(err.Error(), "one projection") {
		t.Fatalf("err %v", err)
	}
}

// neededFrom is a checkpoint store that needs every document's events past
// position from only (one whose segments' checkpoints are all there).
type neededFrom struct {
	projector.CheckpointStore
	from uint64
}

func (n neededFrom) NeedsEvent(_ string, at projector.Checkpoint) bool { return at.Position > n.from }

// The events a store covers from a checkpoint at or past them are passed
// over by their position: the engine is handed only those past it.
func TestRunner_checkpoints_that_need_events_past_a_position_pass_over_those_before(t *testing.T) {
	s := newStore(t)
	all, by := cartEvents(t, 8)
	full, err := projector.NewRunner("full", newEngine(t, s, retry.Default()), &scripted{events: all}, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(t, full, func(st projector.RunnerStats) bool { return st.CaughtUp }); err != nil {
		t.Fatal(err)
	}
	half := len(all) / 2
	again, err := projector.NewRunner("again", newEngine(t, s, retry.Default()), &scripted{events: all},
		neededFrom{s, all[half-1].Position})
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(t, again, func(st projector.RunnerStats) bool { return st.CaughtUp }); err != nil {
		t.Fatal(err)
	}
	st := again.Stats()
	if st.Checkpoints != uint64(half) || st.Events != uint64(len(all)-half) || st.Applied != 0 {
		t.Errorf("%d events passed over, %d handed to the engine, %d applied; want %d passed over, %d handed over (all duplicates)",
			st.Checkpoints, st.Events, st.Applied, half, len(all)-half)
	}
	for id, evs := range by {
		assertDocument(t, s, id, evs)
	}
}
