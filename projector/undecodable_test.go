package projector_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
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

// itemCounter counts the items added to every cart in one document; its
// router looks at the payload's type, as a summary's often does.
type itemCounter struct {
	Added int `bson:"added"`
}

func newItemCounter() *projector.Projection[itemCounter] {
	p := projector.New[itemCounter]("item_counter", func(ev projector.Event) (string, bool) {
		switch ev.Payload.(type) {
		case cart.ProductItemAddedToShoppingCart:
			return "all", true
		}
		return "", false
	}).Idempotency(projector.HandledIDs(100))
	projector.On(p, func(c itemCounter, _ cart.ProductItemAddedToShoppingCart) (itemCounter, error) {
		c.Added++
		return c, nil
	})
	return p
}

// An event whose payload does not decode, of a type a projection routes by
// its payload's type, is the failure policy's: it stops the projection under
// Block and is parked under Park. It is not dropped as an event the
// projection does not want, one by one or in a batch.
func TestUndecodable_an_event_routed_by_its_payload_type_goes_to_the_failure_policy(t *testing.T) {
	for _, policy := range []projector.FailurePolicy{projector.Block, projector.Park} {
		for _, batched := range []bool{false, true} {
			t.Run(policy.String()+map[bool]string{false: "", true: "/batched"}[batched], func(t *testing.T) {
				ctx := context.Background()
				s := newStore(t)
				e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{newItemCounter()},
					projector.WithRetry(patient()), projector.WithFailurePolicy(policy), projector.WithParker(s))
				if err != nil {
					t.Fatal(err)
				}
				log := projectortest.NewLog(cart.Registry())
				good := log.MustAppend(t, cart.StreamID("u1"), cart.ProductItemAddedToShoppingCart{ShoppingCartID: "u1", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})
				bad := log.MustAppend(t, cart.StreamID("u2"), projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"`)})[0]
				var rs []projector.Result
				if batched {
					all := e.HandleBatch(ctx, []projector.Event{good[0], bad})
					rs = all[1]
				} else {
					handle(t, e, good[0])
					rs, _ = e.Handle(ctx, bad)
				}
				want := map[projector.FailurePolicy]projector.Outcome{projector.Block: projector.Failed, projector.Park: projector.Parked}[policy]
				if len(rs) != 1 || rs[0].Outcome != want || !errors.Is(rs[0].Err, projector.ErrUndecodable) {
					t.Fatalf("the undecodable event: %+v, want one result %v with ErrUndecodable", rs, want)
				}
				parked, err := s.Parked(ctx, "item_counter")
				if err != nil {
					t.Fatal(err)
				}
				if wantParked := map[bool]int{false: 0, true: 1}[policy == projector.Park]; len(parked) != wantParked {
					t.Fatalf("%d parked records, want %d", len(parked), wantParked)
				}
			})
		}
	}
}

