package projector_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
	"github.com/revgate/projector/subscription"
)

// An engine is safe for concurrent use: a runner made for it lends it its
// source's streams (an engine with no stream reader) while another
// goroutine handles events through it. Under -race, a lending that wrote
// the engine's fields as Handle read them failed here.
func TestNewRunner_lends_its_streams_while_the_engine_handles_events(t *testing.T) {
	client := dialESDB(t, esdbtest.New(t))
	store := newStore(t)
	e := newEngine(t, store, retry.Default(), cart.NewDetailsProjection())
	log := projectortest.NewLog(cart.Registry())
	byCart := map[string][]projector.Event{}
	var evs []projector.Event
	for i := range 20 {
		id := fmt.Sprintf("lend-%d", i)
		byCart[id] = log.MustAppend(t, cart.StreamID(id), cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c", OpenedAt: t0})
		evs = append(evs, byCart[id]...)
	}
	src, err := subscription.NewAll(client, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}})
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, len(evs))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, ev := range evs {
			if rs, err := e.Handle(context.Background(), ev); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Applied {
				failed <- fmt.Errorf("%s: %v %v", ev.StreamID, rs, err)
			}
		}
	}()
	if _, err := projector.NewRunner("lend", e, src, store); err != nil {
		t.Fatal(err)
	}
	<-done
	close(failed)
	for err := range failed {
		t.Error(err)
	}
	for id, want := range byCart {
		assertDocument(t, store, id, want)
	}
}
