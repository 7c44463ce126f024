// Package mongotest gives tests a fresh database on a real server that speaks
// the MongoDB wire protocol, started by the tests themselves:
//
//   - MONGO_URI set: that server (a real MongoDB, a replica set for the tests
//     that need transactions; or the FerretDB that scripts/with-postgres
//     --ferretdb starts for a whole run, out of the race detector's way);
//   - otherwise: FerretDB, embedded in the test process, on SQLite in a
//     temporary directory, or on PostgreSQL when PROJECTOR_TEST_POSTGRES names
//     a server (a URL such as postgres://postgres@127.0.0.1:5432/postgres; each
//     test process gets a database of its own there, dropped at the end).
//
// [Docker] starts a MongoDB container with testcontainers instead, and skips
// with one line where no Docker engine is reachable.
//
// A package using it calls [Main] from TestMain so that what it started is
// stopped and removed at the end.
package mongotest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	neturl "net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/internal/dbname"
	"github.com/revgate/projector/internal/embedded"
	"github.com/revgate/projector/mongostore"
)

// Environment variables the helpers read.
const (
	EnvMongoURI = "MONGO_URI"
	EnvPostgres = "PROJECTOR_TEST_POSTGRES"
	EnvVerbose  = "PROJECTOR_TEST_VERBOSE" // FerretDB's own logs to stderr
)

var (
	once    sync.Once
	shared  *server
	initErr error
	dbSeq   atomic.Int64
)

type server struct {
	name    string
	uri     string
	client  *mongo.Client
	cleanup []func()
}

// stop undoes what start did, last first.
func (s *server) stop() {
	if s.client != nil {
		_ = s.client.Disconnect(context.Background())
	}
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
}

// Main runs the tests and then stops the embedded server and removes its data.
// Call it from TestMain: os.Exit(mongotest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	return code
}

// Server names the server the tests run on, starting it if needed.
func Server(tb testing.TB) string {
	tb.Helper()
	return get(tb).name
}

// Database returns a new, empty database for the test on the shared server; it
// is dropped when the test ends.
func Database(tb testing.TB) *mongo.Database {
	tb.Helper()
	s := get(tb)
	db := s.client.Database(dbname.ForTest(tb.Name()))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.Drop(ctx)
	})
	return db
}

// ExampleDatabase returns a fresh database on the test server for an
// Example function, which has no testing.TB; it panics when there is no
// server.
func ExampleDatabase(name string) *mongo.Database {
	once.Do(func() { shared, initErr = start() })
	if initErr != nil {
		panic(fmt.Sprintf("mongotest: %v", initErr))
	}
	db := shared.client.Database(fmt.Sprintf("x%d_%d_%s", os.Getpid()%100000, dbSeq.Add(1), name))
	_ = db.Drop(context.Background())
	return db
}

// URI returns the connection string of the server Database uses, for a
// process the test starts.
func URI(tb testing.TB) string {
	tb.Helper()
	return get(tb).uri
}

// Client returns the shared client, connected to the server Database uses.
func Client(tb testing.TB) *mongo.Client {
	tb.Helper()
	return get(tb).client
}

func get(tb testing.TB) *server {
	tb.Helper()
	once.Do(func() { shared, initErr = start() })
	if initErr != nil {
		tb.Fatalf("mongotest: %v", initErr)
	}
	return shared
}

func start() (*server, error) {
	if uri := os.Getenv(EnvMongoURI); uri != "" {
		client, err := connect(uri)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvMongoURI, uri, err)
		}
		// A real MongoDB, or the FerretDB scripts/with-postgres --ferretdb
		// started for the whole run: the tests that differ between the two
		// ask Server which it is.
		caps, err := mongostore.New(client.Database("admin")).Capabilities(context.Background())
		if err != nil {
			_ = client.Disconnect(context.Background())
			return nil, fmt.Errorf("%s=%s: %w", EnvMongoURI, uri, err)
		}
		return &server{name: caps.Server + " at " + EnvMongoURI, uri: uri, client: client}, nil
	}
	return startFerretDB()
}

func connect(uri string) (*mongo.Client, error) {
	return mongostore.Connect(context.Background(), uri, 30*time.Second)
}

func startFerretDB() (*server, error) {
	s := &server{}
	fail := func(err error) (*server, error) {
		s.stop()
		return nil, err
	}
	var cfg embedded.Config
	if os.Getenv(EnvVerbose) != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if pg := os.Getenv(EnvPostgres); pg != "" {
		url, drop, err := PostgresDatabase(pg)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", EnvPostgres, err))
		}
		s.cleanup = append(s.cleanup, drop)
		cfg.PostgresURL = url
	} else {
		dir, err := os.MkdirTemp("", "projector-ferretdb-")
		if err != nil {
			return fail(err)
		}
		s.cleanup = append(s.cleanup, func() { _ = os.RemoveAll(dir) })
		cfg.Dir = dir
	}
	srv, err := embedded.Start(cfg)
	if err != nil {
		return fail(err)
	}
	s.cleanup = append(s.cleanup, srv.Close)
	s.name, s.uri = srv.String(), srv.URI()
	client, err := connect(srv.URI())
	if err != nil {
		return fail(fmt.Errorf("connect to embedded FerretDB: %w", err))
	}
	s.client = client
	return s, nil
}

// PostgresDatabase creates a database of its own for this process on the
// PostgreSQL server at url and returns a URL to it for FerretDB, with a pool
// large enough for FerretDB's bulk writes (each statement of one command holds
// a connection until the command ends), and a func that drops it.
func PostgresDatabase(url string) (string, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(context.Background())
	name := fmt.Sprintf("projector_test_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	cfg := conn.Config()
	user := neturl.User(cfg.User)
	if cfg.Password != "" {
		user = neturl.UserPassword(cfg.User, cfg.Password)
	}
	dbURL := (&neturl.URL{
		Scheme:   "postgres",
		User:     user,
		Host:     net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))),
		Path:     "/" + name,
		RawQuery: "pool_max_conns=200",
	}).String()
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, url); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	}
	return dbURL, drop, nil
}
