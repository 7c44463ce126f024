// Package e2e runs a projection end to end in a test, with no Docker: the
// EventStoreDB-protocol test double (package esdbtest) and an embedded
// MongoDB wire-protocol server start in the test's process, the events go in
// through the official client, and the projector's command line (package
// app) runs there too, as your main would run it.
//
//	servers := e2e.StartServers(t, e2e.Options{})
//	db := servers.Database(t)
//	events := servers.Append(t, registry, "loan/1", opened, returned)
//	cmd := e2e.StartCommand(t, config(), "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
//	cmd.WaitCheckpoint(t, db, "loans", servers.Head())
//	cmd.Stop(t)
//	projectortest.CheckDocument(ctx, mongostore.New(db), loans, "1", events)
//
// The test double is a test double of the protocol over an in-memory log,
// not a database; package esdbtest says what it does as a real node does.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/dbname"
	"github.com/revgate/projector/internal/embedded"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// Servers are what an end-to-end test of a projection runs against, inside
// the test's process and without Docker: the EventStoreDB-protocol test
// double of package esdbtest (a test double of the protocol over an
// in-memory log, driven through the official client; not a database) and an
// embedded MongoDB wire-protocol server (FerretDB on SQLite in the test's
// temporary directory), or the MongoDB named by [Options.MongoURI].
// Point the projector at them with [Servers.ESDBURI] and [Servers.MongoURI].
type Servers struct {
	// ESDB is the EventStoreDB-protocol test double: faults such as
	// DropSubscriptions and DuplicateDeliveries are its methods.
	ESDB     *esdbtest.Server
	client   *kurrentdb.Client
	reader   *subscription.Client // reads back what Append appended
	mongoURI string
	mongo    *mongo.Client
}

// Options configure [StartServers]. The zero value starts both
// servers in the process.
type Options struct {
	// MongoURI is a MongoDB to use instead of the embedded server (a real
	// one, where a test run has it: os.Getenv("MONGO_URI")).
	MongoURI string
	// Seed seeds the test double's duplicated deliveries, so that a run with
	// the same traffic duplicates the same events.
	Seed int64
}

// StartServers starts the servers for tb; they stop when tb ends. It fails
// tb when one cannot start.
func StartServers(tb testing.TB, o Options) *Servers {
	tb.Helper()
	es, err := esdbtest.Start(esdbtest.Options{Seed: o.Seed})
	if err != nil {
		tb.Fatalf("e2e: %v", err)
	}
	tb.Cleanup(es.Close)
	s := &Servers{ESDB: es, client: es.Client(tb), mongoURI: o.MongoURI}
	if s.reader, err = kurrent.Dial(es.URI(), nil); err != nil {
		tb.Fatalf("e2e: %v", err)
	}
	tb.Cleanup(func() { s.reader.Close() })
	if s.mongoURI == "" {
		// Not tb.TempDir(): its path holds the test's name, and a subtest's
		// "#01" is one the SQLite backend cannot open.
		dir, err := os.MkdirTemp("", "projector-e2e-")
		if err != nil {
			tb.Fatalf("e2e: %v", err)
		}
		tb.Cleanup(func() { os.RemoveAll(dir) })
		srv, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "ferretdb")})
		if err != nil {
			tb.Fatalf("e2e: %v", err)
		}
		tb.Cleanup(srv.Close)
		s.mongoURI = srv.URI()
	}
	if s.mongo, err = mongostore.Connect(context.Background(), s.mongoURI, 30*time.Second); err != nil {
		tb.Fatalf("e2e: %v", err)
	}
	tb.Cleanup(func() { s.mongo.Disconnect(context.Background()) })
	return s
}

// ESDBURI is the connection string of the EventStoreDB-protocol test double,
// for --esdb.
func (s *Servers) ESDBURI() string { return s.ESDB.URI() }

// MongoURI is the connection string of the Mongo-wire server, for --mongo.
func (s *Servers) MongoURI() string { return s.mongoURI }

// Client is an official client (KurrentDB-Client-Go's) connected to the
// test double.
func (s *Servers) Client() *kurrentdb.Client { return s.client }

// Database returns a new, empty database on the Mongo-wire server, dropped
// when tb ends: give its name to --database.
func (s *Servers) Database(tb testing.TB) *mongo.Database {
	tb.Helper()
	db := s.mongo.Database(dbname.ForTest(tb.Name()))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db.Drop(ctx)
	})
	return db
}

