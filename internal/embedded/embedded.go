// Package embedded runs FerretDB, a MongoDB wire-protocol server, inside the
// projector's process, so that the projector and its tests work where no
// MongoDB is installed. Data lives in SQLite files under a directory (kept
// across runs) or in a PostgreSQL database.
//
// FerretDB is not MongoDB: it has no transactions or change streams and its
// updates are much slower. It is the zero-setup default, not a production
// store.
//
// On SQLite the server runs SQLite in WAL mode with synchronous(normal): a
// commit does not wait for the disk. A process crash loses nothing; a power
// loss may lose the last commits, in their order, so that a checkpoint
// written after the documents it covers is never kept without them.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/FerretDB/FerretDB/ferretdb"
	"github.com/gofrs/flock"
)

// Config says where the embedded server keeps its data and listens.
type Config struct {
	// Dir holds the SQLite files; created if missing. Ignored with PostgresURL.
	Dir string
	// PostgresURL, if set, selects FerretDB's PostgreSQL backend on that
	// database. Give it a pool large enough for bulk writes
	// (pool_max_conns=200): FerretDB holds a connection per statement.
	PostgresURL string
	// Addr is the TCP address to listen on; default 127.0.0.1:0 (any free port).
	Addr string
	// Logger receives FerretDB's own logs; default: none.
	Logger *slog.Logger
}

// Server is a running embedded FerretDB.
type Server struct {
	f      *ferretdb.FerretDB
	uri    string
	cancel context.CancelFunc
	done   chan struct{}
	desc   string
	lock   *flock.Flock // the data dir's, held while the server runs
	// indexed waits for the indexing of new collections to stop (SQLite;
	// idindex.go); nil when none runs.
	indexed func()
}

// lockFile is the file in a data dir that the process serving it holds a
// lock on, with its pid in it, and the connection string of its server
// once it listens.
const lockFile = "projector.lock"

// ErrDirInUse: another process serves the data dir.
var ErrDirInUse = errors.New("data dir in use")

// InUseError is the error of a data dir another process serves: it wraps
// [ErrDirInUse] and says which process, and where its server listens.
type InUseError struct {
	Dir, Lock string
	// PID is the serving process's (0: unknown); URI its server's
	// connection string ("": not known yet).
	PID int
	URI string
}

func (e *InUseError) Error() string {
	holder, at, use := "another process", "", "point this one at its server with --mongo"
	if e.PID > 0 {
		holder = fmt.Sprintf("process %d", e.PID)
	}
	if e.URI != "" {
		at, use = " at "+e.URI, use+" "+e.URI
	}
	return fmt.Sprintf("embedded: %v: %s serves %s%s (its lock is %s): stop it, or %s", ErrDirInUse, holder, e.Dir, at, e.Lock, use)
}

func (e *InUseError) Unwrap() error { return ErrDirInUse }

// ServedAt is the connection string of the server of the process that
// serves the data dir ("" when it has not said).
func (e *InUseError) ServedAt() string { return e.URI }

// lockDir takes the lock of dir, or says which process holds it: two
// servers on one set of SQLite files would corrupt each other's view.
func lockDir(dir string) (*flock.Flock, error) {
	path := filepath.Join(dir, lockFile)
	l := flock.New(path)
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("embedded: lock %s: %w", path, err)
	}
	if !ok {
		e := &InUseError{Dir: dir, Lock: path}
		if b, err := os.ReadFile(path); err == nil {
			// Lines, each ended by a newline: one being written is not
			// read.
			lines := strings.Split(string(b), "\n")
			e.PID, _ = strconv.Atoi(lines[0])
			if len(lines) > 2 && strings.HasPrefix(lines[1], "mongodb://") {
				e.URI = lines[1]
			}
		}
		return nil, e
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		l.Unlock()
		return nil, fmt.Errorf("embedded: lock %s: %w", path, err)
	}
	return l, nil
}

