package sourcetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// The holes a real node presents in a stream, each met through the client
// under test on the double (which behaves as a node does; see package
// esdbtest): the engine reads where the stream starts now through the same
// client, and either applies what can be applied and parks the missing
// revisions, naming them, or, under block, stops and says which are gone.

// holeEngine is the cart details projection (or defs) under policy, its
// parked events recorded in store, the stream reads through c.
func holeEngine(t *testing.T, store *mongostore.Store, c Client, policy projector.FailurePolicy, defs ...projector.Definition) *projector.Engine {
	t.Helper()
	quick := retry.Default()
	quick.InitialDelay, quick.MaxRetries = 5*time.Millisecond, 3
	if len(defs) == 0 {
		defs = []projector.Definition{cart.NewDetailsProjection()}
	}
	e, err := projector.NewEngine(store, cart.Registry(), defs, projector.WithRetry(quick), projector.WithFailurePolicy(policy),
		projector.WithParker(store), projector.WithStreamReader(c))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// withDeletions filters $all to the carts and to their metadata streams
// ("$$shopping_cart-..."), where a soft delete writes.
func withDeletions(t *testing.T, c Client) AllSource {
	t.Helper()
	src, err := c.All(neutral.AllOptions{StreamPrefixes: []string{cart.StreamPrefix, "$$" + cart.StreamPrefix}, MaxSearchWindow: 8, CheckpointInterval: 2})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// setMaxCount sets the stream's $maxCount, as an operator would.
func setMaxCount(t *testing.T, s *esdbtest.Server, stream string, n uint64) {
	t.Helper()
	var m kurrentdb.StreamMetadata
	m.SetMaxCount(n)
	if _, err := s.Client(t).SetStreamMetadata(context.Background(), stream, kurrentdb.AppendToStreamOptions{}, m); err != nil {
		t.Fatal(err)
	}
}

// parkedHole returns the hole records of the details projection in store.
func parkedHoles(t *testing.T, store *mongostore.Store) []projector.ParkedEvent {
	t.Helper()
	parked, err := store.Parked(context.Background(), cart.DetailsName)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(parked, func(p projector.ParkedEvent) bool { return p.Type != projector.GoneType })
}

// truncatedFirstSight: a stream whose first events a $maxCount removed
// (and a scavenge took out of $all) before the projection ever saw it.
// Under park its document is the fold of what is left, and a hole record
// names the missing revisions; under block the runner stops, naming them.
func truncatedFirstSight(t *testing.T, f *fixture) {
	c := f.dial(t)
	id := "trunc"
	for i := range 6 {
		f.carts.AppendCart(t, context.Background(), id, lifeEvent(id, i))
	}
	setMaxCount(t, f.server, cart.StreamID(id), 3)
	if n := f.server.Scavenge(); n != 3 {
		t.Fatalf("scavenged %d events, want the 3 beyond $maxCount", n)
	}
	gone := `revisions 0 to 2 of stream "shopping_cart-trunc"`
	t.Run("park", func(t *testing.T) {
		r := NewRunner(t, "holes", holeEngine(t, f.store, c, projector.Park), cartsOnAll(t, c), f.store)
		x := Start(t, r)
		x.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
		if err := x.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := projectortest.CheckDocument(context.Background(), f.store, cart.NewDetailsProjection(), id, f.carts.Events[id][3:]); err != nil {
			t.Fatal(err)
		}
		holes := parkedHoles(t, f.store)
		if len(holes) != 1 || !strings.Contains(holes[0].Error, gone) {
			t.Fatalf("hole records %+v, want one naming %s", holes, gone)
		}
	})
	t.Run("block", func(t *testing.T) {
		store := mongostore.New(mongotest.Database(t))
		r := NewRunner(t, "holes", holeEngine(t, store, c, projector.Block), cartsOnAll(t, c), store)
		x := Start(t, r)
		err := x.Wait(t)
		if !errors.Is(err, projector.ErrRevisionsGone) || !strings.Contains(err.Error(), gone) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Run: %v, want one line naming %s", err, gone)
		}
		if found, _, _ := projector.ReadDocument(context.Background(), store, cart.NewDetailsProjection(), id, new(cart.Details)); found {
			t.Fatal("a document was written past the hole under block")
		}
	})
}

// lifeEvent is the i-th event of cart id: opened, then products added.
func lifeEvent(id string, i int) any {
	if i == 0 {
		return cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "client-" + id, OpenedAt: t0}
	}
	return cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p" + string(rune('0'+i)), Quantity: i}}
}

