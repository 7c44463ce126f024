package projector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

func skippingEngine(tb testing.TB, s driver.Store) *projector.Engine {
	tb.Helper()
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(retry.Default()), projector.WithFailurePolicy(projector.Skip))
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func TestSkip_moves_the_document_past_a_poison_event_and_the_stream_flows(t *testing.T) {
	s := newStore(t)
	e := skippingEngine(t, s)
	log := projectortest.NewLog(cart.Registry())
	stream := cart.StreamID("s1")
	good := log.MustAppend(t, stream, cart.ShoppingCartOpened{ShoppingCartID: "s1", ClientID: "x", OpenedAt: t0})
	undecodable := log.MustAppend(t, stream, projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"`)})[0]
	domain := log.MustAppend(t, stream, cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: "s1", ProductItem: cart.ProductItem{ProductID: "ghost", Quantity: 1}})
	rest := log.MustAppend(t, stream,
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "s1", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 2}},
		cart.ShoppingCartConfirmed{ShoppingCartID: "s1", ConfirmedAt: t0},
	)
	all := append(append(append(append([]projector.Event{}, good...), undecodable), domain...), rest...)

	var outcomes []projector.Outcome
	for _, ev := range all {
		r := handle(t, e, ev)[0]
		outcomes = append(outcomes, r.Outcome)
		if r.Outcome == projector.Skipped {
			var perr *projector.Error
			if !errors.As(r.Err, &perr) || perr.Retryable() || perr.Revision != ev.StreamRevision {
				t.Errorf("skipped revision %d: err %v", ev.StreamRevision, r.Err)
			}
		}
	}
	want := []projector.Outcome{projector.Applied, projector.Skipped, projector.Skipped, projector.Applied, projector.Applied}
	for i := range want {
		if outcomes[i] != want[i] {
			t.Fatalf("outcomes %v, want %v", outcomes, want)
		}
	}
	// The document is the fold without the two poison events, at the last revision.
	assertDocument(t, s, "s1", append(append([]projector.Event{}, good...), rest...))
	// Delivered again, a skipped event is a duplicate, not skipped twice.
	if r := handle(t, e, undecodable)[0]; r.Outcome != projector.Duplicate {
		t.Fatalf("redelivered poison event: %v %v", r.Outcome, r.Err)
	}
}

func TestSkip_a_creation_event_that_fails_creates_the_zero_state(t *testing.T) {
	s := newStore(t)
	e := skippingEngine(t, s)
	log := projectortest.NewLog(cart.Registry())
	stream := cart.StreamID("s2")
	bad := log.MustAppend(t, stream, projector.Event{Type: cart.TypeOpened, Data: []byte(`not json`)})[0]
	next := log.MustAppend(t, stream, cart.ProductItemAddedToShoppingCart{ShoppingCartID: "s2", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})
	rs, err := e.Handle(context.Background(), bad)
	if len(rs) != 1 || rs[0].Outcome != projector.Skipped || !errors.Is(rs[0].Err, projector.ErrUndecodable) {
		t.Fatalf("creation: %+v", rs)
	}
	if err != nil {
		t.Fatalf("Handle returned %v for a skipped event: only failures are errors", err)
	}
	if r := handle(t, e, next[0])[0]; r.Outcome != projector.Applied {
		t.Fatalf("next: %v %v", r.Outcome, r.Err)
	}
	assertDocument(t, s, "s2", next) // the fold of the rest, from the zero state
}

func TestSkip_never_skips_a_missing_predecessor(t *testing.T) {
	s := newStore(t)
	p := retry.Default()
	p.MaxRetries = 1
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(p), projector.WithFailurePolicy(projector.Skip))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("s3"),
		cart.ShoppingCartOpened{ShoppingCartID: "s3", ClientID: "x", OpenedAt: t0},
		cart.ShoppingCartConfirmed{ShoppingCartID: "s3", ConfirmedAt: t0},
	)
	r := handle(t, e, evs[1])[0] // revision 0 never handled
	if r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrPredecessorMissing) {
		t.Fatalf("%v %v", r.Outcome, r.Err)
	}
}

