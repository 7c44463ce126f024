package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// liveTally is the state of bench's live read models: how many events a
// document has taken.
type liveTally struct {
	Events int `bson:"events"`
}

// liveStreams is the prefix of the live run's cart streams.
const liveStreams = "live-cart-"

// liveClients is how many clients the live run's carts have.
const liveClients = 5

// liveProjection is a read model of the live run's carts shaped as model's:
// a document per cart under the revision gate (details), per client fed by
// its carts under a revision map (client), or one for every cart under a
// window of handled ids (shop). Each counts its events.
func liveProjection(model string) projector.Definition {
	count := func(s liveTally, _ any) (liveTally, error) { s.Events++; return s, nil }
	switch model {
	case "client":
		p := projector.NewRouted[liveTally]("live", func(ev projector.Event) (string, bool, error) {
			client, ok := cart.ClientOf(ev)
			if !ok {
				return "", true, fmt.Errorf("no client in the metadata")
			}
			return client, true, nil
		}).Idempotency(projector.RevisionMap())
		projector.On(p, func(s liveTally, e cart.ShoppingCartOpened) (liveTally, error) { return count(s, e) })
		projector.On(p, func(s liveTally, e cart.ProductItemAddedToShoppingCart) (liveTally, error) { return count(s, e) })
		return p
	case "shop":
		p := projector.New[liveTally]("live", func(projector.Event) (string, bool) { return cart.ShopSummaryID, true }).
			Idempotency(projector.HandledIDs(cart.ShopWindow))
		projector.On(p, func(s liveTally, e cart.ShoppingCartOpened) (liveTally, error) { return count(s, e) })
		projector.On(p, func(s liveTally, e cart.ProductItemAddedToShoppingCart) (liveTally, error) { return count(s, e) })
		return p
	}
	p := projector.New[liveTally]("live", projector.StreamSuffix(liveStreams))
	projector.Create(p, func(e cart.ShoppingCartOpened) (liveTally, error) { return count(liveTally{}, e) })
	projector.On(p, func(s liveTally, e cart.ProductItemAddedToShoppingCart) (liveTally, error) { return count(s, e) })
	return p
}

// benchLive appends n events at a steady rate while the projector runs a
// read model shaped as model's, and measures each one's time from append to
// visible in its document.
func benchLive(ctx context.Context, es *esdbtest.Server, db *mongo.Database, model string, n int, rate float64) (p50, p99 time.Duration, err error) {
	if err := db.Drop(ctx); err != nil {
		return 0, 0, err
	}
	store := mongostore.New(db)
	c, err := kurrent.Dial(es.URI(), nil)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	l, err := newLiveRun(ctx, es, c, store, model)
	if err != nil {
		return 0, 0, err
	}
	stop := l.start(ctx)
	defer func() {
		if runErr := stop(); err == nil && runErr != nil {
			err = fmt.Errorf("the live runner: %w", runErr)
		}
	}()
	lat, err := l.measure(ctx, n, rate)
	if err != nil {
		return 0, 0, err
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}

// liveRun is bench's live run: a runner of a read model of the live run's
// carts, from the head of the event server on, and the client that appends
// their events.
type liveRun struct {
	model  string // the read model's shape: details, client or shop
	live   projector.Definition
	store  *mongostore.Store
	client *subscription.Client
	runner *projector.Runner
	taken  map[string]int // events each document should have taken
}

// newLiveRun makes the live run's runner of a read model shaped as model's,
// on store, with a checkpoint at the head of es: live only, from the head
// on.
func newLiveRun(ctx context.Context, es *esdbtest.Server, c *subscription.Client, store *mongostore.Store, model string) (*liveRun, error) {
	head := es.Head()
	src, err := subscription.NewAll(c, subscription.AllOptions{StreamPrefixes: []string{liveStreams}})
	if err != nil {
		return nil, err
	}
	if err := store.SaveCheckpoint(ctx, "live", projector.Checkpoint{Position: head, Prepare: head}); err != nil {
		return nil, err
	}
	live := liveProjection(model)
	eng, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{live})
	if err != nil {
		return nil, err
	}
	r, err := projector.NewRunner("live", eng, src, store)
	if err != nil {
		return nil, err
	}
	return &liveRun{model: model, live: live, store: store, client: c, runner: r, taken: map[string]int{}}, nil
}

// start runs the runner until stop, which returns what it ended with.
func (l *liveRun) start(ctx context.Context) (stop func() error) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.runner.Run(rctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// measure appends n events at rate a second, each once the one before is
// visible, and returns each one's time from append to visible in its
// document.
func (l *liveRun) measure(ctx context.Context, n int, rate float64) ([]time.Duration, error) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var lat []time.Duration
	carts := max(1, n/10)
	for i := range n {
		<-tick.C
		doc, began, err := l.appendEvent(ctx, i, carts)
		if err != nil {
			return nil, err
		}
		if err := l.waitVisible(ctx, i, doc, began); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(began))
	}
	return lat, nil
}

// appendEvent appends the i-th event of the run to its cart, one of carts
// (the first event of each opens it), and returns the document it goes to
// and when it was appended.
func (l *liveRun) appendEvent(ctx context.Context, i, carts int) (doc string, began time.Time, err error) {
	k := i % carts
	id, client := fmt.Sprint(k), fmt.Sprintf("live-client-%d", k%liveClients)
	var payload any = cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}}
	if i < carts {
		payload = cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: client}
	}
	doc = map[string]string{"details": id, "client": client, "shop": cart.ShopSummaryID}[l.model]
	l.taken[doc]++
	name, data, _ := cart.Registry().Encode(payload)
	began = time.Now()
	_, err = l.client.Append(ctx, liveStreams+id, subscription.AnyRevision, subscription.NewEvent{
		ID: uuid.New(), Type: name, Data: data, Metadata: []byte(`{"clientId":"` + client + `"}`),
	})
	return doc, began, err
}

// waitVisible waits until doc has taken every event appended to it, the
// i-th, appended at began, the last; for 30 seconds at most.
func (l *liveRun) waitVisible(ctx context.Context, i int, doc string, began time.Time) error {
	for {
		var got liveTally
		found, _, err := projector.ReadDocument(ctx, l.store, l.live, doc, &got)
		if err != nil {
			return err
		}
		if found && got.Events >= l.taken[doc] {
			return nil
		}
		if time.Since(began) > 30*time.Second {
			return fmt.Errorf("event %d not visible after 30s", i)
		}
		time.Sleep(time.Millisecond)
	}
}