// A projection with no handler for an event's type passes over it when its
// payload does not decode, as it does when it does: the decoding error is a
// failure in the projections that would read the payload only.
func TestUndecodable_an_event_of_a_type_a_projection_does_not_handle_moves_its_document_on(t *testing.T) {
	s := newStore(t)
	openedOnly := projector.New[cart.Details]("opened_only", projector.StreamSuffix(cart.StreamPrefix))
	projector.Create(openedOnly, func(e cart.ShoppingCartOpened) (cart.Details, error) { return cart.Details{ClientID: e.ClientID}, nil })
	projector.On(openedOnly, func(d cart.Details, _ cart.ShoppingCartConfirmed) (cart.Details, error) {
		d.Status = "Confirmed"
		return d, nil
	})
	// No waits: the confirmation waits in vain in cart_details, stopped at
	// the undecodable event.
	noWaits := retry.Default()
	noWaits.MaxRetries = 0
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{openedOnly, cart.NewDetailsProjection()}, projector.WithRetry(noWaits))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	stream := cart.StreamID("u3")
	opened := log.MustAppend(t, stream, cart.ShoppingCartOpened{ShoppingCartID: "u3", ClientID: "c", OpenedAt: t0})
	bad := log.MustAppend(t, stream, projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"`)})[0]
	confirmed := log.MustAppend(t, stream, cart.ShoppingCartConfirmed{ShoppingCartID: "u3", ConfirmedAt: t0})
	ctx := context.Background()
	if _, err := e.Handle(ctx, opened[0]); err != nil {
		t.Fatal(err)
	}
	rs, _ := e.Handle(ctx, bad)
	outcome := map[string]projector.Outcome{}
	for _, r := range rs {
		outcome[r.Projection] = r.Outcome
	}
	if len(rs) != 2 || outcome["opened_only"] != projector.Applied || outcome[cart.DetailsName] != projector.Failed {
		t.Fatalf("the undecodable event: %+v; want applied (passed over) in opened_only, failed in %s", rs, cart.DetailsName)
	}
	rs, _ = e.Handle(ctx, confirmed[0])
	for _, r := range rs {
		if r.Projection == "opened_only" && r.Outcome != projector.Applied {
			t.Fatalf("the next event in opened_only: %v %v", r.Outcome, r.Err)
		}
	}
	var got cart.Details
	head, found, err := s.Load(ctx, "opened_only", "u3", 0, &got)
	if err != nil || !found || head.Revision != 2 || got.Status != "Confirmed" || got.ClientID != "c" {
		t.Fatalf("opened_only: found %v, revision %d, state %+v (%v); want revision 2, confirmed", found, head.Revision, got, err)
	}
}

// A router that makes the document's id of the payload's fields would give,
// for the zero value of an undecodable event's type, a document of empty
// fields ("by-client-"): the event is unroutable instead, and goes to the
// failure policy without a document. No such document is written, under any
// policy.
func TestUndecodable_a_router_that_reads_the_payload_s_fields_makes_no_document_of_empty_fields(t *testing.T) {
	for _, policy := range []projector.FailurePolicy{projector.Block, projector.Skip, projector.Park} {
		t.Run(policy.String(), func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			p := projector.New[itemCounter]("by_client", func(ev projector.Event) (string, bool) {
				if o, ok := ev.Payload.(cart.ShoppingCartOpened); ok {
					return "by-client-" + o.ClientID, true
				}
				return "", false
			}).Idempotency(projector.HandledIDs(100))
			projector.On(p, func(c itemCounter, _ cart.ShoppingCartOpened) (itemCounter, error) {
				c.Added++
				return c, nil
			})
			e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()),
				projector.WithFailurePolicy(policy), projector.WithParker(s))
			if err != nil {
				t.Fatal(err)
			}
			log := projectortest.NewLog(cart.Registry())
			bad := log.MustAppend(t, cart.StreamID("u4"), projector.Event{Type: cart.TypeOpened, Data: []byte(`{"clientId": 7}`)})[0]
			rs, _ := e.Handle(ctx, bad)
			want := map[projector.FailurePolicy]projector.Outcome{projector.Block: projector.Failed, projector.Skip: projector.Skipped, projector.Park: projector.Parked}[policy]
			if len(rs) != 1 || rs[0].Outcome != want || rs[0].Document != "" || !errors.Is(rs[0].Err, projector.ErrUndecodable) ||
				!errors.Is(rs[0].Err, projector.ErrUnroutable) {
				t.Fatalf("the undecodable event: %+v, want one result %v, unroutable, with no document", rs, want)
			}
			n, err := s.Database().Collection("by_client").CountDocuments(ctx, map[string]any{})
			if err != nil || n != 0 {
				t.Fatalf("%d documents in by_client (%v), want none", n, err)
			}
			if policy == projector.Park {
				parked, err := s.Parked(ctx, "by_client")
				if err != nil || len(parked) != 1 || parked[0].Document != "" {
					t.Fatalf("parked %+v (%v), want one record without a document", parked, err)
				}
			}
		})
	}
}

