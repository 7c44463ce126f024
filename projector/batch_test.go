package projector_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
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

func (s *racingStore) WriteMany(ctx context.Context, collection string, writes []driver.Write) ([]bool, error) {
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
	// writes: the batch took b3 for new (its first event here creates it),
	// so its insert misses.
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

func TestHandleBatch_again_is_all_duplicates(t *testing.T) {
	s := newStore(t)
	log := projectortest.NewLog(cart.Registry())
	r := rand.New(rand.NewPCG(6, 6))
	lives := map[string][]projector.Event{}
	var all []projector.Event
	for i := range 5 {
		id := fmt.Sprint("d", i)
		lives[id] = log.MustAppend(t, cart.StreamID(id), cart.RandomLife(r, id, "c", 6, t0)...)
		all = append(all, lives[id]...)
	}
	e := newEngine(t, s, patient())
	first := e.HandleBatch(context.Background(), all)
	// The same batch again, as after a restart from an older checkpoint: the
	// documents exist, so the inserts of the creations miss and the gate
	// finds every event applied. And a batch that starts mid-stream reads
	// the documents first.
	again := e.HandleBatch(context.Background(), all)
	mid := e.HandleBatch(context.Background(), all[3:])
	for i := range all {
		if got := first[i][0].Outcome; got != projector.Applied {
			t.Fatalf("first, event %d: %v %v", i, got, first[i][0].Err)
		}
		if got := again[i][0].Outcome; got != projector.Duplicate {
			t.Fatalf("again, event %d: %v %v", i, got, again[i][0].Err)
		}
	}
	for i := range mid {
		if got := mid[i][0].Outcome; got != projector.Duplicate {
			t.Fatalf("mid-stream, event %d: %v %v", i+3, got, mid[i][0].Err)
		}
	}
	for id, evs := range lives {
		assertDocument(t, s, id, evs)
	}
}

func TestHandleBatch_refuses_a_second_creation_as_the_gate_does(t *testing.T) {
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("twice"),
		cart.ShoppingCartOpened{ShoppingCartID: "twice", ClientID: "a", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "twice", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
		cart.ShoppingCartOpened{ShoppingCartID: "twice", ClientID: "b", OpenedAt: t0},
	)
	perEvent, batched := newStore(t), newStore(t)
	var one [][]projector.Result
	e := newEngine(t, perEvent, patient())
	for _, ev := range evs {
		rs, _ := e.Handle(context.Background(), ev)
		one = append(one, rs)
	}
	all := newEngine(t, batched, patient()).HandleBatch(context.Background(), evs)
	for i := range evs {
		if one[i][0].Outcome != all[i][0].Outcome || errors.Is(one[i][0].Err, projector.ErrAlreadyCreated) != errors.Is(all[i][0].Err, projector.ErrAlreadyCreated) {
			t.Fatalf("event %d: per event %v (%v), batched %v (%v)", i, one[i][0].Outcome, one[i][0].Err, all[i][0].Outcome, all[i][0].Err)
		}
	}
	if !errors.Is(all[2][0].Err, projector.ErrAlreadyCreated) {
		t.Fatalf("second creation: %v %v", all[2][0].Outcome, all[2][0].Err)
	}
	// Each path says what Create means, and the way out.
	for _, res := range []projector.Result{one[2][0], all[2][0]} {
		if msg := fmt.Sprint(res.Err); !strings.Contains(msg, "registered with Create") || !strings.Contains(msg, "register it with On") {
			t.Errorf("second creation: %v; want it to say what Create means, and On", msg)
		}
	}
	assertDocument(t, batched, "twice", evs[:2])
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

func TestRunner_batch_stops_at_its_first_failed_event_instead_of_waiting_out_each(t *testing.T) {
	s := newStore(t)
	all, _ := cartEvents(t, 20)
	// Every cart's creation is missing: each document waits for a
	// predecessor that never comes. The first to give up stops the run; the
	// other documents of its batch must not each wait out the policy.
	var src scripted
	for _, ev := range all {
		if ev.StreamRevision > 0 {
			src.events = append(src.events, ev)
		}
	}
	p := patient()
	p.MaxElapsed = 200 * time.Millisecond
	r, err := projector.NewRunner("stops", newEngine(t, s, p), &src, s, projector.WithWorkers(1), projector.WithReconnect(fastReconnect()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.Run(ctx)
	if !errors.Is(err, projector.ErrPredecessorMissing) {
		t.Fatalf("Run: %v", err)
	}
	st := r.Stats()
	if st.Batches == 0 || st.Failed != 1 || st.Applied != 0 || st.Abandoned != uint64(len(src.events))-1 {
		t.Fatalf("want 1 failed and the other %d abandoned, in batches: %+v", len(src.events)-1, st)
	}
	if cp, err := s.LoadCheckpoint(context.Background(), "stops"); err != nil || cp != nil {
		t.Fatalf("checkpoint %v (%v), want none", cp, err)
	}
}

// stalledStore holds every write until released: a MongoDB that has stopped
// answering.
type stalledStore struct {
	*mongostore.Store
	release chan struct{}
}

func (s *stalledStore) hold(ctx context.Context) {
	select {
	case <-s.release:
	case <-ctx.Done():
	}
}

func (s *stalledStore) WriteMany(ctx context.Context, collection string, writes []driver.Write) ([]bool, error) {
	s.hold(ctx)
	return s.Store.WriteMany(ctx, collection, writes)
}

func (s *stalledStore) Insert(ctx context.Context, collection, id string, revision driver.Head, state any) error {
	s.hold(ctx)
	return s.Store.Insert(ctx, collection, id, revision, state)
}

func (s *stalledStore) Update(ctx context.Context, collection, id string, from uint64, revision driver.Head, state any) (bool, error) {
	s.hold(ctx)
	return s.Store.Update(ctx, collection, id, from, revision, state)
}

func TestRunner_a_stalled_store_stops_the_reading_at_the_buffers(t *testing.T) {
	base := newStore(t)
	all, by := cartEvents(t, 26)
	store := &stalledStore{Store: base, release: make(chan struct{})}
	const workers, buffer, batch = 2, 4, 3
	r, err := projector.NewRunner("stalled", newEngine(t, store, patient()), &scripted{events: all}, base,
		projector.WithWorkers(workers), projector.WithBuffer(buffer), projector.WithBatch(batch, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	// Each worker holds a batch in the stalled write and a full buffer; the
	// reader holds one more event, blocked on a full buffer.
	bound := uint64(workers*(buffer+batch) + 1)
	last, still := uint64(0), 0
	for still < 20 {
		time.Sleep(10 * time.Millisecond)
		n := r.Stats().Events
		if n > bound {
			t.Fatalf("read %d events while the store was stalled; the buffers hold %d", n, bound)
		}
		if n == last && n > 0 {
			still++
		} else {
			last, still = n, 0
		}
	}
	if last >= uint64(len(all)) {
		t.Fatalf("read all %d events while the store was stalled", last)
	}
	close(store.release)
	for r.Stats().Applied < uint64(len(all)) {
		select {
		case err := <-done:
			t.Fatalf("Run ended: %v (%+v)", err, r.Stats())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	for id, evs := range by {
		assertDocument(t, base, id, evs)
	}
}

// noBulkWrites refuses every bulk write: every document of a batch goes
// through the gate.
type noBulkWrites struct{ *mongostore.Store }

func (noBulkWrites) WriteMany(context.Context, string, []driver.Write) ([]bool, error) {
	return nil, errors.New("bulk writes refused")
}

func TestRunner_a_failure_in_one_of_two_projections_stops_the_batched_run(t *testing.T) {
	base := newStore(t)
	log := projectortest.NewLog(cart.Registry())
	var all []projector.Event
	for _, id := range []string{"m1", "m2", "m3"} {
		all = append(all, log.MustAppend(t, cart.StreamID(id),
			cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c", OpenedAt: t0},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p-" + id, Quantity: 1}},
		)...)
	}
	// picky refuses m2's item; cart_details takes everything.
	picky := projector.New[cart.Details]("picky", projector.StreamSuffix(cart.StreamPrefix))
	projector.Create(picky, func(e cart.ShoppingCartOpened) (cart.Details, error) { return cart.Details{ClientID: e.ClientID}, nil })
	projector.On(picky, func(d cart.Details, e cart.ProductItemAddedToShoppingCart) (cart.Details, error) {
		if e.ProductItem.ProductID == "p-m2" {
			return d, errors.New("no such product")
		}
		return d, nil
	})
	e := newEngine(t, noBulkWrites{base}, patient(), picky, cart.NewDetailsProjection())
	r, err := projector.NewRunner("two", e, &scripted{events: all}, base, projector.WithWorkers(1), projector.WithBatch(100, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "no such product") {
		t.Fatalf("Run: %v, want the failure of picky", err)
	}
	if st := r.Stats(); st.Batches == 0 || st.Failed != 1 {
		t.Fatalf("want 1 failed event, in batches: %+v", st)
	}
}

func TestHandleBatch_does_not_count_duplicates_on_a_stale_cache(t *testing.T) {
	s := newStore(t)
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("gone"), cart.RandomLife(rand.New(rand.NewPCG(8, 8)), "gone", "c", 5, t0)...)
	p := patient()
	p.MaxElapsed = 200 * time.Millisecond
	e := newEngine(t, s, p)
	for i, rs := range e.HandleBatch(context.Background(), evs) {
		if rs[0].Outcome != projector.Applied {
			t.Fatalf("event %d: %v %v", i, rs[0].Outcome, rs[0].Err)
		}
	}
	// The document goes behind the store's back; the events come again.
	if _, err := s.Database().Collection(cart.DetailsName).DeleteOne(context.Background(), map[string]string{"_id": "gone"}); err != nil {
		t.Fatal(err)
	}
	for i, rs := range e.HandleBatch(context.Background(), evs[1:]) {
		if rs[0].Outcome == projector.Duplicate {
			t.Fatalf("event %d counted a duplicate of a document that is not there", i+1)
		}
	}
}

// A run that stops at a failed event abandons what is queued: it is never
// caught up, though its source reached the head and nothing is in flight.
func TestRunner_a_run_stopped_at_a_failed_event_is_not_caught_up(t *testing.T) {
	s := newStore(t)
	all, _ := cartEvents(t, 20)
	var src scripted
	for _, ev := range all {
		if ev.StreamRevision > 0 {
			src.events = append(src.events, ev)
		}
	}
	p := patient()
	p.MaxElapsed = 200 * time.Millisecond
	r, err := projector.NewRunner("not-ready", newEngine(t, s, p), &src, s, projector.WithWorkers(1), projector.WithReconnect(fastReconnect()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Run(ctx); !errors.Is(err, projector.ErrPredecessorMissing) {
		t.Fatalf("Run: %v", err)
	}
	if st := r.Stats(); st.Abandoned == 0 || r.CaughtUp() || st.CaughtUp {
		t.Fatalf("after a failed run with %d events abandoned: caught up %v", st.Abandoned, r.CaughtUp())
	}
}

// Two HandleBatch calls on one engine that overlap on a document (events
// delivered twice, in two batches at once) leave it the fold of its events,
// each event applied once: a batch takes its place in the document's queue
// as Handle does, so the later one reads what the earlier one wrote.
func TestHandleBatch_two_overlapping_batches_on_one_document_are_exact(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			s := newStore(t)
			e := newEngine(t, s, patient())
			log := projectortest.NewLog(cart.Registry())
			evs := log.MustAppend(t, cart.StreamID("o"), cart.RandomLife(rand.New(rand.NewPCG(uint64(round), 11)), "o", "client", 15, t0)...)
			for _, ev := range evs[:5] {
				handle(t, e, ev)
			}
			batches := [][]projector.Event{evs[5:10], evs[5:15]}
			results := make([][][]projector.Result, 2)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, b := range batches {
				wg.Go(func() {
					<-start
					results[i] = e.HandleBatch(context.Background(), b)
				})
			}
			close(start)
			wg.Wait()
			applied := map[uint64]int{}
			for i, rs := range results {
				for j, r := range rs {
					if len(r) != 1 || (r[0].Outcome != projector.Applied && r[0].Outcome != projector.Duplicate) {
						t.Fatalf("batch %d, event %d: %+v", i, j, r)
					}
					if r[0].Outcome == projector.Applied {
						applied[batches[i][j].StreamRevision]++
					}
				}
			}
			for rev := uint64(5); rev < 15; rev++ {
				if applied[rev] != 1 {
					t.Errorf("revision %d applied %d times", rev, applied[rev])
				}
			}
			assertDocument(t, s, "o", evs)
		})
	}
}

// A batch is bounded by its events' bytes as well as by their number: large
// events make small batches, so that what batches hold depends on the
// settings, not on the events.
func TestRunner_batches_are_bounded_in_bytes(t *testing.T) {
	s := newStore(t)
	log := projectortest.NewLog(cart.Registry())
	pad := []byte(`{"pad":"` + strings.Repeat("x", 100<<10) + `"}`) // 100 KiB of metadata an event
	var all []projector.Event
	carts := map[string][]projector.Event{}
	for i := range 12 {
		id := fmt.Sprintf("big%02d", i)
		evs, err := log.AppendWithMetadata(cart.StreamID(id), pad,
			cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c", OpenedAt: t0},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "q", Quantity: 2}},
			cart.ShoppingCartConfirmed{ShoppingCartID: id, ConfirmedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		all, carts[id] = append(all, evs...), evs
	}
	r, err := projector.NewRunner("big", newEngine(t, s, patient()), &scripted{events: all}, s, projector.WithWorkers(1),
		projector.WithBatch(1000, 200*time.Millisecond), projector.WithBatchBytes(512<<10))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for r.Stats().Applied < uint64(len(all)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	st := r.Stats()
	if st.Applied != uint64(len(all)) || st.Batches == 0 {
		t.Fatalf("applied %d of %d, %d batches", st.Applied, len(all), st.Batches)
	}
	// 512 KiB holds 5 events of 100 KiB; the sixth fills it.
	if mean := float64(st.Batched) / float64(st.Batches); mean > 6 {
		t.Fatalf("%d events in %d batches (%.1f a batch), want at most 6 a batch under 512 KiB", st.Batched, st.Batches, mean)
	}
	for id, evs := range carts {
		if err := projectortest.CheckDocument(context.Background(), s, cart.NewDetailsProjection(), id, evs); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

// overlapStore records whether a batch's write of a document starts while
// a write of the same document by one event is in the store: it holds the
// one-event write there until a batch write comes or a second has passed.
type overlapStore struct {
	*mongostore.Store
	inUpdate  atomic.Bool
	batchCame chan struct{}
	overlap   atomic.Bool
	updates   atomic.Int32
	updating  chan struct{}
}

func (s *overlapStore) Update(ctx context.Context, collection, id string, from uint64, revision driver.Head, state any) (bool, error) {
	if s.updates.Add(1) == 1 {
		s.inUpdate.Store(true)
		close(s.updating)
		select {
		case <-s.batchCame:
		case <-time.After(time.Second):
		}
		defer s.inUpdate.Store(false)
	}
	return s.Store.Update(ctx, collection, id, from, revision, state)
}

func (s *overlapStore) WriteMany(ctx context.Context, collection string, writes []driver.Write) ([]bool, error) {
	if s.inUpdate.Load() {
		s.overlap.Store(true)
		close(s.batchCame)
	}
	return s.Store.WriteMany(ctx, collection, writes)
}

// An event handled alone is writing its document (read at revision 2, its
// own is 3) when a batch comes with the document's events 2 to 5 (2 and 3
// delivered again). The batch's place in the document's queue is revision
// 2, before the event's, so the queue does not hold it back: the
// document's lock must, or both write the document from revision 2 at
// once. (MongoDB's conditional update lets one of them through; FerretDB
// checks and then writes, and can apply revision 3 twice.)
func TestHandleBatch_waits_for_a_write_of_its_document_by_an_event_handled_alone(t *testing.T) {
	base := newStore(t)
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("ov"), cart.RandomLife(rand.New(rand.NewPCG(9, 9)), "ov", "c", 6, t0)...)
	if len(evs) < 6 {
		t.Fatalf("%d events, want 6", len(evs))
	}
	store := &overlapStore{Store: base, batchCame: make(chan struct{}), updating: make(chan struct{})}
	e := newEngine(t, store, patient())
	for _, rs := range e.HandleBatch(context.Background(), evs[:3]) {
		if len(rs) != 1 || rs[0].Outcome != projector.Applied {
			t.Fatalf("first batch: %+v", rs)
		}
	}
	var alone []projector.Result
	done := make(chan struct{})
	go func() {
		defer close(done)
		alone, _ = e.Handle(context.Background(), evs[3])
	}()
	<-store.updating
	results := e.HandleBatch(context.Background(), evs[2:6])
	<-done
	if store.overlap.Load() {
		t.Error("the batch wrote the document while the event handled alone was writing it")
	}
	applied := 0
	for _, rs := range append(results, alone) {
		if len(rs) != 1 || rs[0].Err != nil {
			t.Fatalf("results %+v", rs)
		}
		if rs[0].Outcome == projector.Applied {
			applied++
		}
	}
	if applied != 3 {
		t.Errorf("%d events applied, want 3 (revisions 3, 4 and 5, once each)", applied)
	}
	assertDocument(t, base, "ov", evs[:6])
}

// writeCounting counts the bulk writes of documents.
type writeCounting struct {
	*mongostore.Store
	bulk atomic.Int32
}

func (s *writeCounting) WriteMany(ctx context.Context, collection string, writes []driver.Write) ([]bool, error) {
	s.bulk.Add(1)
	return s.Store.WriteMany(ctx, collection, writes)
}

// A tombstone in the middle of a batch, after its stream's events: the
// rest of the batch is not split around it (one bulk write for the twelve
// carts), and the deletion policy applies to its stream's document after
// that document's events.
func TestHandleBatch_a_deletion_record_costs_its_streams_document_only(t *testing.T) {
	base := newStore(t)
	store := &writeCounting{Store: base}
	e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{cart.NewDetailsProjection().OnDelete(projector.RemoveDocument)},
		projector.WithRetry(patient()))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	r := rand.New(rand.NewPCG(5, 5))
	lives := map[string][]projector.Event{}
	var batch []projector.Event
	for round := range 4 {
		for i := range 12 {
			id := fmt.Sprint("d", i)
			if round == 0 {
				lives[id] = log.MustAppend(t, cart.StreamID(id), cart.RandomLife(r, id, "c", 4, t0)...)
			}
			if round < len(lives[id]) {
				batch = append(batch, lives[id][round])
			}
		}
		if round == 1 {
			// d3 is deleted after its first two events; its later ones
			// never come.
			batch = append(batch, projector.Event{ID: "t-d3", Type: "$streamDeleted", StreamID: cart.StreamID("d3"),
				StreamRevision: math.MaxInt64, Position: 10_000, Created: t0})
		}
	}
	batch = slices.DeleteFunc(batch, func(ev projector.Event) bool {
		return ev.StreamID == cart.StreamID("d3") && ev.Type != "$streamDeleted" && ev.StreamRevision >= 2
	})
	for i, rs := range e.HandleBatch(context.Background(), batch) {
		for _, res := range rs {
			if res.Outcome == projector.Failed {
				t.Fatalf("event %d: %v", i, res.Err)
			}
		}
	}
	if n := store.bulk.Load(); n != 1 {
		t.Errorf("%d bulk writes, want 1: the batch was split around the record", n)
	}
	for id, evs := range lives {
		found, _, err := projector.ReadDocument(context.Background(), base, cart.NewDetailsProjection(), id, nil)
		switch {
		case err != nil:
			t.Fatal(err)
		case id == "d3" && found:
			t.Errorf("d3 is still there after its tombstone")
		case id != "d3":
			assertDocument(t, base, id, evs)
		}
	}
}
