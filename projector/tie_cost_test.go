package projector_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// A card added to a second board (its stream tied to the first) is routed
// away: the event fails, parked. It costs its own boards a split of their
// batch, not their events one by one: the events after it are folded in
// batches, and each board equals the fold of its events.
func TestRunner_a_routed_away_event_of_a_tied_stream_costs_its_own_document_only(t *testing.T) {
	base := newStore(t)
	store := &puttingStore{Store: base}
	log := projectortest.NewLog(kanbanRegistry())
	r := rand.New(rand.NewPCG(5, 5))
	var all []projector.Event
	for b := range 4 {
		evs := log.MustAppend(t, boardStreams+fmt.Sprint("b", b), BoardOpened{BoardID: fmt.Sprint("b", b), Name: "n"})
		all = append(all, evs...)
	}
	lives := map[string][]any{}
	var cards []string
	for c := range 100 {
		id := fmt.Sprint("c", c)
		cards = append(cards, id)
		lives[id] = []any{CardAdded{CardID: id, BoardID: fmt.Sprint("b", c%4), Title: "t"}}
		for range 29 {
			lives[id] = append(lives[id], CardMoved{CardID: id, Column: "doing"})
		}
	}
	// c0, on board b0, is added to b1 half way through its life.
	lives["c0"][20] = CardAdded{CardID: "c0", BoardID: "b1", Title: "again"}
	next := map[string]int{}
	for len(next) < len(cards) || func() bool {
		for _, id := range cards {
			if next[id] < len(lives[id]) {
				return true
			}
		}
		return false
	}() {
		id := cards[r.IntN(len(cards))]
		if next[id] >= len(lives[id]) {
			continue
		}
		all = append(all, log.MustAppend(t, cardStreams+id, lives[id][next[id]])...)
		next[id]++
	}
	for i := range all {
		all[i].Payload = nil // delivered encoded
	}
	e, err := projector.NewEngine(store, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(patient()),
		projector.WithFailurePolicy(projector.Park), projector.WithParker(base), projector.WithStreamReader(newStreams(all...)))
	if err != nil {
		t.Fatal(err)
	}
	runner, err := projector.NewRunner("tied", e, &scripted{events: all}, base)
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1].Position
	if err := runUntil(t, runner, func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position == last }); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	store.mu.Lock()
	t.Logf("one-document writes by document: %v; stats %+v", store.byDoc, runner.Stats())
	// b0 moves past the event routed to b1 in one write; b1 parks it.
	for doc, n := range store.byDoc {
		if n > 1 {
			t.Errorf("board %s: %d one-document writes, want 1 at most (the boards of the card added twice; 750 each before)", doc, n)
		}
	}
	store.mu.Unlock()
	if parked, _ := base.Parked(context.Background(), "kanban_boards"); len(parked) > 0 {
		t.Logf("first parked: %s", parked[0].Error)
	}
	// Each board holds the fold of its events as the engine routes them:
	// the card's second addition is in none.
	reg := kanbanRegistry()
	decoded := make([]projector.Event, len(all))
	for i, ev := range all {
		if decoded[i], err = reg.Decode(ev); err != nil {
			t.Fatal(err)
		}
	}
	docs := boards().Documents(decoded)
	if len(docs) != 4 || slices.ContainsFunc(docs["b1"], func(ev projector.Event) bool { return ev.StreamID == cardStreams+"c0" }) {
		t.Errorf("Documents gives b1 the card routed away from b0, or not 4 boards: %d", len(docs))
	}
	for id, evs := range docs {
		if err := projectortest.CheckDocument(context.Background(), base, boards(), id, evs); err != nil {
			t.Error(err)
		}
	}
	if st := runner.Stats(); st.Parked != 1 {
		t.Errorf("stats %+v, want 1 parked", st)
	}
}

// CardDrafted names no board: a card's first event, before the one that
// adds it to a board.
type CardDrafted struct{ CardID string }