// A projection with no handler for an undecodable event's type is not failed
// by it, even when its router reads the payload and cannot route the zero
// value: the payload is not its concern.
func TestUndecodable_a_projection_without_a_handler_is_not_failed_by_its_router(t *testing.T) {
	s := newStore(t)
	byCart := projector.New[itemCounter]("by_cart_field", func(ev projector.Event) (string, bool) {
		v := reflect.ValueOf(ev.Payload)
		if !v.IsValid() || v.Kind() != reflect.Struct || !v.FieldByName("ShoppingCartID").IsValid() {
			return "", false
		}
		return v.FieldByName("ShoppingCartID").String(), true // "" for a zero payload: an empty id
	}).Idempotency(projector.HandledIDs(100))
	projector.On(byCart, func(c itemCounter, _ cart.ShoppingCartOpened) (itemCounter, error) { return c, nil })
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{byCart}, projector.WithRetry(patient()))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	bad := log.MustAppend(t, cart.StreamID("u5"), projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"`)})[0]
	rs, err := e.Handle(context.Background(), bad)
	if len(rs) != 0 || err != nil {
		t.Fatalf("results %+v, err %v: want none, the event is not the projection's concern", rs, err)
	}
}

// batchCounter counts a store's bulk writes and its one-document updates.
type batchCounter struct {
	*mongostore.Store
	bulk, single atomic.Int64
}

func (c *batchCounter) WriteMany(ctx context.Context, coll string, w []driver.Write) ([]bool, error) {
	c.bulk.Add(1)
	return c.Store.WriteMany(ctx, coll, w)
}

func (c *batchCounter) PutGuardedMany(ctx context.Context, coll string, p []driver.Put) ([]bool, error) {
	c.bulk.Add(1)
	return c.Store.PutGuardedMany(ctx, coll, p)
}

func (c *batchCounter) Update(ctx context.Context, coll, id string, from uint64, head driver.Head, state any) (bool, error) {
	c.single.Add(1)
	return c.Store.Update(ctx, coll, id, from, head, state)
}

func (c *batchCounter) PutGuarded(ctx context.Context, coll, id string, expected int64, meta driver.Meta, state any) (bool, error) {
	c.single.Add(1)
	return c.Store.PutGuarded(ctx, coll, id, expected, meta, state)
}

// One event whose payload does not decode, in the middle of a batch, is
// handled under the failure policy (skipped here), without the batch
// going one event at a time: the events before and after it stay batched,
// with the outcomes the per-event path gives, for documents under the
// revision gate and documents fed by many streams.
func TestUndecodable_an_event_in_a_batch_costs_a_split_not_the_batch_one_at_a_time(t *testing.T) {
	for _, def := range []func() projector.Definition{
		func() projector.Definition { return cart.NewDetailsProjection() },
		func() projector.Definition { return newItemCounter() },
	} {
		name := def().Name()
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			log := projectortest.NewLog(cart.Registry())
			var events []projector.Event
			for i := range 20 {
				id := fmt.Sprintf("s%02d", i)
				events = append(events, log.MustAppend(t, cart.StreamID(id),
					cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c"},
					cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})...)
			}
			bad := log.MustAppend(t, cart.StreamID("s99"), projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"`)})[0]
			events = slices.Insert(events, len(events)/2, bad)
			engine := func(s driver.Store) *projector.Engine {
				e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{def()},
					projector.WithRetry(patient()), projector.WithFailurePolicy(projector.Skip))
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Prepare(ctx); err != nil {
					t.Fatal(err)
				}
				return e
			}
			counted := &batchCounter{Store: newStore(t)}
			got := engine(counted).HandleBatch(ctx, events)
			slow := engine(newStore(t))
			for i, ev := range events {
				want, _ := slow.Handle(ctx, ev)
				if !sameOutcomes(got[i], want) {
					t.Errorf("event %d (%s@%d): batched %s, per-event %s", i, ev.StreamID, ev.StreamRevision, outcomeList(got[i]), outcomeList(want))
				}
			}
			if b, s := counted.bulk.Load(), counted.single.Load(); b < 1 || s > 1 {
				t.Errorf("%d bulk writes and %d one-document writes: want the events before and after the bad one batched", b, s)
			}
		})
	}
}

