package projector_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
)

// A cart (one stream, a document under the revision gate) with one event
// that does not decode among 20: the bad event goes alone through the
// per-event path and the rest of the batch is folded around it, not the
// whole document one event at a time.
func TestUndecodableBatch_a_gated_document_with_an_undecodable_event_is_folded_around_it(t *testing.T) {
	ctx := context.Background()
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("g1"), cart.ShoppingCartOpened{ShoppingCartID: "g1", ClientID: "c"})
	for i := range 19 {
		if i == 9 {
			evs = append(evs, log.MustAppend(t, cart.StreamID("g1"), projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"}`)})...)
			continue
		}
		evs = append(evs, log.MustAppend(t, cart.StreamID("g1"), cart.ProductItemAddedToShoppingCart{ShoppingCartID: "g1", ProductItem: cart.ProductItem{ProductID: fmt.Sprint("p", i), Quantity: 1}})...)
	}
	for i := range evs {
		evs[i].Payload = nil
	}
	counted := &batchCounter{Store: newStore(t)}
	e, err := projector.NewEngine(counted, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(patient()), projector.WithFailurePolicy(projector.Skip))
	if err != nil {
		t.Fatal(err)
	}
	got := e.HandleBatch(ctx, evs)
	for i, rs := range got {
		if len(rs) != 1 || (i == 10) != (rs[0].Outcome == projector.Skipped) {
			t.Errorf("event %d: %s", i, outcomeList(rs))
		}
	}
	if b, s := counted.bulk.Load(), counted.single.Load(); s > 1 {
		t.Errorf("%d bulk writes and %d one-document writes: want the bad event alone through the per-event path (at most 1), the rest folded", b, s)
	}
}

// Under Block, HandleBatch leaves alone what follows a failure: an event
// that does not decode splits the batch there, and the later events of
// other documents are not handled (ErrNotHandled), for the revision gate
// and RevisionMap summaries alike.
func TestUndecodableBatch_under_block_the_events_after_an_undecodable_one_are_left_alone(t *testing.T) {
	perStream := func() projector.Definition { return cart.NewDetailsProjection() }
	summary := func() projector.Definition {
		p := projector.New[itemCounter]("item_counter_rm", func(ev projector.Event) (string, bool) {
			return "doc-" + ev.StreamID[len(ev.StreamID)-1:], true
		}).Idempotency(projector.RevisionMap())
		projector.On(p, func(c itemCounter, _ cart.ProductItemAddedToShoppingCart) (itemCounter, error) {
			c.Added++
			return c, nil
		})
		return p
	}
	for name, def := range map[string]func() projector.Definition{"gate": perStream, "revisionmap": summary} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			log := projectortest.NewLog(cart.Registry())
			add := func(id string) cart.ProductItemAddedToShoppingCart {
				return cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}}
			}
			var evs []projector.Event
			evs = append(evs, log.MustAppend(t, cart.StreamID("a"), cart.ShoppingCartOpened{ShoppingCartID: "a", ClientID: "c"}, add("a"))...)
			evs = append(evs, log.MustAppend(t, cart.StreamID("b"), cart.ShoppingCartOpened{ShoppingCartID: "b", ClientID: "c"})...)
			evs = append(evs, log.MustAppend(t, cart.StreamID("b"), projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"}`)})...)
			evs = append(evs, log.MustAppend(t, cart.StreamID("c"), cart.ShoppingCartOpened{ShoppingCartID: "c", ClientID: "c"}, add("c"))...)
			for i := range evs {
				evs[i].Payload = nil
			}
			s := newStore(t)
			e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{def()},
				projector.WithRetry(patient()), projector.WithFailurePolicy(projector.Block))
			if err != nil {
				t.Fatal(err)
			}
			got := e.HandleBatch(ctx, evs)
			if rs := got[3]; len(rs) != 1 || rs[0].Outcome != projector.Failed || !errors.Is(rs[0].Err, projector.ErrUndecodable) {
				t.Fatalf("bad event: %s", outcomeList(rs))
			}
			for i := 4; i < len(evs); i++ {
				if rs := got[i]; len(rs) != 1 || !errors.Is(rs[0].Err, projector.ErrNotHandled) {
					t.Errorf("event %d (%s@%d) after the blocked one: %s, want left alone (ErrNotHandled)", i, evs[i].StreamID, evs[i].StreamRevision, outcomeList(rs))
				}
			}
		})
	}
}

