package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/revgate/projector/mongostore"
)

// EmbeddedMongo starts a MongoDB wire-protocol server inside the process,
// with its data under dir, its own logs to logger. A binary that sets
// [Config.Embedded] to one runs without --mongo; embedmongo.Start is one
// (FerretDB on SQLite), left out of binaries that do not import it.
type EmbeddedMongo func(dir string, logger *slog.Logger) (EmbeddedServer, error)

// EmbeddedServer is a running embedded server.
type EmbeddedServer interface {
	// URI is its MongoDB connection string.
	URI() string
	// String says what it is and where its data is.
	String() string
	// Close stops it.
	Close()
}

// StoreOptions say where a command's read models are.
type StoreOptions struct {
	// MongoURI is the MongoDB to use; empty starts Embedded with its data
	// under DataDir.
	MongoURI, DataDir string
	Database          string
	// Timeout bounds the first answer of the server (0: 10s).
	Timeout  time.Duration
	Embedded EmbeddedMongo
	// Logger receives the embedded server's logs (nil: none).
	Logger *slog.Logger
	// Options are passed to the store.
	Options []mongostore.Option
}

// Store is a store on the MongoDB a command was given, or on the embedded
// server it started for it.
type Store struct {
	*mongostore.Store
	// URI is the server's connection string.
	URI string
	// Embedded is the server started for the store; nil on a MongoDB given
	// by URI.
	Embedded EmbeddedServer
}

// errNoMongo: no --mongo, and no embedded server in the binary.
var errNoMongo = errors.New("--mongo (or PROJECTOR_MONGO) is required: this binary has no embedded Mongo-wire server")

// OpenStore opens database on the MongoDB at o.MongoURI, or, when it is
// empty, on the embedded server it starts. Close closes both.
func OpenStore(ctx context.Context, o StoreOptions) (*Store, error) {
	s := &Store{URI: o.MongoURI}
	if o.MongoURI == "" {
		if o.Embedded == nil {
			return nil, errNoMongo
		}
		logger := o.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		srv, err := o.Embedded(o.DataDir, logger)
		if err != nil {
			return nil, err
		}
		s.Embedded, s.URI = srv, srv.URI()
	}
	store, err := mongostore.Open(ctx, s.URI, o.Database, o.Timeout, o.Options...)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Store = store
	return s, nil
}

// Close closes the store, waiting closeStoreWait at most for its calls
// in flight, and the embedded server if it started one.
func (s *Store) Close() error {
	var errs []error
	if s.Store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeStoreWait)
		defer cancel()
		errs = append(errs, s.Store.Close(ctx))
	}
	if s.Embedded != nil {
		s.Embedded.Close()
	}
	return errors.Join(errs...)
}

// closeStoreWait bounds how long [Store.Close] waits for the store's calls
// in flight: a MongoDB that does not answer does not hold a command's end.
const closeStoreWait = 10 * time.Second

// Where says where the read models are, for messages: the embedded server
// and its data, or the MongoDB given (never its password).
func (s *Store) Where() string {
	if s.Embedded != nil {
		return s.Embedded.String()
	}
	return "MongoDB at --mongo"
}
