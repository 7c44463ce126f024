package cart_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
)

func handler(t *testing.T) (*cart.Handler, cart.EventStore) {
	t.Helper()
	store := cart.NewStore(kurrentClient(t, esdbtest.New(t)))
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	return cart.NewHandler(store, func() time.Time { return at }), store
}

func must(t *testing.T, h *cart.Handler, cmd cart.Command) cart.Result {
	t.Helper()
	r, err := h.Handle(context.Background(), cmd)
	if err != nil {
		t.Fatalf("%T: %v", cmd, err)
	}
	return r
}

func TestHandle_a_cart_life_appends_its_events_with_ids_derived_from_the_requests(t *testing.T) {
	h, store := handler(t)
	must(t, h, cart.OpenCart{RequestID: "r1", CartID: "c1", ClientID: "x"})
	must(t, h, cart.AddItem{RequestID: "r2", CartID: "c1", Item: cart.ProductItem{ProductID: "p", Quantity: 3}})
	must(t, h, cart.RemoveItem{RequestID: "r3", CartID: "c1", Item: cart.ProductItem{ProductID: "p", Quantity: 1}})
	if r := must(t, h, cart.ConfirmCart{RequestID: "r4", CartID: "c1"}); r.Appended != 1 || r.Revision != 3 {
		t.Fatalf("confirm: %+v", r)
	}
	evs, rev, err := store.Read(context.Background(), cart.StreamID("c1"))
	if err != nil || rev != 3 || len(evs) != 4 {
		t.Fatalf("stream: %d events, revision %d, %v", len(evs), rev, err)
	}
	for i, req := range []string{"r1", "r2", "r3", "r4"} {
		if evs[i].ID != cart.EventID("c1", req, 0).String() {
			t.Errorf("event %d id %s, want the id derived from %s", i, evs[i].ID, req)
		}
	}
	if evs[3].Type != cart.TypeConfirmed {
		t.Fatalf("last event %s", evs[3].Type)
	}
}

func TestHandle_a_command_retried_with_the_same_request_id_appends_once(t *testing.T) {
	h, store := handler(t)
	must(t, h, cart.OpenCart{RequestID: "open", CartID: "c2", ClientID: "x"})
	add := cart.AddItem{RequestID: "add-1", CartID: "c2", Item: cart.ProductItem{ProductID: "p", Quantity: 2}}
	for i := range 4 { // the command, then 3 retries
		r := must(t, h, add)
		if (i == 0) != (r.Appended == 1) || (i > 0) != r.Duplicate {
			t.Fatalf("attempt %d: %+v", i, r)
		}
	}
	if evs, _, _ := store.Read(context.Background(), cart.StreamID("c2")); len(evs) != 2 {
		t.Fatalf("%d events after 3 retries, want 2", len(evs))
	}
	// The same command under a new request id is a new request: it appends.
	add.RequestID = "add-2"
	if r := must(t, h, add); r.Appended != 1 {
		t.Fatalf("new request: %+v", r)
	}
	if evs, _, _ := store.Read(context.Background(), cart.StreamID("c2")); len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
	// A retried open is a duplicate too, not "cart exists".
	if r := must(t, h, cart.OpenCart{RequestID: "open", CartID: "c2", ClientID: "x"}); !r.Duplicate {
		t.Fatalf("retried open: %+v", r)
	}
}

func TestHandle_refuses_what_the_cart_does_not_allow(t *testing.T) {
	h, _ := handler(t)
	must(t, h, cart.OpenCart{RequestID: "o", CartID: "c3", ClientID: "x"})
	cases := []struct {
		cmd  cart.Command
		want error
	}{
		{cart.AddItem{RequestID: "a0", CartID: "nope", Item: cart.ProductItem{ProductID: "p", Quantity: 1}}, cart.ErrCartNotFound},
		{cart.OpenCart{RequestID: "o2", CartID: "c3", ClientID: "y"}, cart.ErrCartExists},
		{cart.ConfirmCart{RequestID: "c0", CartID: "c3"}, cart.ErrEmptyCart},
		{cart.RemoveItem{RequestID: "r0", CartID: "c3", Item: cart.ProductItem{ProductID: "p", Quantity: 1}}, cart.ErrNotEnoughItems},
		{cart.AddItem{RequestID: "a1", CartID: "c3", Item: cart.ProductItem{ProductID: "p", Quantity: 0}}, cart.ErrInvalidQuantity},
		{cart.AddItem{CartID: "c3", Item: cart.ProductItem{ProductID: "p", Quantity: 1}}, cart.ErrNoRequestID},
	}
	for _, c := range cases {
		if _, err := h.Handle(context.Background(), c.cmd); !errors.Is(err, c.want) {
			t.Errorf("%T %+v: %v, want %v", c.cmd, c.cmd, err, c.want)
		}
	}
	must(t, h, cart.CancelCart{RequestID: "x", CartID: "c3"})
	if _, err := h.Handle(context.Background(), cart.AddItem{RequestID: "a2", CartID: "c3", Item: cart.ProductItem{ProductID: "p", Quantity: 1}}); !errors.Is(err, cart.ErrCartClosed) {
		t.Fatalf("add to a canceled cart: %v", err)
	}
}

func TestHandle_concurrent_commands_on_one_cart_all_land_through_expected_revisions(t *testing.T) {
	h, store := handler(t)
	must(t, h, cart.OpenCart{RequestID: "o", CartID: "c4", ClientID: "x"})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, errs[i] = h.Handle(context.Background(), cart.AddItem{RequestID: fmt.Sprint("add-", i), CartID: "c4", Item: cart.ProductItem{ProductID: "p", Quantity: i + 1}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	evs, _, _ := store.Read(context.Background(), cart.StreamID("c4"))
	if len(evs) != 9 {
		t.Fatalf("%d events, want 9", len(evs))
	}
}
