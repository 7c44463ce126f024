package subscription_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
	"github.com/revgate/projector/subscription/sourcetest"
)

// EventStoreImage is the EventStoreDB image of the Docker tier.
const EventStoreImage = "eventstore/eventstore:24.10"

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
	c, err := testcontainers.Run(ctx, EventStoreImage,
		testcontainers.WithExposedPorts("2113/tcp"),
		testcontainers.WithEnv(map[string]string{
			"EVENTSTORE_INSECURE":                  "true",
			"EVENTSTORE_MEM_DB":                    "true",
			"EVENTSTORE_RUN_PROJECTIONS":           "None",
			"EVENTSTORE_ENABLE_ATOM_PUB_OVER_HTTP": "true",
		}),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/health/live").WithPort("2113/tcp").WithStartupTimeout(3*time.Minute)),
	)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("start %s: %v", EventStoreImage, err)
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
	cl, err := c.ESDB()
	if err != nil {
		t.Fatal(err)
	}
	store := mongostore.New(db)
	g := sourcetest.NewCarts(client{c})
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
		settings := esdb.SubscriptionSettingsDefault()
		settings.StartFrom = esdb.Start{}
		settings.ConsumerStrategyName = esdb.ConsumerStrategyRoundRobin
		group := "details-" + g.Prefix
		if err := cl.CreatePersistentSubscriptionToAll(ctx, group, esdb.PersistentAllSubscriptionOptions{
			Settings: &settings, StartFrom: esdb.Start{},
			Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{prefix}},
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
