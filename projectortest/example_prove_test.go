package projectortest_test

import (
	"context"
	"fmt"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projectortest"
)

// Prove a projection exactly-once: every event delivered up to three times,
// shuffled, from eight workers, then every document compared with the pure
// fold of its events.
func ExampleProve() {
	store := mongostore.New(mongotest.ExampleDatabase("prove")) // any MongoDB database
	rep, err := projectortest.Prove(context.Background(), store, cart.Registry(), cart.NewDetailsProjection(),
		lives(10, 6, 3), projectortest.Delivery{MaxTimes: 3, Workers: 8, Shuffle: true, Seed: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d documents, each the fold of its %d events in all\n", rep.Documents, rep.Events)
	// Output: 10 documents, each the fold of its 60 events in all
}
