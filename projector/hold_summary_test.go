package projector_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
)

// countingStore counts the hold policy's looks at a held document: its
// holds, and its reads of a document's meta.
type countingStore struct {
	*mongostore.Store
	holds, metas, puts atomic.Int64
}

func (s *countingStore) PutGuarded(ctx context.Context, collection, id string, expected int64, meta driver.Meta, state any) (bool, error) {
	s.puts.Add(1)
	return s.Store.PutGuarded(ctx, collection, id, expected, meta, state)
}

func (s *countingStore) Holds(ctx context.Context, projection, collection, document string) (int, error) {
	s.holds.Add(1)
	return s.Store.Holds(ctx, projection, collection, document)
}

func (s *countingStore) LoadGuarded(ctx context.Context, collection, id string, state any) (driver.Meta, bool, error) {
	if state == nil {
		s.metas.Add(1)
	}
	return s.Store.LoadGuarded(ctx, collection, id, state)
}

// A summary held under Hold meets every later event of all its streams: a
// client's carts, here 240 events behind one that does not decode. They
// are held in order, each once, the others' documents go on; and a batch
// looks at the holds and reads the held document once for all of its
// events, not once each (on the embedded server each look costs a round
// trip, and a summary held for long held about 10 events a second).
func TestHold_a_held_summary_holds_a_batchs_events_with_one_look(t *testing.T) {
	p := cart.NewClientSummaryProjection().OnFailure(projector.Hold)
	all, byClient, _ := heldSummaryLog(t)
	s := &countingStore{Store: newStore(t)}
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()), projector.WithParker(s),
		projector.WithStreamReader(newStreams(all...)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := projector.NewRunner("held", e, &scripted{events: all}, s, projector.WithWorkers(4), projector.WithReconnect(fastReconnect()))
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1].Position
	_ = runUntil(t, r, func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position == last })
	ctx := context.Background()
	held, err := s.Held(ctx, p.Name(), p.Collection())
	if err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if len(held) != 1 || held["client0"] == 0 || st.Held != uint64(held["client0"]) || st.Failed != 0 {
		t.Fatalf("held documents %v, %d events held, %d failed; want client0 alone holding its events, each counted once", held, st.Held, st.Failed)
	}
	for client, evs := range byClient {
		if client == "client0" {
			continue
		}
		if err := projectortest.CheckDocument(ctx, s, p, client, evs); err != nil {
			t.Error(err)
		}
	}
	if looks := s.holds.Load() + s.metas.Load(); looks >= int64(st.Held) {
		t.Errorf("%d looks at the holds and reads of the held document for %d events held: want fewer than one an event", looks, st.Held)
	}
}

// heldSummaryLog is 200 carts of 8 clients, 8 events each at most,
// interleaved, with an event that does not decode (all[bad]) in client0's
// third round: undecoded, as delivered, and each client's decoded events
// in log order (the bad one left out).
func heldSummaryLog(t *testing.T) (all []projector.Event, byClient map[string][]projector.Event, bad int) {
	lives, meta := cart.Shop(200, 8, 7)
	log := projectortest.NewLog(cart.Registry())
	streams := make([]string, 0, len(lives))
	for s := range lives {
		streams = append(streams, s)
	}
	slices.Sort(streams)
	byClient = map[string][]projector.Event{}
	for i := range 8 {
		for _, s := range streams {
			if i < len(lives[s]) {
				evs, err := log.AppendWithMetadata(s, meta(s), lives[s][i])
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, evs...)
				c, _ := cart.ClientOf(evs[0])
				byClient[c] = append(byClient[c], evs[0])
			}
			if i == 2 && s == streams[0] {
				evs, err := log.AppendWithMetadata(s, meta(s), cart.ProductItemAddedToShoppingCart{ShoppingCartID: "cart000"})
				if err != nil {
					t.Fatal(err)
				}
				evs[0].Data = []byte(`{"shoppingCartId":"cart000","productItem":"not-an-object"}`)
				bad = len(all)
				all = append(all, evs[0])
			}
		}
	}
	for i := range all {
		all[i].Payload = nil
	}
	return all, byClient, bad
}

// A summary held behind many events (client0's, behind one that does not
// decode) is replayed, once fixed, with one write of the document for all
// of them, folded as a batch folds them, not one write each: a summary
// held behind 1,630 events took minutes to replay, its whole state read
// and written per event. The document then equals the fold of its events.
func TestHold_replay_of_a_held_summary_writes_it_once(t *testing.T) {
	p := cart.NewClientSummaryProjection().OnFailure(projector.Hold)
	all, _, bad := heldSummaryLog(t)
	s := &countingStore{Store: newStore(t)}
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()), projector.WithParker(s),
		projector.WithStreamReader(newStreams(all...)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := projector.NewRunner("held", e, &scripted{events: all}, s, projector.WithWorkers(2), projector.WithReconnect(fastReconnect()))
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1].Position
	_ = runUntil(t, r, func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position == last })
	_, held, _ := parkedRecords(t, s.Store, p.Name())
	if len(held) < 20 {
		t.Fatalf("%d events held, want client0's behind the bad one", len(held))
	}
	// The fix: the bad event as it should have been written.
	fixed := []byte(`{"shoppingCartId":"cart000","productItem":{"productId":"fixed","quantity":2}}`)
	for i := range held {
		if held[i].ID == all[bad].ID {
			held[i].Data = fixed
		}
	}
	before := s.puts.Load()
	ctx := context.Background()
	if rep := e.ReplayHeld(ctx, p.Name(), held); len(rep.Left) != 0 || len(rep.Applied) != len(held) {
		t.Fatalf("replay: %d applied, %d left of %d: %v", len(rep.Applied), len(rep.Left), len(held), rep.Err)
	}
	if n := s.puts.Load() - before; n != 1 {
		t.Errorf("%d writes of the summary for %d held events, want one", n, len(held))
	}
	var want []projector.Event
	for i, ev := range all {
		if c, _ := cart.ClientOf(ev); c != "client0" {
			continue
		}
		if i == bad {
			ev.Data = fixed
		}
		d, err := cart.Registry().Decode(ev)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, d)
	}
	if err := projectortest.CheckDocument(ctx, s, p, "client0", want); err != nil {
		t.Fatal(err)
	}
}