// A projection whose router reads the payload cannot route an event whose
// payload does not decode: its error leads with the payload, the cause, and
// still says the event is unroutable.
func TestUndecodable_a_router_that_reads_the_payload_fails_the_event_with_the_payload_first(t *testing.T) {
	s := newStore(t)
	byCart := projector.NewRouted[itemCounter]("by_cart_payload", func(ev projector.Event) (string, bool, error) {
		if a, ok := ev.Payload.(cart.ProductItemAddedToShoppingCart); ok {
			return a.ShoppingCartID, true, nil
		}
		return "", false, nil
	}).Idempotency(projector.HandledIDs(100)).OnFailure(projector.Skip)
	projector.On(byCart, func(c itemCounter, _ cart.ProductItemAddedToShoppingCart) (itemCounter, error) { return c, nil })
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{byCart}, projector.WithRetry(patient()))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	bad := log.MustAppend(t, cart.StreamID("u6"), projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"`)})[0]
	rs, err := e.Handle(context.Background(), bad)
	if err != nil || len(rs) != 1 || rs[0].Outcome != projector.Skipped {
		t.Fatalf("results %+v, err %v: want the event skipped", rs, err)
	}
	msg := rs[0].Err.Error()
	if !errors.Is(rs[0].Err, projector.ErrUndecodable) || !errors.Is(rs[0].Err, projector.ErrUnroutable) ||
		!strings.Contains(msg, "its router names no document") || strings.Index(msg, "payload does not decode") > strings.Index(msg, "names no document") {
		t.Fatalf("error %q: want the payload first, wrapping ErrUndecodable and ErrUnroutable", msg)
	}
}