// truncatedBehind: events removed by $maxCount while the document is
// behind them. The document folds on from where it was past the hole, and
// a hole record names the missing revisions.
func truncatedBehind(t *testing.T, f *fixture) {
	c := f.dial(t)
	id := "behind"
	for i := range 2 {
		f.carts.AppendCart(t, context.Background(), id, lifeEvent(id, i))
	}
	run := func() {
		r := NewRunner(t, "holes", holeEngine(t, f.store, c, projector.Park), cartsOnAll(t, c), f.store)
		x := Start(t, r)
		x.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
		if err := x.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	run()
	for i := 2; i < 6; i++ {
		f.carts.AppendCart(t, context.Background(), id, lifeEvent(id, i))
	}
	setMaxCount(t, f.server, cart.StreamID(id), 2)
	f.server.Scavenge()
	run()
	evs := f.carts.Events[id]
	if err := projectortest.CheckDocument(context.Background(), f.store, cart.NewDetailsProjection(), id, append(slices.Clone(evs[:2]), evs[4:]...)); err != nil {
		t.Fatal(err)
	}
	gone := `revisions 2 to 3 of stream "shopping_cart-behind"`
	if holes := parkedHoles(t, f.store); len(holes) != 1 || !strings.Contains(holes[0].Error, gone) {
		t.Fatalf("hole records %+v, want one naming %s", holes, gone)
	}
}

// softDeletedWrittenAgain: a stream soft-deleted and written again goes on
// from its old revision; its new creation starts the document over, and
// the document is the fold of the new events only.
func softDeletedWrittenAgain(t *testing.T, f *fixture) {
	c := f.dial(t)
	id := "again"
	for i := range 3 {
		f.carts.AppendCart(t, context.Background(), id, lifeEvent(id, i))
	}
	r := NewRunner(t, "holes", holeEngine(t, f.store, c, projector.Block), withDeletions(t, c), f.store)
	x := Start(t, r)
	x.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
	stream := cart.StreamID(id)
	if _, err := f.server.Client(t).DeleteStream(context.Background(), stream, kurrentdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	var fold []projector.Event
	var last uint64
	for i, p := range []any{
		cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "client-new", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "new", Quantity: 7}},
	} {
		name, data, err := cart.Registry().Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		pos, err := c.Append(context.Background(), stream, AnyRevision, Event{ID: uuid.New(), Type: name, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		last = pos
		fold = append(fold, projector.Event{Type: name, StreamID: stream, StreamRevision: uint64(3 + i), Payload: p})
	}
	x.WaitFor(t, "the checkpoint past the new events", func(st projector.RunnerStats) bool {
		return st.Checkpoint != nil && st.Checkpoint.Position >= last
	})
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := projectortest.CheckDocument(context.Background(), f.store, cart.NewDetailsProjection(), id, fold); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Failed != 0 || st.Parked != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// deletionsApplyThePolicy: a tombstone (its $streamDeleted record in $all)
// and a soft delete (the $tb metadata record) apply the projection's
// deletion policy, here removing the document; another cart is untouched.
func deletionsApplyThePolicy(t *testing.T, f *fixture) {
	c := f.dial(t)
	for _, id := range []string{"tomb", "soft", "kept"} {
		for i := range 2 {
			f.carts.AppendCart(t, context.Background(), id, lifeEvent(id, i))
		}
	}
	e := holeEngine(t, f.store, c, projector.Block, cart.NewDetailsProjection().OnDelete(projector.RemoveDocument))
	r := NewRunner(t, "holes", e, withDeletions(t, c), f.store)
	x := Start(t, r)
	x.WaitFor(t, "the checkpoint past the last cart event", f.carts.Reached())
	ctx := context.Background()
	adm := f.server.Client(t)
	if _, err := adm.TombstoneStream(ctx, cart.StreamID("tomb"), kurrentdb.TombstoneStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteStream(ctx, cart.StreamID("soft"), kurrentdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	head := f.server.Head()
	x.WaitFor(t, "the checkpoint at the deletions", func(st projector.RunnerStats) bool {
		return st.Checkpoint != nil && st.Checkpoint.Position >= head
	})
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"tomb", "soft"} {
		if found, _, err := projector.ReadDocument(ctx, f.store, cart.NewDetailsProjection(), id, new(cart.Details)); err != nil || found {
			t.Errorf("%s: found %v (%v), want it removed", id, found, err)
		}
	}
	if err := projectortest.CheckDocument(ctx, f.store, cart.NewDetailsProjection(), "kept", f.carts.Events["kept"]); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// danglingLinks: a $ce- stream read with links resolved, whose first links
// point to events a $maxCount removed. The links come without their events
// (as a node sends them); the runner passes over them, and the stream's
// first event left is a hole at first sight: applied, its missing
// revisions parked.
func danglingLinks(t *testing.T, f *fixture) {
	s := esdbtest.NewWith(t, esdbtest.Options{SystemProjections: true})
	c := f.dial(t, s.URI())
	carts := NewCarts(c)
	id := "linked"
	for i := range 3 {
		carts.AppendCart(t, context.Background(), id, lifeEvent(id, i))
	}
	setMaxCount(t, s, cart.StreamID(id), 1)
	s.Scavenge()
	src, err := c.Stream("$ce-shopping_cart", neutral.StreamOptions{ResolveLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(t, "holes", holeEngine(t, f.store, c, projector.Park), src, f.store)
	x := Start(t, r)
	x.WaitFor(t, "the checkpoint at the last link", func(st projector.RunnerStats) bool {
		return st.Checkpoint != nil && st.Checkpoint.Position >= 2
	})
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Events != 1 || st.Applied != 1 {
		t.Fatalf("stats %+v, want the one event left applied and the dangling links passed over", st)
	}
	if err := projectortest.CheckDocument(context.Background(), f.store, cart.NewDetailsProjection(), id, carts.Events[id][2:]); err != nil {
		t.Fatal(err)
	}
	gone := `revisions 0 to 1 of stream "shopping_cart-linked"`
	if holes := parkedHoles(t, f.store); len(holes) != 1 || !strings.Contains(holes[0].Error, gone) {
		t.Fatalf("hole records %+v, want one naming %s", holes, gone)
	}
}

// authRequired: a source without credentials, against a node with
// authentication on, fails with one clear line; with an operator's
// credentials it reads.
func authRequired(t *testing.T, f *fixture) {
	s := esdbtest.NewWith(t, esdbtest.Options{Users: esdbtest.DefaultUsers()})
	writer := NewCarts(f.dial(t, s.URIAs("admin", "changeit")))
	writer.Append(t, 21, 3, 3)
	c := f.dial(t, s.URI())
	r := NewRunner(t, "auth", Engine(t, f.store), cartsOnAll(t, c), f.store)
	x := Start(t, r)
	err := x.Wait(t)
	if !errors.Is(err, neutral.ErrAccessDenied) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "gave up after") {
		t.Fatalf("Run without credentials: %v, want one line saying access is denied", err)
	}
	t.Logf("without credentials: %v", err)
	admin := f.dial(t, s.URIAs("admin", "changeit"))
	r = NewRunner(t, "auth", Engine(t, f.store), cartsOnAll(t, admin), f.store)
	y := Start(t, r)
	y.WaitFor(t, "the checkpoint past the last cart event", writer.Reached())
	if err := y.Stop(); err != nil {
		t.Fatal(err)
	}
	writer.Check(t, f.store)
}