// A summary whose streams' first event names no document (a trip's
// request, before the acceptance that names its driver): the stream's
// first routed event is at revision 1, after an event the projection
// neither routes nor handles. Each event is applied once, whatever the
// workers; and once the engine has seen the event before it declined, it
// folds in its batch, with no read of its stream and no write of its own
// (with several workers, nearly always: one whose batch comes first goes
// through the per-event path, as before). (A handler
// that changes the state's map in place, as the boards' does, applied
// events twice before the batch's fold stopped running handlers past its
// stop.)
func TestRunner_a_stream_whose_first_routed_event_is_not_its_first_folds_in_its_batch(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	reg := kanbanRegistry()
	projector.Register[CardDrafted](reg, "CardDrafted")
	log := projectortest.NewLog(reg)
	r := rand.New(rand.NewPCG(9, 9))
	var all []projector.Event
	for b := range 4 {
		all = append(all, log.MustAppend(t, boardStreams+fmt.Sprint("b", b), BoardOpened{BoardID: fmt.Sprint("b", b), Name: "n"})...)
	}
	lives := map[string][]any{}
	var cards []string
	for c := range 100 {
		id := fmt.Sprint("c", c)
		cards = append(cards, id)
		lives[id] = []any{CardDrafted{CardID: id}, CardAdded{CardID: id, BoardID: fmt.Sprint("b", c%4), Title: "t"}, CardMoved{CardID: id, Column: "doing"}}
	}
	next := map[string]int{}
	for n := 0; n < 300; {
		id := cards[r.IntN(len(cards))]
		if next[id] < len(lives[id]) {
			all = append(all, log.MustAppend(t, cardStreams+id, lives[id][next[id]])...)
			next[id]++
			n++
		}
	}
	decoded := make([]projector.Event, len(all))
	for i, ev := range all {
		decoded[i] = ev
		all[i].Payload = nil // delivered encoded
	}
	for _, workers := range []int{1, 4} {
		base := newStore(t)
		store := &puttingStore{Store: base}
		e, err := projector.NewEngine(store, reg, []projector.Definition{boards()}, projector.WithRetry(patient()),
			projector.WithFailurePolicy(projector.Park), projector.WithParker(base), projector.WithStreamReader(newStreams(all...)))
		if err != nil {
			t.Fatal(err)
		}
		runner, err := projector.NewRunner("drafted", e, &scripted{events: all}, base, projector.WithWorkers(workers))
		if err != nil {
			t.Fatal(err)
		}
		last := all[len(all)-1].Position
		if err := runUntil(t, runner, func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position == last }); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		// How many went one at a time depends on timing (a runner at the
		// head handles events as they come): said, not asserted; the
		// batches below are.
		t.Logf("%d workers: %d one-document writes", workers, store.puts.Load())
		for id, evs := range boards().Documents(decoded) {
			if err := projectortest.CheckDocument(context.Background(), base, boards(), id, evs); err != nil {
				t.Errorf("%d workers: %v", workers, err)
			}
		}
		if st := runner.Stats(); st.Parked != 0 || st.Failed != 0 || st.Applied != 204 {
			t.Errorf("%d workers: stats %+v, want 204 applied (the boards' 4 and the cards' 200 routed events)", workers, st)
		}
	}
	// In batches, in one or in two (the declined events of a stream in
	// the first, its routed ones in the second): no event goes one at a
	// time.
	for _, split := range []int{len(all), len(all) / 2} {
		base := newStore(t)
		store := &puttingStore{Store: base}
		e, err := projector.NewEngine(store, reg, []projector.Definition{boards()}, projector.WithRetry(patient()),
			projector.WithFailurePolicy(projector.Park), projector.WithParker(base), projector.WithStreamReader(newStreams(all...)))
		if err != nil {
			t.Fatal(err)
		}
		for _, batch := range [][]projector.Event{all[:split], all[split:]} {
			for _, rs := range e.HandleBatch(context.Background(), batch) {
				for _, r := range rs {
					if r.Outcome != projector.Applied {
						t.Fatalf("batches split at %d: %+v", split, r)
					}
				}
			}
		}
		if n := store.puts.Load(); n > 0 {
			t.Errorf("batches split at %d: %d one-document writes, want none: every card's first routed event folds in its batch", split, n)
		}
		for id, evs := range boards().Documents(decoded) {
			if err := projectortest.CheckDocument(context.Background(), base, boards(), id, evs); err != nil {
				t.Errorf("batches split at %d: %v", split, err)
			}
		}
	}
}
