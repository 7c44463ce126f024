package subscription_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/subscription"
)

// EventStoreImage is the EventStoreDB image of the Docker tier, and
// KurrentDBImage the KurrentDB one: PROJECTOR_TEST_ESDB_IMAGE picks either
// (or any other), "make test-docker-kurrentdb" the latter.
const (
	EventStoreImage = "eventstore/eventstore:24.10"
	KurrentDBImage  = "kurrentplatform/kurrentdb:25.0"
)

// serverImage is the image the Docker tier starts.
func serverImage() string {
	if img := os.Getenv("PROJECTOR_TEST_ESDB_IMAGE"); img != "" {
		return img
	}
	return EventStoreImage
}

// realServers returns a connection string for a real EventStoreDB and a
// database on a real MongoDB: PROJECTOR_TEST_ESDB and MONGO_URI when set (the
// compose file's servers, "make test-compose"), else containers started here.
// Without either, the test is skipped with one line saying why.
func realServers(t *testing.T) (string, *mongo.Database) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the Docker tier")
	}
	uri, mongoURI := os.Getenv("PROJECTOR_TEST_ESDB"), os.Getenv("MONGO_URI")
	if uri == "" || mongoURI == "" {
		if err := mongotest.DockerEngine(); err != nil {
			t.Skipf("no Docker engine reachable and PROJECTOR_TEST_ESDB/MONGO_URI not both set, skipping the real-server tier: %v", err)
		}
	}
	if uri == "" {
		uri = eventStoreContainer(t)
	}
	if mongoURI != "" {
		return uri, mongotest.Database(t)
	}
	return uri, mongotest.Docker(t)
}

// eventStoreContainer starts EventStoreDB in insecure mode, in memory.
func eventStoreContainer(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img := serverImage()
	c, err := testcontainers.Run(ctx, img,
		testcontainers.WithExposedPorts("2113/tcp"),
		// EventStoreDB reads EVENTSTORE_ settings, KurrentDB KURRENTDB_ ones.
		testcontainers.WithEnv(map[string]string{
			"EVENTSTORE_INSECURE":                  "true",
			"EVENTSTORE_MEM_DB":                    "true",
			"EVENTSTORE_RUN_PROJECTIONS":           "None",
			"EVENTSTORE_ENABLE_ATOM_PUB_OVER_HTTP": "true",
			"KURRENTDB_INSECURE":                   "true",
			"KURRENTDB_MEM_DB":                     "true",
			"KURRENTDB_RUN_PROJECTIONS":            "None",
		}),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/health/live").WithPort("2113/tcp").WithStartupTimeout(3*time.Minute)),
	)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("start %s: %v", img, err)
	}
	host, err := c.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	port, err := c.MappedPort(ctx, "2113/tcp")
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("esdb://%s:%s?tls=false", host, port.Port())
}