// A summary fed by many streams, with one event in four that does not
// decode, under park: the batch folds past each of them (recorded first)
// instead of splitting at each, so the document is written once, not once
// or twice a bad event (a cost that grew with their number times the
// document's size); each bad event is parked, and the document is the fold
// of the others, as one event at a time gives it.
func TestUndecodable_events_of_a_summary_under_park_are_passed_over_in_its_batch(t *testing.T) {
	ctx := context.Background()
	log := projectortest.NewLog(cart.Registry())
	var events, good []projector.Event
	bad := 0
	for i := range 20 {
		id := fmt.Sprintf("s%02d", i)
		evs := log.MustAppend(t, cart.StreamID(id), cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c"})
		if i%4 == 1 {
			evs = append(evs, log.MustAppend(t, cart.StreamID(id), projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"}`)})...)
			bad++
		}
		added := log.MustAppend(t, cart.StreamID(id), cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})
		evs = append(evs, added...)
		good = append(good, added...)
		events = append(events, evs...)
	}
	for i := range events {
		events[i].Payload = nil // as delivered
	}
	// Routed by the envelope alone, so that an event that does not decode
	// goes to the summary too (a router that reads the payload cannot
	// route it: it goes through the gate, with no document).
	counter := func() *projector.Projection[itemCounter] {
		p := projector.New[itemCounter]("item_counter", func(ev projector.Event) (string, bool) {
			return "all", strings.HasPrefix(ev.StreamID, cart.StreamID(""))
		}).Idempotency(projector.RevisionMap())
		projector.On(p, func(c itemCounter, _ cart.ProductItemAddedToShoppingCart) (itemCounter, error) {
			c.Added++
			return c, nil
		})
		return p
	}
	engine := func(s *mongostore.Store, store driver.Store) *projector.Engine {
		e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{counter()},
			projector.WithRetry(patient()), projector.WithFailurePolicy(projector.Park), projector.WithParker(s),
			projector.WithStreamReader(newStreams(events...)))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	s := newStore(t)
	counted := &batchCounter{Store: s}
	got := engine(s, counted).HandleBatch(ctx, events)
	parked := 0
	for i, rs := range got {
		for _, r := range rs {
			switch {
			case r.Outcome == projector.Parked && errors.Is(r.Err, projector.ErrUndecodable):
				parked++
			case r.Outcome != projector.Applied:
				t.Errorf("event %d (%s@%d): %v %v", i, events[i].StreamID, events[i].StreamRevision, r.Outcome, r.Err)
			}
		}
	}
	if records, err := s.Parked(ctx, "item_counter"); parked != bad || err != nil || len(records) != bad {
		t.Errorf("%d parked, %d records (%v); want %d", parked, len(records), err, bad)
	}
	var c itemCounter
	if _, _, err := projector.ReadDocument(ctx, s, counter(), "all", &c); err != nil || c.Added != len(good) {
		t.Errorf("added %d (%v), want %d", c.Added, err, len(good))
	}
	if b, one := counted.bulk.Load(), counted.single.Load(); b != 1 || one != 0 {
		t.Errorf("%d bulk writes and %d one-document writes: want the summary written once", b, one)
	}
	// One event at a time gives the same document.
	slow := newStore(t)
	e := engine(slow, slow)
	for _, ev := range events {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	var one itemCounter
	if _, _, err := projector.ReadDocument(ctx, slow, counter(), "all", &one); err != nil || one != c {
		t.Errorf("one at a time: %+v (%v), batched %+v", one, err, c)
	}
	// Through a runner, which routes the events as it spreads them over
	// its workers (the batch then decodes them itself): the same counts.
	viaRunner := newStore(t)
	runner, err := projector.NewRunner("summary", engine(viaRunner, viaRunner), &scripted{events: events}, viaRunner,
		projector.WithWorkers(2), projector.WithBatch(100, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1].Position
	if err := runUntil(t, runner, func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position == last }); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if st := runner.Stats(); st.Parked != uint64(bad) || st.Applied != uint64(len(events)-bad) || st.Failed != 0 {
		t.Errorf("runner: %d applied, %d parked, %d failed; want %d and %d", st.Applied, st.Parked, st.Failed, len(events)-bad, bad)
	}
	var ran itemCounter
	if _, _, err := projector.ReadDocument(ctx, viaRunner, counter(), "all", &ran); err != nil || ran != c {
		t.Errorf("through a runner: %+v (%v), batched %+v", ran, err, c)
	}
}

// Under RevisionMap, a later event of a stream whose payload does not
// decode cannot be routed by a router that reads the payload, and the
// stream's first event feeds a document: the error says the payload, and
// not what a declined event would call for (tie the stream, or route it),
// which would lead away from the cause.
func TestUndecodable_an_event_a_payload_router_cannot_route_is_not_advised_a_tie(t *testing.T) {
	s := newStore(t)
	p := projector.NewRouted[itemCounter]("by_client_payload", func(ev projector.Event) (string, bool, error) {
		switch e := ev.Payload.(type) {
		case cart.ShoppingCartOpened:
			return e.ClientID, e.ClientID != "", nil
		case cart.ProductItemAddedToShoppingCart: // the cart's client, say, looked up by its id
			return "c1", e.ShoppingCartID != "", nil
		}
		return "", false, nil
	}).Idempotency(projector.RevisionMap()).OnFailure(projector.Skip)
	projector.On(p, func(c itemCounter, _ cart.ShoppingCartOpened) (itemCounter, error) { return c, nil })
	projector.On(p, func(c itemCounter, _ cart.ProductItemAddedToShoppingCart) (itemCounter, error) { return c, nil })
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("u7"), cart.ShoppingCartOpened{ShoppingCartID: "u7", ClientID: "c1", OpenedAt: t0},
		projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"`)})
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()), projector.WithStreamReader(newStreams(evs...)))
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := e.Handle(context.Background(), evs[0]); err != nil || rs[0].Outcome != projector.Applied {
		t.Fatalf("the cart's opening: %+v, %v", rs, err)
	}
	rs, err := e.Handle(context.Background(), evs[1])
	if err != nil || len(rs) != 1 || rs[0].Err == nil {
		t.Fatalf("results %+v, err %v: want the event failed", rs, err)
	}
	msg := rs[0].Err.Error()
	if !errors.Is(rs[0].Err, projector.ErrUndecodable) || !strings.Contains(msg, "payload does not decode") {
		t.Fatalf("error %q: want the payload, wrapping ErrUndecodable", msg)
	}
	if strings.Contains(msg, "TieStreams") {
		t.Errorf("error %q advises a tie, for an event whose payload does not decode", msg)
	}
}
