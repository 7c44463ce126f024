package projector_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// oneForAll maps every cart stream to one document under the revision gate:
// the mistake a document fed by several streams is.
func oneForAll() *projector.Projection[cart.Details] {
	p := projector.New[cart.Details]("one_for_all", func(ev projector.Event) (string, bool) {
		return "all", strings.HasPrefix(ev.StreamID, cart.StreamPrefix)
	})
	projector.Create(p, func(e cart.ShoppingCartOpened) (cart.Details, error) {
		return cart.Details{ClientID: e.ClientID, Status: cart.StatusOpened, ProductItems: []cart.ProductItem{}}, nil
	})
	projector.On(p, func(d cart.Details, e cart.ProductItemAddedToShoppingCart) (cart.Details, error) {
		items, err := cart.AddProductItem(d.ProductItems, e.ProductItem)
		d.ProductItems = items
		return d, err
	})
	return p
}

// Under the revision gate a document records the stream that feeds it: an
// event of another stream fails for good, naming both streams and the
// strategies that fit; it is never counted a duplicate (which lost updates
// without an error), on the event-at-a-time path and the batch path alike.
func TestGate_an_event_of_another_stream_than_its_documents_is_refused(t *testing.T) {
	log := projectortest.NewLog(cart.Registry())
	add := func(id, product string) cart.ProductItemAddedToShoppingCart {
		return cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: product, Quantity: 1}}
	}
	a := log.MustAppend(t, cart.StreamID("a"), cart.ShoppingCartOpened{ShoppingCartID: "a", ClientID: "x", OpenedAt: t0}, add("a", "p1"), add("a", "p2"))
	b := log.MustAppend(t, cart.StreamID("b"), cart.ShoppingCartOpened{ShoppingCartID: "b", ClientID: "y", OpenedAt: t0}, add("b", "q1"), add("b", "q2"))
	quick := retry.Default()
	quick.InitialDelay, quick.MaxRetries = 5*time.Millisecond, 2

	for _, policy := range []projector.FailurePolicy{projector.Block, projector.Skip} {
		for _, batched := range []bool{false, true} {
			name := policy.String()
			if batched {
				name += "_batched"
			}
			t.Run(name, func(t *testing.T) {
				s := newStore(t)
				p := oneForAll()
				e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(quick), projector.WithFailurePolicy(policy))
				if err != nil {
					t.Fatal(err)
				}
				var results []projector.Result
				if batched {
					for _, rs := range e.HandleBatch(context.Background(), append(append([]projector.Event{}, a...), b...)) {
						results = append(results, rs...)
					}
				} else {
					for _, ev := range append(append([]projector.Event{}, a...), b...) {
						results = append(results, handle(t, e, ev)...)
					}
				}
				for i, r := range results[:3] {
					if r.Outcome != projector.Applied {
						t.Fatalf("stream a, event %d: %v %v", i, r.Outcome, r.Err)
					}
				}
				want := map[projector.FailurePolicy]projector.Outcome{projector.Block: projector.Failed, projector.Skip: projector.Skipped}[policy]
				r := results[3]
				if r.Outcome != want || !errors.Is(r.Err, projector.ErrOtherStream) ||
					!strings.Contains(r.Err.Error(), `fed by stream "shopping_cart-a", and this event is of stream "shopping_cart-b"`) ||
					!strings.Contains(r.Err.Error(), "RevisionMap, HandledIDs or Inbox") {
					t.Fatalf("stream b's first event: %v %v, want %v with ErrOtherStream naming both streams and the strategies", r.Outcome, r.Err, want)
				}
				for i, r := range results[4:] {
					if r.Outcome == projector.Duplicate || r.Outcome == projector.Applied {
						t.Fatalf("stream b, event %d: %v: counted as the document's own", i+1, r.Outcome)
					}
				}
				// The document is stream a's fold, untouched by b.
				if err := projectortest.CheckDocument(context.Background(), s, p, "all", a); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// An event of another stream at a revision the document is behind waits for
// its predecessor, then is refused as of another stream, not as missing one.
func TestGate_an_event_of_another_stream_behind_the_document_is_refused_after_its_wait(t *testing.T) {
	s := newStore(t)
	log := projectortest.NewLog(cart.Registry())
	a := log.MustAppend(t, cart.StreamID("a"), cart.ShoppingCartOpened{ShoppingCartID: "a", ClientID: "x", OpenedAt: t0})
	var b []projector.Event
	for i := range 6 {
		b = append(b, log.MustAppend(t, cart.StreamID("b"), cart.ProductItemAddedToShoppingCart{ShoppingCartID: "b", ProductItem: cart.ProductItem{ProductID: "q", Quantity: i + 1}})...)
	}
	quick := retry.Default()
	quick.InitialDelay, quick.MaxRetries = 5*time.Millisecond, 2
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{oneForAll()}, projector.WithRetry(quick))
	if err != nil {
		t.Fatal(err)
	}
	handle(t, e, a[0])
	r := handle(t, e, b[5])[0] // revision 5: the document is at 0
	if r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrOtherStream) || errors.Is(r.Err, projector.ErrPredecessorMissing) {
		t.Fatalf("%v %v, want ErrOtherStream", r.Outcome, r.Err)
	}
	var perr *projector.Error
	if !errors.As(r.Err, &perr) || perr.Retryable() {
		t.Fatalf("%v: want a permanent failure", r.Err)
	}
}
