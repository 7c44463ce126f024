package esdbtest_test

import (
	"context"
	"fmt"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/esdbtest"
)

// A test starts a server, connects the official client to it and injects a
// fault. In a test, esdbtest.New(t) and s.Client(t) do the set-up and the
// clean-up.
func Example() {
	s, err := esdbtest.Start(esdbtest.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	cfg, err := kurrentdb.ParseConnectionString(s.URI())
	if err != nil {
		panic(err)
	}
	cfg.Logger = kurrentdb.NoopLogging()
	c, err := kurrentdb.NewClient(cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	res, err := c.AppendToStream(ctx, "cart-1", kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.NoStream{}},
		kurrentdb.EventData{EventType: "CartOpened", ContentType: kurrentdb.ContentTypeJson, Data: []byte(`{"id":"1"}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println("next expected revision:", res.NextExpectedVersion, "head is the append:", res.CommitPosition == s.Head())

	sub, err := c.SubscribeToStream(ctx, "cart-1", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}})
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	fmt.Println("received:", sub.Recv().EventAppeared.Event.EventType)
	// The server's CaughtUp carries no timestamp, as EventStoreDB 23.10's
	// does: KurrentDB-Client-Go delivers it with every field nil.
	e := sub.Recv()
	fmt.Println("caught up:", e.CaughtUp != nil || *e == (kurrentdb.SubscriptionEvent{}))
	fmt.Println("dropped subscriptions:", s.DropSubscriptions())
	fmt.Println("subscription dropped:", sub.Recv().SubscriptionDropped != nil)
	// Output:
	// next expected revision: 0 head is the append: true
	// received: CartOpened
	// caught up: true
	// dropped subscriptions: 1
	// subscription dropped: true
}
