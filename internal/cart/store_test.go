package cart_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/subscription"
)

// kurrentClient returns a client of the KurrentDB adapter on s, addressed
// with the kurrentdb:// scheme, closed when the test ends.
func kurrentClient(t *testing.T, s *esdbtest.Server) *subscription.Client {
	t.Helper()
	c, err := kurrent.Dial(strings.Replace(s.URI(), "esdb://", "kurrentdb://", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The store maps the client's answers to the write side's: a stream never
// written is revision -1 with no events, a stale expected revision is
// ErrConflict. (That both adapters answer alike, the acceptance suite of
// internal/sourcetest checks on each.)
func TestEventStore_reads_and_appends_with_expected_revisions(t *testing.T) {
	store, ctx := cart.NewStore(kurrentClient(t, esdbtest.New(t))), context.Background()
	stream := cart.StreamID("k1")
	if evs, rev, err := store.Read(ctx, stream); err != nil || rev != -1 || len(evs) != 0 {
		t.Fatalf("a stream with no events: %v, revision %d, %v", evs, rev, err)
	}
	first := []cart.NewEvent{
		{ID: uuid.New(), Type: cart.TypeOpened, Data: []byte(`{"shoppingCartId":"k1","clientId":"x"}`), Metadata: []byte(`{"clientId":"x"}`)},
		{ID: uuid.New(), Type: cart.TypeAdded, Data: []byte(`{"shoppingCartId":"k1"}`)},
	}
	if err := store.Append(ctx, stream, -1, first); err != nil {
		t.Fatal(err)
	}
	evs, rev, err := store.Read(ctx, stream)
	if err != nil || rev != 1 || len(evs) != 2 || evs[0].ID != first[0].ID.String() || evs[1].Type != cart.TypeAdded || string(evs[0].Data) != string(first[0].Data) {
		t.Fatalf("read back: %+v, revision %d, %v", evs, rev, err)
	}
	// The same events at the same expected revision: the server's
	// idempotent write appends nothing new.
	if err := store.Append(ctx, stream, -1, first); err != nil {
		t.Fatalf("the same append again: %v", err)
	}
	more := []cart.NewEvent{{ID: uuid.New(), Type: cart.TypeConfirmed, Data: []byte(`{"shoppingCartId":"k1"}`)}}
	for _, stale := range []int64{-1, 0} {
		if err := store.Append(ctx, stream, stale, more); !errors.Is(err, cart.ErrConflict) {
			t.Errorf("append expecting %d at revision 1: %v, want ErrConflict", stale, err)
		}
	}
	if err := store.Append(ctx, stream, 1, more); err != nil {
		t.Fatal(err)
	}
	if evs, rev, err := store.Read(ctx, stream); err != nil || rev != 2 || len(evs) != 3 {
		t.Fatalf("after the third event: %d events, revision %d, %v", len(evs), rev, err)
	}
}

func TestHandle_on_the_KurrentDB_client_a_cart_life_and_concurrent_commands(t *testing.T) {
	store := cart.NewStore(kurrentClient(t, esdbtest.New(t)))
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	h := cart.NewHandler(store, func() time.Time { return at })
	must(t, h, cart.OpenCart{RequestID: "r1", CartID: "c1", ClientID: "x"})
	must(t, h, cart.AddItem{RequestID: "r2", CartID: "c1", Item: cart.ProductItem{ProductID: "p", Quantity: 3}})
	if r := must(t, h, cart.AddItem{RequestID: "r2", CartID: "c1", Item: cart.ProductItem{ProductID: "p", Quantity: 3}}); !r.Duplicate {
		t.Fatalf("a retried command: %+v", r)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, errs[i] = h.Handle(context.Background(), cart.AddItem{RequestID: fmt.Sprint("add-", i), CartID: "c1", Item: cart.ProductItem{ProductID: "p", Quantity: i + 1}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	if r := must(t, h, cart.ConfirmCart{RequestID: "r4", CartID: "c1"}); r.Appended != 1 || r.Revision != 10 {
		t.Fatalf("confirm: %+v", r)
	}
	evs, rev, err := store.Read(context.Background(), cart.StreamID("c1"))
	if err != nil || rev != 10 || len(evs) != 11 {
		t.Fatalf("stream: %d events, revision %d, %v", len(evs), rev, err)
	}
	if evs[0].ID != cart.EventID("c1", "r1", 0).String() {
		t.Fatalf("first event id %s, want the one derived from its request", evs[0].ID)
	}
}
