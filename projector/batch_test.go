package projector_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// racingStore lets another writer move a document just before the batch's
// write: the batch's conditional write for it misses.
type racingStore struct {
	*mongostore.Store
	once   sync.Once
	before func()
}

func (s *racingStore) WriteMany(ctx context.Context, collection string, writes []projector.Write) ([]bool, error) {
	s.once.Do(s.before)
	return s.Store.WriteMany(ctx, collection, writes)
}

func TestHandleBatch_equals_the_per_event_path_and_falls_back_on_a_gate_miss(t *testing.T) {
	base := newStore(t)
	log := projectortest.NewLog(cart.Registry())
	r := rand.New(rand.NewPCG(4, 4))
	lives := map[string][]projector.Event{}
	var all []projector.Event
	for i := range 12 {
		id := fmt.Sprint("b", i)
		evs := log.MustAppend(t, cart.StreamID(id), cart.RandomLife(r, id, "c", 8, t0)...)
		lives[id] = evs
	}
	// Interleaved as in $all, with some events delivered twice.
	for k := range 8 {
		for i := range 12 {
			all = append(all, lives[fmt.Sprint("b", i)][k])
		}
	}
	all = projectortest.Redeliver(r, all, 2)

	// Another engine applies b3's first two events right before the batch
	// writes: the batch read b3 as missing, so its insert misses.
	other := newEngine(t, base, retry.Default())
	store := &racingStore{Store: base, before: func() {
		for _, ev := range lives["b3"][:2] {
			other.Handle(context.Background(), ev)
		}
	}}
	e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()}, projector.WithRetry(patient()))
	if err != nil {
		t.Fatal(err)
	}
	results := e.HandleBatch(context.Background(), all)
	applied, dups := 0, 0
	for i, rs := range results {
		if len(rs) != 1 {
			t.Fatalf("event %d: %d results", i, len(rs))
		}
		switch rs[0].Outcome {
		case projector.Applied:
			applied++
		case projector.Duplicate:
			dups++
		default:
			t.Fatalf("event %d: %v %v", i, rs[0].Outcome, rs[0].Err)
		}
	}
	// b3's two events were applied by the other engine: duplicates here.
	if applied != 96-2 || dups != len(all)-applied {
		t.Fatalf("applied %d, duplicates %d of %d deliveries", applied, dups, len(all))
	}
	for id, evs := range lives {
		assertDocument(t, base, id, evs)
	}
}

func TestHandleBatch_a_missing_predecessor_goes_through_the_gate(t *testing.T) {
	s := newStore(t)
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("g1"), cart.RandomLife(rand.New(rand.NewPCG(5, 5)), "g1", "c", 6, t0)...)
	p := patient()
	p.MaxElapsed = 300 * time.Millisecond // the predecessor never comes
	e := newEngine(t, s, p)
	results := e.HandleBatch(context.Background(), evs[2:]) // revisions 2..5 without 0 and 1
	for i, rs := range results {
		if rs[0].Outcome != projector.Failed {
			t.Fatalf("event %d: %v", i, rs[0].Outcome)
		}
	}
	results = e.HandleBatch(context.Background(), evs) // all of them now
	for i, rs := range results {
		if rs[0].Outcome != projector.Applied {
			t.Fatalf("event %d: %v %v", i, rs[0].Outcome, rs[0].Err)
		}
	}
	assertDocument(t, s, "g1", evs)
}
