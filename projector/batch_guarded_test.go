package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
)

// puttingStore counts versioned writes, in all and by document.
type puttingStore struct {
	*mongostore.Store
	puts  atomic.Int64
	mu    sync.Mutex
	byDoc map[string]int
}

func (s *puttingStore) PutGuarded(ctx context.Context, collection, id string, expected int64, meta driver.Meta, state any) (bool, error) {
	s.puts.Add(1)
	s.mu.Lock()
	if s.byDoc == nil {
		s.byDoc = map[string]int{}
	}
	s.byDoc[id]++
	s.mu.Unlock()
	return s.Store.PutGuarded(ctx, collection, id, expected, meta, state)
}

// Batches fold versioned documents too: the per-client summaries (fed by
// many cart streams, under RevisionMap) are read and written once per batch
// instead of once per event, and come out as the per-event path makes
// them, with each event applied once, under duplicates.
func TestHandleBatch_folds_summaries_fed_by_many_streams_as_the_per_event_path_does(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	log := projectortest.NewLog(cart.Registry())
	var order []string
	lives := map[string][]any{}
	client := map[string]string{}
	for i := range 30 {
		id := fmt.Sprintf("s%02d", i)
		client[id] = fmt.Sprintf("client-%d", i%3)
		lives[id] = cart.RandomLife(r, id, client[id], 8, t0)
		for range lives[id] {
			order = append(order, id)
		}
	}
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var all []projector.Event
	next := map[string]int{}
	for _, id := range order {
		meta, _ := json.Marshal(cart.Metadata{ClientID: client[id]})
		evs, err := log.AppendWithMetadata(cart.StreamID(id), meta, lives[id][next[id]])
		if err != nil {
			t.Fatal(err)
		}
		next[id]++
		ev := evs[0]
		ev.Payload = nil
		all = append(all, ev)
	}
	deliveries := projectortest.Redeliver(r, all, 2)

	run := func(batched bool) (*mongostore.Store, int64, int) {
		base := newStore(t)
		s := &puttingStore{Store: base}
		e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewClientSummaryProjection()}, projector.WithRetry(patient()))
		if err != nil {
			t.Fatal(err)
		}
		applied := 0
		count := func(rs []projector.Result) {
			for _, res := range rs {
				switch res.Outcome {
				case projector.Applied:
					applied++
				case projector.Duplicate:
				default:
					t.Fatalf("%v %v", res.Outcome, res.Err)
				}
			}
		}
		if batched {
			for start := 0; start < len(deliveries); start += 60 {
				for _, rs := range e.HandleBatch(context.Background(), deliveries[start:min(start+60, len(deliveries))]) {
					count(rs)
				}
			}
		} else {
			for _, ev := range deliveries {
				rs, err := e.Handle(context.Background(), ev)
				if err != nil {
					t.Fatal(err)
				}
				count(rs)
			}
		}
		return base, s.puts.Load(), applied
	}
	batchedStore, batchedPuts, batchedApplied := run(true)
	eachStore, eachPuts, eachApplied := run(false)
	if batchedApplied != len(all) || eachApplied != len(all) {
		t.Fatalf("applied %d batched and %d one by one, want each of the %d events once", batchedApplied, eachApplied, len(all))
	}
	p := cart.NewClientSummaryProjection()
	for c := range 3 {
		id := fmt.Sprintf("client-%d", c)
		var got, want cart.ClientSummary
		if found, _, err := projector.ReadDocument(context.Background(), batchedStore, p, id, &got); err != nil || !found {
			t.Fatalf("batched %s: %v %v", id, found, err)
		}
		if found, _, err := projector.ReadDocument(context.Background(), eachStore, p, id, &want); err != nil || !found {
			t.Fatalf("one by one %s: %v %v", id, found, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s:\n batched    %+v\n one by one %+v", id, got, want)
		}
	}
	if batchedPuts*3 > eachPuts {
		t.Fatalf("%d versioned writes batched, %d one by one: want the batches to write each summary about once per batch", batchedPuts, eachPuts)
	}
	t.Logf("versioned writes: %d batched, %d one by one, for %d events", batchedPuts, eachPuts, len(all))
}

// In a runner of client summaries (spread by document), an event whose
// payload does not decode among its client's 30 others is passed over in
// its document's batch, under park (recorded first): no one-document write
// of its document nor of the other client's; every summary is the fold of
// its other events. (A third client's cart comes last: at the head a batch
// may hold one event, which goes the per-event path, and that is its.)
func TestRunner_an_undecodable_event_under_park_is_passed_over_in_its_documents_batch(t *testing.T) {
	base := newStore(t)
	store := &puttingStore{Store: base}
	summary := cart.NewClientSummaryProjection()
	e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{summary}, projector.WithRetry(patient()),
		projector.WithFailurePolicy(projector.Park), projector.WithParker(base))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	r := rand.New(rand.NewPCG(8, 8))
	byClient := map[string][]projector.Event{}
	var all []projector.Event
	for i := range 7 {
		id, who := fmt.Sprint("u", i), []string{"x", "y"}[i%2]
		if i == 6 {
			who = "z"
		}
		life := cart.RandomLife(r, id, who, 10, t0)
		evs, err := log.AppendWithMetadata(cart.StreamID(id), []byte(`{"clientId":"`+who+`"}`), life...)
		if err != nil {
			t.Fatal(err)
		}
		byClient[who] = append(byClient[who], evs...)
		all = append(all, evs...)
	}
	// The third event of u2 (client x), its payload broken.
	bad := slices.IndexFunc(all, func(ev projector.Event) bool { return ev.StreamID == cart.StreamID("u2") && ev.StreamRevision == 2 })
	all[bad].Data = []byte(`{"productItem": 12`)
	byClient["x"] = slices.DeleteFunc(byClient["x"], func(ev projector.Event) bool { return ev.ID == all[bad].ID })
	for i := range all {
		all[i].Payload = nil // delivered encoded
	}
	runner, err := projector.NewRunner("split", e, &scripted{events: all}, base, projector.WithWorkers(1), projector.WithBatch(100, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1].Position
	if err := runUntil(t, runner, func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position == last }); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	store.mu.Lock()
	if x, y := store.byDoc["x"], store.byDoc["y"]; x != 0 || y != 0 {
		t.Errorf("one-document writes: %d of x, %d of y; want none: the undecodable event passed over in x's batch", x, y)
	}
	store.mu.Unlock()
	for who, evs := range byClient {
		if err := projectortest.CheckDocument(context.Background(), base, summary, who, evs); err != nil {
			t.Error(err)
		}
	}
	if st := runner.Stats(); st.Parked != 1 || st.Failed != 0 {
		t.Errorf("stats %+v, want 1 parked", st)
	}
}