func TestDocker_catch_up_restart_and_two_persistent_consumers_on_EventStoreDB_and_MongoDB(t *testing.T) {
	uri, db := realServers(t)
	ctx := context.Background()
	c := dial(t, uri)
	cl := rawClient(t, uri)
	store := mongostore.New(db)
	g := sourcetest.NewCarts(sourcetest.Sources(c))
	g.Prefix = uuid.NewString()[:8] + "-"
	g.Append(t, 21, 50, 10)
	prefix := cart.StreamPrefix + g.Prefix

	t.Run("catch-up on $all, then a restart from the checkpoint", func(t *testing.T) {
		src, err := subscription.NewAll(c, subscription.AllOptions{StreamPrefixes: []string{prefix}})
		if err != nil {
			t.Fatal(err)
		}
		e := sourcetest.Engine(t, store)
		r := sourcetest.NewRunner(t, "docker-carts", e, src, store, projector.WithCheckpointEvery(50, 100*time.Millisecond))
		x := sourcetest.Start(t, r)
		x.WaitFor(t, "every cart at its fold", g.AtFold(store))
		x.WaitFor(t, "a checkpoint past every cart event", func(st projector.RunnerStats) bool { return st.Saved > 0 && st.Applied == uint64(g.Total) })
		if err := x.Stop(); err != nil {
			t.Fatal(err)
		}
		cp, err := store.LoadCheckpoint(ctx, "docker-carts")
		if err != nil || cp == nil {
			t.Fatalf("checkpoint %v %v", cp, err)
		}
		again := sourcetest.NewRunner(t, "docker-carts", sourcetest.Engine(t, store), src, store)
		y := sourcetest.Start(t, again)
		time.Sleep(2 * time.Second) // what a restart would replay arrives in this time
		if err := y.Stop(); err != nil {
			t.Fatal(err)
		}
		if st := again.Stats(); st.Applied != 0 || st.Subscriptions == 0 {
			t.Fatalf("the restart applied %d events again: %+v", st.Applied, st)
		}
	})

	t.Run("two consumers of one persistent group, each with its own engine", func(t *testing.T) {
		store := mongostore.New(db.Client().Database(db.Name() + "_persistent"))
		t.Cleanup(func() { _ = store.Database().Drop(context.Background()) })
		settings := kurrentdb.SubscriptionSettingsDefault()
		settings.StartFrom = kurrentdb.Start{}
		settings.ConsumerStrategyName = kurrentdb.ConsumerStrategyRoundRobin
		group := "details-" + g.Prefix
		if err := cl.CreatePersistentSubscriptionToAll(ctx, group, kurrentdb.PersistentAllSubscriptionOptions{
			Settings: &settings, StartFrom: kurrentdb.Start{},
			Filter: &kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: []string{prefix}},
		}); err != nil {
			t.Fatal(err)
		}
		var xs []*sourcetest.Running
		for i := range 2 {
			src, err := subscription.NewPersistent(dial(t, uri), subscription.PersistentOptions{Stream: subscription.AllStreams, Group: group})
			if err != nil {
				t.Fatal(err)
			}
			xs = append(xs, sourcetest.Start(t, sourcetest.NewRunner(t, fmt.Sprintf("consumer-%d", i), sourcetest.Engine(t, store), src, nil)))
		}
		xs[0].WaitFor(t, "every cart at its fold", g.AtFold(store))
		for _, x := range xs {
			if err := x.Stop(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Deletion and truncation on a real node: a stream whose start a $maxCount
// removed is a hole at its first sight (read through a stream subscription,
// which the node serves truncated at once), applied past and parked under
// park; a tombstone and a soft delete remove the documents of a projection
// under RemoveDocument, read from $all with the metadata streams.
func TestDocker_deletion_and_truncation_on_a_real_node(t *testing.T) {
	uri, db := realServers(t)
	ctx := context.Background()
	c := dial(t, uri)
	cl := rawClient(t, uri)
	store := mongostore.New(db)
	g := sourcetest.NewCarts(sourcetest.Sources(c))
	g.Prefix = uuid.NewString()[:8] + "-"
	engine := func(defs ...projector.Definition) *projector.Engine {
		e, err := projector.NewEngine(store, cart.Registry(), defs, projector.WithRetry(sourcetest.Patient()),
			projector.WithFailurePolicy(projector.Park), projector.WithParker(store), projector.WithStreamReader(c))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		return e
	}
	life := func(id string, n int) {
		for i := range n {
			var ev any = cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: fmt.Sprint("p", i), Quantity: i + 1}}
			if i == 0 {
				ev = cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c", OpenedAt: time.Now().UTC().Truncate(time.Millisecond)}
			}
			g.AppendCart(t, ctx, id, ev)
		}
	}

	t.Run("a stream truncated before its first sight", func(t *testing.T) {
		id := g.Prefix + "trunc"
		life(id, 6)
		var m kurrentdb.StreamMetadata
		m.SetMaxCount(3)
		if _, err := cl.SetStreamMetadata(ctx, cart.StreamID(id), kurrentdb.AppendToStreamOptions{}, m); err != nil {
			t.Fatal(err)
		}
		src, err := subscription.NewStream(c, cart.StreamID(id), subscription.StreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := sourcetest.NewRunner(t, "docker-trunc", engine(cart.NewDetailsProjection()), src, store)
		x := sourcetest.Start(t, r)
		x.WaitFor(t, "the checkpoint at the stream's last revision", func(st projector.RunnerStats) bool {
			return st.Checkpoint != nil && st.Checkpoint.Position == 5
		})
		if err := x.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := projectortest.CheckDocument(ctx, store, cart.NewDetailsProjection(), id, g.Events[id][3:]); err != nil {
			t.Fatal(err)
		}
		parked, err := store.Parked(ctx, cart.DetailsName)
		if err != nil || len(parked) != 1 || parked[0].Type != projector.GoneType || !strings.Contains(parked[0].Error, "revisions 0 to 2") {
			t.Fatalf("parked %+v (%v), want the hole of revisions 0 to 2", parked, err)
		}
	})

	t.Run("a tombstone and a soft delete under RemoveDocument", func(t *testing.T) {
		tomb, soft, kept := g.Prefix+"tomb", g.Prefix+"soft", g.Prefix+"kept"
		for _, id := range []string{tomb, soft, kept} {
			life(id, 2)
		}
		prefix := cart.StreamPrefix + g.Prefix
		src, err := subscription.NewAll(c, subscription.AllOptions{StreamPrefixes: []string{prefix, "$$" + prefix}})
		if err != nil {
			t.Fatal(err)
		}
		def := cart.NewDetailsProjection().OnDelete(projector.RemoveDocument)
		r := sourcetest.NewRunner(t, "docker-deletions", engine(def), src, store)
		x := sourcetest.Start(t, r)
		if _, err := cl.TombstoneStream(ctx, cart.StreamID(tomb), kurrentdb.TombstoneStreamOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.DeleteStream(ctx, cart.StreamID(soft), kurrentdb.DeleteStreamOptions{}); err != nil {
			t.Fatal(err)
		}
		found := func(id string) bool {
			ok, _, err := projector.ReadDocument(ctx, store, def, id, new(cart.Details))
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		x.WaitFor(t, "the deleted carts' documents removed, the other one there", func(projector.RunnerStats) bool {
			return !found(tomb) && !found(soft) && found(kept)
		})
		if err := x.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := projectortest.CheckDocument(ctx, store, def, kept, g.Events[kept]); err != nil {
			t.Fatal(err)
		}
	})
}

// rawClient returns an official client on uri, for what the sources do not
// do (creating groups, deleting streams), closed when the test ends.
func rawClient(t *testing.T, uri string) *kurrentdb.Client {
	t.Helper()
	cfg, err := kurrentdb.ParseConnectionString(uri)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = kurrentdb.NoopLogging()
	cl, err := kurrentdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
