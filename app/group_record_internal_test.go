package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// noSource is a runner's source that is never subscribed to.
type noSource struct{ projector.Source }

// The error record of a --group projection is every consumer's: each
// writes what they all see alike (the events the server parked), so two
// consumers, one of them restarted, never undo each other's record; and a
// consumer that is not under block clears what an earlier run left.
func TestGroupRecord_consumers_of_one_group_write_the_same_record(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	eng, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()})
	if err != nil {
		t.Fatal(err)
	}
	consumer := func() (*session, *slot) {
		r, err := projector.NewRunner(cart.DetailsName, eng, noSource{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sl := &slot{name: cart.DetailsName, groupName: "g-" + cart.DetailsName}
		sl.cur.Store(r)
		return &session{c: &runConfig{servers: servers{timeout: 5 * time.Second}}, store: store, logger: slog.New(slog.DiscardHandler)}, sl
	}
	record := func() string {
		t.Helper()
		st, err := store.Checkpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return stoppedWith(st[cart.DetailsName])
	}
	a, slA := consumer()
	b, slB := consumer()
	down := "blocked: 2 events that kept failing are parked in group g-cart_details"
	a.recordGroupDown(ctx, slA, down, map[*slot]string{})
	b.recordGroupDown(ctx, slB, down, map[*slot]string{}) // a restarted consumer: it remembers nothing
	if got := record(); got != down {
		t.Fatalf("record %q, want %q", got, down)
	}
	b.recordGroupDown(ctx, slB, "", map[*slot]string{}) // replayed: none parked
	if got := record(); got != "" {
		t.Fatalf("record %q once none are parked, want none", got)
	}
}
