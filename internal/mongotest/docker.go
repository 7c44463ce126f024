package mongotest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcmongo "github.com/testcontainers/testcontainers-go/modules/mongodb"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/internal/dbname"
)

// MongoImage is the MongoDB image the Docker tier runs.
const MongoImage = "mongo:7.0"

// DockerEngine returns nil when a Docker engine answers, or why not.
func DockerEngine() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	provider, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return err
	}
	defer provider.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return provider.Health(ctx)
}

// Docker starts a MongoDB container (a single-node replica set, so that
// transactions work) and returns a database on it; the container goes when
// the test ends. Without a Docker engine the test is skipped, with one line
// saying so.
func Docker(tb testing.TB) *mongo.Database {
	tb.Helper()
	if err := DockerEngine(); err != nil {
		tb.Skipf("no Docker engine reachable, skipping the MongoDB container tier: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := tcmongo.Run(ctx, MongoImage, tcmongo.WithReplicaSet("rs0"))
	tb.Cleanup(func() {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
	})
	if err != nil {
		tb.Fatalf("mongotest: start %s: %v", MongoImage, err)
	}
	uri, err := c.ConnectionString(ctx)
	if err != nil {
		tb.Fatalf("mongotest: %v", err)
	}
	sep := "/?"
	if strings.Contains(uri, "?") {
		sep = "&"
	} else if strings.HasSuffix(uri, "/") {
		sep = "?"
	}
	client, err := connect(uri + sep + "directConnection=true")
	if err != nil {
		tb.Fatalf("mongotest: connect to %s: %v", MongoImage, err)
	}
	tb.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client.Database(dbname.ForTest(tb.Name()))
}