// Append appends payloads to stream through the official client, encoded
// with registry, and returns them as the engine receives them (ids, stream
// revisions, positions, times, decoded payloads): what a projection's fold
// is checked against. It fails tb on an error.
//
// A payload that is a [projector.Event] is an event as stored, in an older
// form maybe: its Type and Data (and Metadata, when it has some) are
// appended as they are, and it comes back decoded through the registry's
// upcasters ([projector.Upcast]), or undecoded when it does not decode or
// nobody registered its type: the way to test an upcaster end to end.
func (s *Servers) Append(tb testing.TB, registry *projector.Registry, stream string, payloads ...any) []projector.Event {
	tb.Helper()
	return s.AppendWithMetadata(tb, registry, stream, nil, payloads...)
}

// AppendWithMetadata is [Servers.Append] with the same metadata (JSON) on
// every event.
func (s *Servers) AppendWithMetadata(tb testing.TB, registry *projector.Registry, stream string, metadata []byte, payloads ...any) []projector.Event {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := make([]kurrentdb.EventData, len(payloads))
	stored := make([]bool, len(payloads))
	for i, p := range payloads {
		name, body, meta := "", []byte(nil), metadata
		if ev, ok := p.(projector.Event); ok {
			name, body, stored[i] = ev.Type, ev.Data, true
			if ev.Metadata != nil {
				meta = ev.Metadata
			}
		} else {
			var err error
			if name, body, err = registry.Encode(p); err != nil {
				tb.Fatalf("e2e: %v", err)
			}
		}
		data[i] = kurrentdb.EventData{EventID: uuid.New(), EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: body, Metadata: meta}
	}
	res, err := s.client.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{}, data...)
	if err != nil {
		tb.Fatalf("e2e: append to %s: %v", stream, err)
	}
	first := res.NextExpectedVersion + 1 - uint64(len(payloads))
	out := make([]projector.Event, 0, len(payloads))
	err = s.reader.ReadStream(ctx, stream, first, func(ev projector.Event) error {
		if out = append(out, ev); len(out) == len(payloads) {
			return projector.ErrStopRead
		}
		return nil
	})
	if err != nil || len(out) != len(payloads) {
		tb.Fatalf("e2e: read back %s: %d of %d events: %v", stream, len(out), len(payloads), err)
	}
	// Their positions first, then their payloads: an upcaster that reads
	// an event's position sees it as the engine does.
	if err := s.positionsInAll(ctx, out); err != nil {
		tb.Fatalf("e2e: the positions in $all of the events appended to %s: %v", stream, err)
	}
	for i, ev := range out {
		decoded, err := registry.Decode(ev)
		switch {
		case err == nil || stored[i]:
			out[i] = decoded // an event as stored stays undecoded when it does not decode
		default:
			tb.Fatalf("e2e: read back %s: %v", stream, err)
		}
	}
	return out
}

// positionsInAll sets the Position of each event of evs, just appended,
// to its position in $all, read backwards from the end: a read of a stream
// gives none (a node sends -1). It reads as many events as it appended, and
// twice as many each time others were appended since, so that its cost
// does not grow with the log.
func (s *Servers) positionsInAll(ctx context.Context, evs []projector.Event) error {
	at := make(map[string]int, len(evs)) // the events not found yet
	for i, ev := range evs {
		at[ev.ID] = i
	}
	for count := uint64(len(evs)); ; count *= 2 {
		read, err := s.lastInAll(ctx, count, func(id string, position uint64) {
			if i, ok := at[id]; ok {
				evs[i].Position = position
				delete(at, id)
			}
		})
		switch {
		case err != nil:
			return err
		case len(at) == 0:
			return nil
		case read < count:
			return fmt.Errorf("%d of the events are not in $all", len(at))
		}
	}
}

// lastInAll hands the id and position of each of the last count events of
// $all to each, the last first, and returns how many there were.
func (s *Servers) lastInAll(ctx context.Context, count uint64, each func(id string, position uint64)) (uint64, error) {
	rs, err := s.client.ReadAll(ctx, kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, count)
	if err != nil {
		return 0, err
	}
	defer rs.Close()
	var read uint64
	for {
		re, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return read, nil
		}
		if err != nil {
			return read, err
		}
		read++
		each(re.OriginalEvent().EventID.String(), re.OriginalEvent().Position.Commit)
	}
}

// Head is the commit position of the last event appended: where a caught-up
// projection's checkpoint is.
func (s *Servers) Head() uint64 { return s.ESDB.Head() }
