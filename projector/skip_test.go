package projector_test

import (
	"context"
	"errors"
	"testing"

	"github.com/revgate/projector/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

func skippingEngine(tb testing.TB, s projector.Store) *projector.Engine {
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
	undecodable := log.Raw(stream, cart.TypeAdded, []byte(`{"productItem": "twelve"`))
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
	bad := log.Raw(stream, cart.TypeOpened, []byte(`not json`))
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
