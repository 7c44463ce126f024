package projector_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

func shortWait() retry.Policy {
	p := retry.Default()
	p.InitialDelay, p.MaxDelay, p.MaxRetries, p.MaxElapsed = 5*time.Millisecond, 50*time.Millisecond, -1, 3*time.Second
	return p
}

func TestWaitForRevision_returns_once_the_document_has_the_write(t *testing.T) {
	s := newStore(t)
	e := newEngine(t, s, retry.Default())
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("w1"),
		cart.ShoppingCartOpened{ShoppingCartID: "w1", ClientID: "c", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "w1", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(100 * time.Millisecond) // the projector is a little behind
		for _, ev := range evs {
			e.Handle(context.Background(), ev)
		}
	}()
	start := time.Now()
	if err := projector.WaitForRevision(context.Background(), s, cart.DetailsName, "w1", 1, shortWait()); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 90*time.Millisecond {
		t.Fatal("returned before the write was projected")
	}
	<-done
	assertDocument(t, s, "w1", evs)
}

func TestWaitForRevision_gives_up_with_where_the_document_is(t *testing.T) {
	s := newStore(t)
	e := newEngine(t, s, retry.Default())
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("w2"), cart.ShoppingCartOpened{ShoppingCartID: "w2", ClientID: "c", OpenedAt: t0})
	handle(t, e, evs[0])
	p := shortWait()
	p.MaxElapsed = 200 * time.Millisecond
	err := projector.WaitForRevision(context.Background(), s, cart.DetailsName, "w2", 3, p)
	if !errors.Is(err, projector.ErrNotYet) || !strings.Contains(err.Error(), "saw revision 0") {
		t.Fatalf("err %v", err)
	}
	err = projector.WaitForRevision(context.Background(), s, cart.DetailsName, "nope", 0, p)
	if !errors.Is(err, projector.ErrNotYet) || !strings.Contains(err.Error(), "no document") {
		t.Fatalf("err %v", err)
	}
}

func TestWaitForPosition_follows_the_checkpoint(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	go func() {
		time.Sleep(50 * time.Millisecond)
		s.SaveCheckpoint(ctx, "sub", projector.Checkpoint{Position: 500})
	}()
	if err := projector.WaitForPosition(ctx, s, "sub", 400, shortWait()); err != nil {
		t.Fatal(err)
	}
	p := shortWait()
	p.MaxElapsed = 100 * time.Millisecond
	if err := projector.WaitForPosition(ctx, s, "sub", 900, p); !errors.Is(err, projector.ErrNotYet) || !strings.Contains(err.Error(), "saw 500") {
		t.Fatalf("err %v", err)
	}
}

// A wait its context ends says so beside ErrNotYet, so that an API tells a
// deadline (answer 504) from a client that went away; one its policy ends
// says only ErrNotYet.
func TestWait_ended_by_its_context_wraps_the_contexts_error_too(t *testing.T) {
	s := newStore(t)
	p := shortWait()
	p.MaxElapsed = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := projector.WaitForRevision(ctx, s, cart.DetailsName, "absent", 0, p)
	if !errors.Is(err, projector.ErrNotYet) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForRevision past its deadline: %v; want ErrNotYet and DeadlineExceeded", err)
	}
	gone, stop := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, stop)
	err = projector.WaitForPosition(gone, s, "none", 10, p)
	if !errors.Is(err, projector.ErrNotYet) || !errors.Is(err, context.Canceled) {
		t.Errorf("WaitForPosition cancelled: %v; want ErrNotYet and Canceled", err)
	}
	p.MaxElapsed = 50 * time.Millisecond
	err = projector.WaitForPosition(context.Background(), s, "none", 10, p)
	if !errors.Is(err, projector.ErrNotYet) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForPosition out of policy: %v; want ErrNotYet alone", err)
	}
}

// A document kept under another strategy than the revision gate has no
// revision: waiting on one fails at once, saying to wait on the position,
// rather than run out saying it saw no document.
func TestWaitForRevision_on_a_document_with_no_revision_says_to_wait_on_the_position(t *testing.T) {
	s := newStore(t)
	p := projector.New[struct{ Carts int }]("carts_by_client", func(ev projector.Event) (string, bool) {
		if o, ok := ev.Payload.(cart.ShoppingCartOpened); ok {
			return o.ClientID, true
		}
		return "", false
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(s struct{ Carts int }, _ cart.ShoppingCartOpened) (struct{ Carts int }, error) {
		s.Carts++
		return s, nil
	})
	e := newEngine(t, s, retry.Default(), p)
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("w3"), cart.ShoppingCartOpened{ShoppingCartID: "w3", ClientID: "c3", OpenedAt: t0})
	handle(t, e, evs[0])
	policy := shortWait()
	policy.MaxElapsed = time.Minute
	start := time.Now()
	err := projector.WaitForRevision(context.Background(), s, "carts_by_client", "c3", 0, policy)
	if err == nil || errors.Is(err, projector.ErrNotYet) || !strings.Contains(err.Error(), "WaitForPosition") || !strings.Contains(err.Error(), "carts_by_client/c3") {
		t.Fatalf("err %v; want one that says to wait on the position", err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Fatalf("waited %v: the wait on a document with no revision ran out its policy", waited)
	}
}

// writtenAfterFirstLoad is the store, with the events of after handled
// right after its first gated read of a document: the projector's write
// lands between that read and the wait's next one.
type writtenAfterFirstLoad struct {
	*mongostore.Store
	once  sync.Once
	after func()
}

func (s *writtenAfterFirstLoad) Load(ctx context.Context, coll, id string, from uint64, state any) (driver.Head, bool, error) {
	h, found, err := s.Store.Load(ctx, coll, id, from, state)
	s.once.Do(s.after)
	return h, found, err
}

// A document under the revision gate created between the wait's read that
// found none and its look at whether one is there under another strategy
// is waited for, not taken for one of another strategy.
func TestWaitForRevision_a_document_created_between_two_reads_is_waited_for(t *testing.T) {
	s := newStore(t)
	e := newEngine(t, s, retry.Default())
	evs := projectortest.NewLog(cart.Registry()).MustAppend(t, cart.StreamID("w2"),
		cart.ShoppingCartOpened{ShoppingCartID: "w2", ClientID: "c", OpenedAt: t0})
	racy := &writtenAfterFirstLoad{Store: s, after: func() {
		if _, err := e.Handle(context.Background(), evs[0]); err != nil {
			t.Error(err)
		}
	}}
	if err := projector.WaitForRevision(context.Background(), racy, cart.DetailsName, "w2", 0, shortWait()); err != nil {
		t.Fatal(err)
	}
}
