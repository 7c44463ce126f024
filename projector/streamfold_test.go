package projector_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
)

// streams is the events of each stream, as an event store reads them back
// ([projector.StreamHistory]), counting the reads: without their log
// positions, as a node's read of a stream gives them (2^64-1).
type streams struct {
	mu     sync.Mutex
	events map[string][]projector.Event
	reads  map[string]int
	fail   string // a stream whose reads fail half-way
}

func newStreams(evs ...projector.Event) *streams {
	s := &streams{events: map[string][]projector.Event{}, reads: map[string]int{}}
	s.add(evs...)
	return s
}

func (s *streams) add(evs ...projector.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range evs {
		ev.Payload = nil // read back encoded, as from a server
		ev.Position = math.MaxUint64
		s.events[ev.StreamID] = append(s.events[ev.StreamID], ev)
	}
}

func (s *streams) FirstRevision(context.Context, string) (uint64, error) { return 0, nil }

func (s *streams) ReadStream(_ context.Context, stream string, from uint64, each func(projector.Event) error) error {
	s.mu.Lock()
	s.reads[stream]++
	evs := append([]projector.Event(nil), s.events[stream]...)
	fail := s.fail == stream
	s.mu.Unlock()
	for i, ev := range evs {
		if fail && i == len(evs)/2 {
			return errors.New("connection lost")
		}
		if ev.StreamRevision < from {
			continue
		}
		if err := each(ev); errors.Is(err, projector.ErrStopRead) {
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

func (s *streams) readsOf(stream string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[stream]
}

// interleaved appends n carts of size events each, their events shuffled
// over the log (each cart's in order), and returns the log's events and
// each cart's.
func interleaved(t *testing.T, r *rand.Rand, n, size int) (all []projector.Event, carts map[string][]projector.Event) {
	t.Helper()
	log := projectortest.NewLog(cart.Registry())
	lives := map[string][]any{}
	var order []string
	for i := range n {
		id := fmt.Sprintf("c%03d", i)
		lives[id] = cart.RandomLife(r, id, "client", size, t0)
		for range lives[id] {
			order = append(order, id)
		}
	}
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	carts = map[string][]projector.Event{}
	for _, id := range order {
		ev := log.MustAppend(t, cart.StreamID(id), lives[id][len(carts[id])])[0]
		carts[id] = append(carts[id], ev)
		all = append(all, ev)
	}
	return all, carts
}

func foldEngine(t *testing.T, s *mongostore.Store, h projector.StreamReader, opts ...projector.Option) *projector.Engine {
	t.Helper()
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		append([]projector.Option{projector.WithRetry(patient()), projector.WithStreamReader(h)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func handleInBatches(t *testing.T, e *projector.Engine, events []projector.Event, size int) (applied, duplicates int) {
	t.Helper()
	for len(events) > 0 {
		n := min(size, len(events))
		for i, rs := range e.HandleBatch(context.Background(), events[:n]) {
			for _, r := range rs {
				switch r.Outcome {
				case projector.Applied:
					applied++
				case projector.Duplicate:
					duplicates++
				default:
					t.Fatalf("%s@%d: %v %v", events[i].StreamID, events[i].StreamRevision, r.Outcome, r.Err)
				}
			}
		}
		events = events[n:]
	}
	return applied, duplicates
}

func checkCarts(t *testing.T, s *mongostore.Store, carts map[string][]projector.Event) {
	t.Helper()
	for id, evs := range carts {
		if err := projectortest.CheckDocument(context.Background(), s, cart.NewDetailsProjection(), id, evs); err != nil {
			t.Error(err)
		}
	}
}

// Batches fold a document from its stream's whole history the first time
// they meet it, and pass over its later events without reading its stream
// again: each stream is read once, and every document equals the fold,
// however the carts interleave. Each event counts as applied once, on its
// first delivery (the fold applied it ahead), so the counts and metrics say
// what happened to the catch-up's events. Delivered again, or by a new
// engine from the middle (a restart), nothing is applied twice.
func TestStreamFold_each_stream_read_once_and_every_document_the_fold(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	all, carts := interleaved(t, r, 60, 12)
	s := newStore(t)
	h := newStreams(all...)
	e := foldEngine(t, s, h)
	applied, duplicates := handleInBatches(t, e, all, 37)
	checkCarts(t, s, carts)
	if applied != len(all) || duplicates != 0 {
		t.Fatalf("applied %d, duplicates %d of %d: want each event applied once", applied, duplicates, len(all))
	}
	for id := range carts {
		if n := h.readsOf(cart.StreamID(id)); n != 1 {
			t.Errorf("stream of %s read %d times, want once", id, n)
		}
	}
	// Delivered again, by the same engine and by a new one from the middle.
	if a, _ := handleInBatches(t, e, projectortest.Redeliver(r, all, 2), 29); a != 0 {
		t.Fatalf("%d events applied again", a)
	}
	restarted := foldEngine(t, s, h)
	if a, _ := handleInBatches(t, restarted, all[len(all)/2:], 41); a != 0 {
		t.Fatalf("%d events applied again after a restart", a)
	}
	checkCarts(t, s, carts)
}

// gateReads counts the documents read one at a time (through the gate), as
// against those read together by batches.
type gateReads struct {
	*mongostore.Store
	mu  sync.Mutex
	ids map[string]int
}

func (g *gateReads) Load(ctx context.Context, coll, id string, min uint64, state any) (driver.Head, bool, error) {
	g.mu.Lock()
	g.ids[id]++
	g.mu.Unlock()
	return g.Store.Load(ctx, coll, id, min, state)
}

// A new process (a restart, or a segment taken over) resumes from a
// checkpoint behind documents a stream fold wrote ahead of their events'
// delivery: the first batch that reads such a document from the server
// notes its revision, and the stream's later events up to it pass as
// duplicates without reading it again one event at a time. (A document
// whose creation comes after the checkpoint is not read by the batch, which
// inserts it: the insert misses, and the gate reads it.)
func TestStreamFold_a_new_engine_reads_a_document_written_ahead_once(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	all, carts := interleaved(t, r, 40, 12)
	db := mongotest.Database(t)
	h := newStreams(all...)
	if a, _ := handleInBatches(t, foldEngine(t, mongostore.New(db), h), all, 37); a != len(all) {
		t.Fatalf("applied %d of %d", a, len(all))
	}
	store := &gateReads{Store: mongostore.New(db), ids: map[string]int{}} // a new process's: nothing cached
	restarted, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(patient()), projector.WithStreamReader(h))
	if err != nil {
		t.Fatal(err)
	}
	from := len(all) / 4
	if a, _ := handleInBatches(t, restarted, all[from:], 23); a != 0 {
		t.Fatalf("%d events applied again after a restart", a)
	}
	resumed := 0
	for id, evs := range carts {
		if evs[0].Position >= all[from].Position {
			continue // created after the checkpoint
		}
		resumed++
		if n := store.ids[id]; n != 0 {
			t.Errorf("document %s read %d times one event at a time; want it read once, by its first batch", id, n)
		}
	}
	if resumed == 0 {
		t.Fatal("no document resumed mid-stream: the test shows nothing")
	}
	checkCarts(t, store.Store, carts)
}

// The fold from a stream stops before the first event the gate would not
// simply apply (a domain error here); that event comes through the catch-up
// and its failure policy as usual. A stream read that fails half-way leaves
// its document to the gate. Without stream folds the documents are the same.
func TestStreamFold_stops_before_a_failing_event_and_survives_a_failed_read(t *testing.T) {
	for _, folds := range []bool{true, false} {
		t.Run(fmt.Sprintf("folds=%v", folds), func(t *testing.T) {
			log := projectortest.NewLog(cart.Registry())
			good := log.MustAppend(t, cart.StreamID("g"), cart.ShoppingCartOpened{ShoppingCartID: "g", ClientID: "x", OpenedAt: t0}, add("g", "p", 1))
			bad := log.MustAppend(t, cart.StreamID("b"), cart.ShoppingCartOpened{ShoppingCartID: "b", ClientID: "y", OpenedAt: t0}, add("b", "p", 1),
				cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: "b", ProductItem: cart.ProductItem{ProductID: "ghost", Quantity: 1}}, add("b", "q", 2))
			broken := log.MustAppend(t, cart.StreamID("k"), cart.ShoppingCartOpened{ShoppingCartID: "k", ClientID: "z", OpenedAt: t0}, add("k", "p", 1), add("k", "q", 1), add("k", "r", 1))
			good = append(good, log.MustAppend(t, cart.StreamID("g"), add("g", "q", 3))...)
			h := newStreams(append(append(append([]projector.Event{}, good...), bad...), broken...)...)
			h.fail = cart.StreamID("k")
			s := newStore(t)
			var opts []projector.Option
			if !folds {
				opts = append(opts, projector.WithoutStreamFolds())
			}
			e := foldEngine(t, s, h, append(opts, projector.WithFailurePolicy(projector.Skip))...)
			first := []projector.Event{good[0], bad[0], broken[0], bad[1]}
			rest := []projector.Event{good[1], bad[2], bad[3], broken[1], broken[2], broken[3], good[2]}
			for _, batch := range [][]projector.Event{first, rest} {
				for i, rs := range e.HandleBatch(context.Background(), batch) {
					for _, r := range rs {
						ghost := batch[i].StreamID == cart.StreamID("b") && batch[i].StreamRevision == 2
						if (r.Outcome == projector.Skipped) != ghost || r.Outcome == projector.Failed {
							t.Errorf("%s@%d: %v %v", batch[i].StreamID, batch[i].StreamRevision, r.Outcome, r.Err)
						}
					}
				}
			}
			checkCarts(t, s, map[string][]projector.Event{"g": good, "b": {bad[0], bad[1], bad[3]}, "k": broken})
			if folds && h.readsOf(cart.StreamID("g")) != 1 {
				t.Errorf("stream g read %d times", h.readsOf(cart.StreamID("g")))
			}
			if !folds && len(h.reads) != 0 {
				t.Errorf("streams read without stream folds: %v", h.reads)
			}
		})
	}
}

// cardsInPlace is a projection of one document per card whose CardMoved
// handler changes the state's map in place and then fails on column "bad".
func cardsInPlace() *projector.Projection[board] {
	p := projector.New[board]("cards_in_place", func(ev projector.Event) (string, bool) {
		switch pl := ev.Payload.(type) {
		case CardAdded:
			return pl.CardID, true
		case CardMoved:
			return pl.CardID, true
		}
		return "", false
	})
	projector.On(p, func(s board, e CardAdded) (board, error) {
		s.Cards = map[string]boardCard{e.CardID: {Title: e.Title, Column: "todo"}}
		return s, nil
	})
	projector.On(p, func(s board, e CardMoved) (board, error) {
		c := s.Cards[e.CardID]
		c.Column, c.Moves = e.Column, c.Moves+1
		s.Cards[e.CardID] = c // in place, before it finds the column bad
		if e.Column == "bad" {
			return s, errors.New("no such column")
		}
		return s, nil
	})
	return p
}

// A handler may change the state's map in place and then fail (ordinary
// Go: s.Cards[id] = c, then a domain error). A stream fold that reads ahead
// and meets such a step writes nothing of it: the document goes through the
// gate, which parks the event, and ends as the one-at-a-time engine leaves
// it, without the failed move.
func TestStreamFold_a_step_that_fails_after_changing_the_state_in_place_writes_none_of_it(t *testing.T) {
	log := projectortest.NewLog(kanbanRegistry())
	evs := log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", Title: "t"}, CardMoved{CardID: "z", Column: "doing"},
		CardMoved{CardID: "z", Column: "bad"}, CardMoved{CardID: "z", Column: "done"})
	ctx := context.Background()
	cards := map[string]boardCard{}
	for _, folds := range []bool{true, false} {
		s := newStore(t)
		opts := []projector.Option{projector.WithRetry(patient()), projector.WithFailurePolicy(projector.Park), projector.WithParker(s)}
		if folds {
			opts = append(opts, projector.WithStreamReader(newStreams(evs...)))
		}
		e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{cardsInPlace()}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		rest := evs
		if folds {
			// The catch-up's batch holds the first two; the stream fold
			// reads the rest, and stops at the failing move.
			e.HandleBatch(ctx, evs[:2])
			var mid board
			if _, rev, err := projector.ReadDocument(ctx, s, cardsInPlace(), "z", &mid); err != nil || mid.Cards["z"].Column == "bad" {
				t.Errorf("after the batch, at revision %d (%v): %+v; the failed move was written", rev, err, mid.Cards["z"])
			}
			rest = evs[2:]
		}
		for _, ev := range rest {
			if _, err := e.Handle(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
		var got board
		if _, rev, err := projector.ReadDocument(ctx, s, cardsInPlace(), "z", &got); err != nil || rev != 3 {
			t.Fatalf("folds=%v: revision %d (%v), want 3", folds, rev, err)
		}
		cards[fmt.Sprint(folds)] = got.Cards["z"]
	}
	want := boardCard{Title: "t", Column: "done", Moves: 2} // doing, done: the bad move parked
	for folds, c := range cards {
		if c != want {
			t.Errorf("stream folds %s: card %+v, want %+v", folds, c, want)
		}
	}
}

// Another engine (another process) handling the same events one at a time,
// at the same time, leaves every document the fold: the stream fold's write
// is conditional like every other.
func TestStreamFold_beside_a_concurrent_writer(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	all, carts := interleaved(t, r, 40, 10)
	s := newStore(t)
	h := newStreams(all...)
	folding := foldEngine(t, s, h)
	other := newEngine(t, s, patient())
	var wg sync.WaitGroup
	wg.Go(func() { handleInBatches(t, folding, all, 23) })
	wg.Go(func() {
		for _, ev := range all {
			if rs, err := other.Handle(context.Background(), ev); err != nil {
				t.Errorf("%+v %v", rs, err)
				return
			}
		}
	})
	wg.Wait()
	checkCarts(t, s, carts)
}