var _ driver.Store = (*batchCounter)(nil)

type undecodedCounter struct {
	Added  int `bson:"added"`
	Opened int `bson:"opened"`
}

// HandleBatch, Handle one at a time and a runner of two workers agree on
// documents fed by many streams with undecodable events (of a handled type
// and of one the projection does not handle), under skip and park, for
// each strategy the batch folds.
func TestUndecodableBatch_versioned_undecodable_batch_handle_runner_agree(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	strategies := map[string]func() projector.Strategy{
		"revisionmap": projector.RevisionMap,
		"handledids":  func() projector.Strategy { return projector.HandledIDs(100) },
		"globalpos":   projector.GlobalPosition,
	}
	for sname, strat := range strategies {
		for _, pol := range []projector.FailurePolicy{projector.Skip, projector.Park, projector.Hold} {
			if pol == projector.Hold && sname != "revisionmap" {
				continue
			}
			t.Run(sname+"_"+pol.String(), func(t *testing.T) {
				ctx := context.Background()
				log := projectortest.NewLog(cart.Registry())
				var events []projector.Event
				bad := 0
				for i := range 8 {
					id := fmt.Sprintf("v%02d", i)
					add := cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}}
					if i%3 == 0 {
						events = append(events, log.MustAppend(t, cart.StreamID(id), projector.Event{Type: cart.TypeOpened, Data: []byte(`{"clientId": 7}`)})...)
						bad++
					} else {
						events = append(events, log.MustAppend(t, cart.StreamID(id), cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c"})...)
					}
					events = append(events, log.MustAppend(t, cart.StreamID(id), add)...)
					if i%2 == 1 {
						events = append(events, log.MustAppend(t, cart.StreamID(id), projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"}`)})...)
						bad++
					}
					events = append(events, log.MustAppend(t, cart.StreamID(id), projector.Event{Type: cart.TypeConfirmed, Data: []byte(`{"confirmedAt": 12}`)})...)
					events = append(events, log.MustAppend(t, cart.StreamID(id), add)...)
				}
				for i := range events {
					events[i].Payload = nil
				}
				def := func() projector.Definition {
					p := projector.New[undecodedCounter]("undecoded_counter", func(ev projector.Event) (string, bool) {
						n := ev.StreamID[len(ev.StreamID)-1] - '0'
						return fmt.Sprint("doc", n%2), true
					}).Idempotency(strat())
					projector.On(p, func(c undecodedCounter, _ cart.ProductItemAddedToShoppingCart) (undecodedCounter, error) {
						c.Added++
						return c, nil
					})
					projector.On(p, func(c undecodedCounter, _ cart.ShoppingCartOpened) (undecodedCounter, error) {
						c.Opened++
						return c, nil
					})
					return p
				}
				engine := func(s interface {
					driver.Store
					projector.Parker
				}, store driver.Store) *projector.Engine {
					e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{def()},
						projector.WithRetry(patient()), projector.WithFailurePolicy(pol), projector.WithParker(s),
						projector.WithStreamReader(newStreams(events...)))
					if err != nil {
						t.Fatal(err)
					}
					return e
				}
				read := func(s driver.Store) map[string]undecodedCounter {
					out := map[string]undecodedCounter{}
					for _, id := range []string{"doc0", "doc1"} {
						var c undecodedCounter
						if _, _, err := projector.ReadDocument(ctx, s, def(), id, &c); err != nil {
							t.Fatal(err)
						}
						out[id] = c
					}
					return out
				}
				s1 := newStore(t)
				got := engine(s1, s1).HandleBatch(ctx, events)
				s2 := newStore(t)
				e2 := engine(s2, s2)
				for i, ev := range events {
					want, _ := e2.Handle(ctx, ev)
					if !sameOutcomes(got[i], want) {
						t.Errorf("event %d (%s@%d %s): batched %s, per-event %s", i, ev.StreamID, ev.StreamRevision, ev.Type, outcomeList(got[i]), outcomeList(want))
					}
				}
				d1, d2 := read(s1), read(s2)
				if fmt.Sprint(d1) != fmt.Sprint(d2) {
					t.Errorf("batched %v, per-event %v", d1, d2)
				}
				if pol == projector.Park {
					p1, _ := s1.Parked(ctx, "undecoded_counter")
					p2, _ := s2.Parked(ctx, "undecoded_counter")
					if len(p1) != len(p2) || len(p1) != bad {
						t.Errorf("parked: batched %d, per-event %d, want %d", len(p1), len(p2), bad)
					}
				}
				if pol == projector.Hold {
					return
				}
				// Redelivered: duplicates all.
				again := engine(s1, s1).HandleBatch(ctx, events)
				for i, rs := range again {
					if len(rs) != 1 || rs[0].Outcome != projector.Duplicate {
						t.Errorf("redelivered event %d: %s", i, outcomeList(rs))
					}
				}
				s3 := newStore(t)
				workers := 2
				if sname == "globalpos" {
					workers = 1
				}
				runner, err := projector.NewRunner("summary", engine(s3, s3), &scripted{events: events}, s3,
					projector.WithWorkers(workers), projector.WithBatch(100, 200*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				last := events[len(events)-1].Position
				if err := runUntil(t, runner, func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position == last }); err != nil && !errors.Is(err, context.Canceled) {
					t.Fatal(err)
				}
				if d3 := read(s3); fmt.Sprint(d3) != fmt.Sprint(d2) {
					t.Errorf("runner %v, per-event %v", d3, d2)
				}
				st := runner.Stats()
				if st.Failed != 0 || st.Parked+st.Skipped != uint64(bad) {
					t.Errorf("runner stats: %+v; want %d parked/skipped", st, bad)
				}
			})
		}
	}
}

// Tied streams with undecodable events, batched, one at a time and through
// a runner of two workers: the same outcomes, documents and records.
func TestUndecodableBatch_tied_streams_undecodable_batch_handle_runner_agree(t *testing.T) {
	ctx := context.Background()
	log := projectortest.NewLog(kanbanRegistry())
	bad := func(typ string) projector.Event { return projector.Event{Type: typ, Data: []byte(`{"CardID": 7`)} }
	var events []projector.Event
	events = append(events, log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})...)
	events = append(events, log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", BoardID: "b1", Title: "zed"}, bad("CardRenamed"), CardMoved{CardID: "z", Column: "done"})...)
	events = append(events, log.MustAppend(t, cardStreams+"x", CardAdded{CardID: "x", BoardID: "b1", Title: "ex"}, bad("CardAdded"), CardMoved{CardID: "x", Column: "doing"})...)
	events = append(events, log.MustAppend(t, cardStreams+"y", bad("CardAdded"), CardRenamed{CardID: "y", Title: "why"})...)
	events = append(events, log.MustAppend(t, cardStreams+"z", CardRenamed{CardID: "z", Title: "zz"})...)
	for i := range events {
		events[i].Payload = nil
	}
	engine := func(s interface {
		driver.Store
		projector.Parker
	}) *projector.Engine {
		e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(patient()),
			projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(newStreams(events...)))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	readB1 := func(s driver.Store) string {
		var b board
		if _, _, err := projector.ReadDocument(ctx, s, boards(), "b1", &b); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(b)
	}
	s1, s2 := newStore(t), newStore(t)
	got := engine(s1).HandleBatch(ctx, events)
	e2 := engine(s2)
	for i, ev := range events {
		want, _ := e2.Handle(ctx, ev)
		if !sameOutcomes(got[i], want) {
			t.Errorf("event %d (%s@%d): batched %s, per-event %s", i, ev.StreamID, ev.StreamRevision, outcomeList(got[i]), outcomeList(want))
		}
	}
	if a, b := readB1(s1), readB1(s2); a != b {
		t.Errorf("batched %s, per-event %s", a, b)
	}
	p1, _ := s1.Parked(ctx, "kanban_boards")
	p2, _ := s2.Parked(ctx, "kanban_boards")
	if len(p1) != len(p2) {
		t.Errorf("parked: batched %d, per-event %d", len(p1), len(p2))
	}
	s3 := newStore(t)
	runner, err := projector.NewRunner("tied", engine(s3), &scripted{events: events}, s3,
		projector.WithWorkers(2), projector.WithBatch(100, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1].Position
	if err := runUntil(t, runner, func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position == last }); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if a, b := readB1(s3), readB1(s2); a != b {
		t.Errorf("runner %s, per-event %s", a, b)
	}
	p3, _ := s3.Parked(ctx, "kanban_boards")
	if len(p3) != len(p2) {
		t.Errorf("parked: runner %d, per-event %d", len(p3), len(p2))
	}
	t.Logf("per-event doc %s, %d parked; runner %+v", readB1(s2), len(p2), runner.Stats())
}

// Under Block, HandleBatch fails an event that does not decode as Handle
// does: at once, with ErrUndecodable, not after waiting out a predecessor
// (ErrPredecessorMissing).
func TestUndecodableBatch_under_block_an_undecodable_event_fails_as_Handle_fails_it(t *testing.T) {
	ctx := context.Background()
	log := projectortest.NewLog(cart.Registry())
	// s1@0 is never delivered: s1@1 (undecodable) waits for it.
	log.MustAppend(t, cart.StreamID("s1"), cart.ShoppingCartOpened{ShoppingCartID: "s1", ClientID: "c"})
	badEv := log.MustAppend(t, cart.StreamID("s1"), projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"}`)})[0]
	other := log.MustAppend(t, cart.StreamID("s2"), cart.ShoppingCartOpened{ShoppingCartID: "s2", ClientID: "c"})[0]
	events := []projector.Event{other, badEv}
	for i := range events {
		events[i].Payload = nil
	}
	def := func() projector.Definition {
		p := projector.New[itemCounter]("undecoded_block", func(ev projector.Event) (string, bool) { return "all", true }).Idempotency(projector.RevisionMap())
		projector.On(p, func(c itemCounter, _ cart.ProductItemAddedToShoppingCart) (itemCounter, error) {
			c.Added++
			return c, nil
		})
		return p
	}
	quick := patient()
	quick.MaxRetries = 2
	engine := func() *projector.Engine {
		e, err := projector.NewEngine(newStore(t), cart.Registry(), []projector.Definition{def()},
			projector.WithRetry(quick), projector.WithFailurePolicy(projector.Block))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e1 := engine()
	var want []projector.Result
	for _, ev := range events {
		want, _ = e1.Handle(ctx, ev)
	}
	got := engine().HandleBatch(ctx, events)[1]
	if len(want) != 1 || !errors.Is(want[0].Err, projector.ErrUndecodable) {
		t.Fatalf("per-event: %+v", want)
	}
	if len(got) != 1 || got[0].Outcome != projector.Failed || !errors.Is(got[0].Err, projector.ErrUndecodable) {
		t.Errorf("batched: %s %v; per-event: %s %v", outcomeList(got), got[0].Err, outcomeList(want), want[0].Err)
	}
}