func TestNewEngine_refuses_an_unknown_failure_policy(t *testing.T) {
	_, err := projector.NewEngine(newStore(t), cart.Registry(), nil, projector.WithFailurePolicy(projector.FailurePolicy(9)))
	if err == nil {
		t.Fatal("no error")
	}
}

type counts struct {
	N map[string]int `bson:"n"`
}

func TestSkip_a_projection_that_changed_its_state_in_place_before_failing_leaves_the_document_as_stored(t *testing.T) {
	s := newStore(t)
	p := projector.New[counts]("in_place", projector.StreamSuffix(cart.StreamPrefix))
	projector.Create(p, func(cart.ShoppingCartOpened) (counts, error) { return counts{N: map[string]int{}}, nil })
	projector.On(p, func(c counts, e cart.ProductItemAddedToShoppingCart) (counts, error) {
		c.N[e.ProductItem.ProductID] += e.ProductItem.Quantity // in place, then a failure
		if e.ProductItem.Quantity > 5 {
			return c, errors.New("too many")
		}
		return c, nil
	})
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithFailurePolicy(projector.Skip))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("s4"),
		cart.ShoppingCartOpened{ShoppingCartID: "s4", ClientID: "x", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "s4", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "s4", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 9}},
	)
	var outcomes []projector.Outcome
	for _, ev := range evs {
		outcomes = append(outcomes, handle(t, e, ev)[0].Outcome)
	}
	if outcomes[2] != projector.Skipped {
		t.Fatalf("outcomes %v", outcomes)
	}
	var got counts
	head, _, err := s.Load(context.Background(), "in_place", "s4", 0, &got)
	if rev := head.Revision; err != nil || rev != 2 || got.N["p"] != 1 {
		t.Fatalf("revision %d, state %+v (%v): want revision 2 and p=1", head.Revision, got, err)
	}
}

func TestSkip_an_undecodable_creation_event_after_revision_0_is_still_a_creation(t *testing.T) {
	s := newStore(t)
	// The projection starts at the Opened event, whatever its revision: the
	// stream's first event is someone else's.
	id := func(ev projector.Event) (string, bool) {
		if ev.Type == "Preamble" {
			return "", false
		}
		return projector.StreamSuffix(cart.StreamPrefix)(ev)
	}
	p := projector.New[cart.Details]("late_start", id)
	projector.Create(p, func(e cart.ShoppingCartOpened) (cart.Details, error) { return cart.Details{ClientID: e.ClientID}, nil })
	projector.On(p, func(d cart.Details, e cart.ShoppingCartConfirmed) (cart.Details, error) {
		d.Status = "Confirmed"
		return d, nil
	})
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithFailurePolicy(projector.Skip))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	stream := cart.StreamID("s5")
	log.MustAppend(t, stream, projector.Event{Type: "Preamble", Data: []byte(`{}`)})
	bad := log.MustAppend(t, stream, projector.Event{Type: cart.TypeOpened, Data: []byte(`{"clientId": 7`)})[0]
	next := log.MustAppend(t, stream, cart.ShoppingCartConfirmed{ShoppingCartID: "s5", ConfirmedAt: t0})
	if r := handle(t, e, bad)[0]; r.Outcome != projector.Skipped || r.Waits != 0 {
		t.Fatalf("creation at revision 1: %v after %d waits: %v", r.Outcome, r.Waits, r.Err)
	}
	if r := handle(t, e, next[0])[0]; r.Outcome != projector.Applied {
		t.Fatalf("next: %v %v", r.Outcome, r.Err)
	}
	var got cart.Details
	if head, _, _ := s.Load(context.Background(), "late_start", "s5", 0, &got); head.Revision != 2 || got.Status != "Confirmed" {
		t.Fatalf("revision %d, state %+v", head.Revision, got)
	}
}