// Start starts the server; Close stops it.
func Start(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	fc := &ferretdb.Config{Listener: ferretdb.ListenerConfig{TCP: cfg.Addr}, Logger: cfg.Logger}
	s := &Server{}
	sqliteDir := "" // the SQLite backend's, if it is that
	var indexed map[string]bool
	switch {
	case cfg.PostgresURL != "":
		fc.Handler, fc.PostgreSQLURL = "postgresql", cfg.PostgresURL
		s.desc = "FerretDB (embedded) on PostgreSQL"
		if err := pgIndexByID(context.Background(), cfg.PostgresURL); err != nil {
			cfg.Logger.Warn("embedded: FerretDB's lookups by _id read whole tables: indexing them failed", "err", err)
		}
	case cfg.Dir != "":
		dir, err := s.openDir(cfg.Dir)
		if err != nil {
			return nil, err
		}
		// In-memory SQLite hangs FerretDB's updates; files work.
		fc.Handler, fc.SQLiteURL = "sqlite", "file:"+dir+"/?_pragma=synchronous(normal)"
		s.desc = "FerretDB (embedded) on SQLite in " + dir
		sqliteDir = dir
		indexed = indexDir(context.Background(), dir, cfg.Logger)
	default:
		return nil, errors.New("embedded: set a data dir or a PostgreSQL URL")
	}
	// A port in use is found before FerretDB starts: its New, failing to
	// listen, leaves its storage backend open (under -race, FerretDB then
	// panics in a finalizer about it).
	if _, port, err := net.SplitHostPort(cfg.Addr); err == nil && port != "0" {
		probe, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			s.unlock()
			return nil, fmt.Errorf("embedded: start FerretDB: listen on %s: %w", cfg.Addr, err)
		}
		probe.Close()
	}
	f, err := ferretdb.New(fc)
	if err != nil {
		s.unlock()
		return nil, fmt.Errorf("embedded: start FerretDB: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.f, s.cancel, s.done = f, cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		if err := f.Run(ctx); err != nil {
			cfg.Logger.Error("embedded FerretDB stopped", "err", err)
		}
	}()
	s.uri = f.MongoDBURI() // waits for the listener
	if sqliteDir != "" {
		wait, err := startIndexing(ctx, sqliteDir, s.uri, indexed, cfg.Logger)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("embedded: index _id lookups: %w", err)
		}
		s.indexed = wait
	}
	if s.lock != nil {
		// Another process that finds the dir in use can say where its
		// server is, and a read-only command can use it. Written over
		// the pid's line, not truncated, so that a reader never finds it
		// empty.
		if f, err := os.OpenFile(s.lock.Path(), os.O_WRONLY, 0); err == nil {
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+s.uri+"\n"), 0)
			_ = f.Close()
		}
	}
	return s, nil
}

// openDir makes the data dir as the SQLite backend needs it and takes its
// lock, and returns its absolute path.
func (s *Server) openDir(given string) (string, error) {
	dir, err := filepath.Abs(given)
	if err != nil {
		return "", fmt.Errorf("embedded: data dir %q: %w", given, err)
	}
	if strings.ContainsAny(dir, "#?%") {
		// FerretDB names its SQLite files by a file: URI of the path as
		// it is, where these would start a fragment or a query, or an
		// escape.
		return "", fmt.Errorf("embedded: data dir %q: the SQLite backend cannot open a path with '#', '?' or '%%' in it; choose another", dir)
	}
	if err := writable(dir); err != nil {
		return "", err
	}
	if s.lock, err = lockDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// writable makes dir and checks that files can be created in it.
func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("embedded: data dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return fmt.Errorf("embedded: data dir %s is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// URI is the MongoDB connection string of the server.
func (s *Server) URI() string { return s.uri }

// String describes the server and where its data is.
func (s *Server) String() string { return s.desc }

// Close stops the server and waits for it, then lets go of its data dir.
func (s *Server) Close() {
	s.cancel()
	if s.indexed != nil {
		s.indexed()
	}
	<-s.done
	s.unlock()
}

func (s *Server) unlock() {
	if s.lock != nil {
		s.lock.Unlock()
	}
}