// A second creation of a document (the stream opens the cart again) is a
// permanent failure that goes through the failure policy like any other:
// under Block it stops at it; under Skip and Park the document moves past
// it, unchanged, and the rest of the stream applies.
func TestSkip_a_second_creation_goes_through_the_failure_policy(t *testing.T) {
	for _, policy := range []projector.FailurePolicy{projector.Block, projector.Skip, projector.Park} {
		t.Run(policy.String(), func(t *testing.T) {
			s := newStore(t)
			e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
				projector.WithRetry(retry.Default()), projector.WithFailurePolicy(policy), projector.WithParker(s))
			if err != nil {
				t.Fatal(err)
			}
			log := projectortest.NewLog(cart.Registry())
			stream := cart.StreamID("twice")
			first := log.MustAppend(t, stream,
				cart.ShoppingCartOpened{ShoppingCartID: "twice", ClientID: "x", OpenedAt: t0},
				cart.ProductItemAddedToShoppingCart{ShoppingCartID: "twice", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 2}})
			again := log.MustAppend(t, stream, cart.ShoppingCartOpened{ShoppingCartID: "twice", ClientID: "y", OpenedAt: t0})
			rest := log.MustAppend(t, stream, cart.ShoppingCartConfirmed{ShoppingCartID: "twice", ConfirmedAt: t0})
			for _, ev := range first {
				if r := handle(t, e, ev)[0]; r.Outcome != projector.Applied {
					t.Fatalf("%s: %v %v", ev.Type, r.Outcome, r.Err)
				}
			}
			r := handle(t, e, again[0])[0]
			want := map[projector.FailurePolicy]projector.Outcome{projector.Block: projector.Failed, projector.Skip: projector.Skipped, projector.Park: projector.Parked}[policy]
			var perr *projector.Error
			if r.Outcome != want || !errors.Is(r.Err, projector.ErrAlreadyCreated) || !errors.As(r.Err, &perr) || perr.Retryable() {
				t.Fatalf("second creation: %v %v, want %v with ErrAlreadyCreated", r.Outcome, r.Err, want)
			}
			if policy == projector.Block {
				head, _, _ := s.Load(context.Background(), cart.DetailsName, "twice", 0, nil)
				if rev := head.Revision; rev != 1 {
					t.Fatalf("under block the document moved to revision %d", rev)
				}
				return
			}
			if r := handle(t, e, rest[0])[0]; r.Outcome != projector.Applied {
				t.Fatalf("after the second creation: %v %v", r.Outcome, r.Err)
			}
			// The fold without the second creation, at the last revision.
			assertDocument(t, s, "twice", append(append([]projector.Event{}, first...), rest...))
			parked, err := s.Parked(context.Background(), cart.DetailsName)
			if err != nil || (policy == projector.Park) != (len(parked) == 1) {
				t.Fatalf("parked %v (%v) under %v", parked, err, policy)
			}
		})
	}
}

// An event the skip policy passes over is logged at Warn, as "event
// skipped"; a failure at Error (TestGate_a_projection_that_panics_fails_the_event_not_the_process).
func TestSkip_a_skipped_event_is_logged_at_warn(t *testing.T) {
	s := newStore(t)
	var logged bytes.Buffer
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(retry.Default()), projector.WithFailurePolicy(projector.Skip),
		projector.WithLogger(slog.New(slog.NewJSONHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	stream := cart.StreamID("s9")
	handle(t, e, log.MustAppend(t, stream, cart.ShoppingCartOpened{ShoppingCartID: "s9", ClientID: "x", OpenedAt: t0})[0])
	if r := handle(t, e, log.MustAppend(t, stream, projector.Event{Type: cart.TypeAdded, Data: []byte(`{"productItem": "twelve"`)})[0])[0]; r.Outcome != projector.Skipped {
		t.Fatalf("outcome %v, want skipped", r.Outcome)
	}
	var rec struct{ Level, Msg string }
	if err := json.Unmarshal(logged.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, logged.String())
	}
	if rec.Level != "WARN" || rec.Msg != "event skipped" {
		t.Fatalf("logged %s %q, want WARN \"event skipped\"", rec.Level, rec.Msg)
	}
}
