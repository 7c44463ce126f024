package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// servers are the connection flags every built-in command shares.
type servers struct {
	esdb, mongo, database, dataDir string
	timeout                        time.Duration
	dial                           dialFunc // Config.Dial
}

// register declares the connection flags of x's command on fs; esdbHelp
// says what the command needs EventStoreDB for ("" leaves --esdb out).
func (s *servers) register(fs *flag.FlagSet, x *cli, esdbHelp string) {
	s.dial = x.Dial
	embedded := x.Embedded != nil
	if esdbHelp != "" {
		fs.StringVar(&s.esdb, "esdb", "", esdbHelp)
	}
	if embedded {
		fs.StringVar(&s.mongo, "mongo", "", "MongoDB URI; empty starts the embedded Mongo-wire server with its data under --data-dir")
		fs.StringVar(&s.dataDir, "data-dir", defaultDataDir, "data of the embedded Mongo-wire server (kept across runs)")
	} else {
		fs.StringVar(&s.mongo, "mongo", "", "MongoDB URI, e.g. mongodb://localhost:27017/?directConnection=true (required)")
	}
	fs.StringVar(&s.database, "database", "projector", "database of the read models and checkpoints")
	fs.DurationVar(&s.timeout, "connect-timeout", 10*time.Second, "how long to wait for each server to answer at start")
}

// check reports flags that cannot work, before any I/O.
func (s *servers) check(inv Invocation, needESDB, embedded bool) error {
	switch {
	case s.timeout <= 0:
		return usageError("--connect-timeout must be > 0, got %v", s.timeout)
	case needESDB && s.esdb == "":
		return usageError("--esdb (or %sESDB) is required: the event store to read, e.g. esdb://localhost:2113?tls=false or kurrentdb://localhost:2113?tls=false", inv.EnvPrefix)
	case s.mongo == "" && !embedded:
		return usageError("--mongo (or %sMONGO) is required: this binary has no embedded Mongo-wire server", inv.EnvPrefix)
	case s.database == "" || len(s.database) >= 64 || strings.ContainsAny(s.database, "/\\. \"$\x00"):
		return usageError("--database %q: MongoDB takes a database name of 1 to 63 bytes without / \\ . \" $ or a space", s.database)
	}
	// The connection strings are parsed now, without connecting: one that
	// cannot be is a usage error.
	if s.esdb != "" {
		c, err := openEventStore(s.dial, s.esdb, nil)
		if err != nil {
			return usageError("--esdb: %v", err)
		}
		c.Close()
	}
	if s.mongo != "" {
		if err := mongostore.CheckURI(s.mongo); err != nil {
			return usageError("--mongo: %v", err)
		}
	}
	return nil
}

// openStore opens the read models' database.
func (x *cli) openStore(ctx context.Context, s servers, logger *slog.Logger) (*Store, error) {
	return OpenStore(ctx, StoreOptions{MongoURI: s.mongo, DataDir: s.dataDir, Database: s.database, Timeout: s.timeout,
		Embedded: x.Embedded, Logger: logger})
}

// defaultDataDir is --data-dir's default.
const defaultDataDir = "projector-data"

// openStoreToRead opens the read models' database for a command that only
// reads it (status): a data dir another process serves (a run on the
// embedded server) is read through that process's server, which its lock
// names, rather than refused.
func (x *cli) openStoreToRead(ctx context.Context, s servers, stderr io.Writer) (*Store, error) {
	if s.mongo == "" && s.dataDir != defaultDataDir {
		// Reading must not make one: a mistyped --data-dir would read as a
		// projector that has not started. (The default, before the first
		// run, is made and read as not started, as a monitor expects.)
		if _, err := os.Stat(s.dataDir); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("--data-dir %s: no such directory: nothing has run on the embedded server there (a typo? or give --mongo)", s.dataDir)
		}
	}
	store, err := x.openStore(ctx, s, nil)
	var served interface{ ServedAt() string }
	if s.mongo == "" && errors.As(err, &served) && served.ServedAt() != "" {
		fmt.Fprintf(stderr, "%s is served by another process: reading it through its server at %s\n", s.dataDir, served.ServedAt())
		s.mongo = served.ServedAt()
		return x.openStore(ctx, s, nil)
	}
	return store, err
}

// dial returns a client of the event store at s.esdb (through
// Config.Dial; see openEventStore) that has answered within the connect
// timeout.
func dial(ctx context.Context, s servers, logger *slog.Logger) (eventStore, error) {
	client, err := openEventStore(s.dial, s.esdb, logger)
	if err != nil {
		return nil, err
	}
	if err := probeESDB(ctx, client, s.timeout); err != nil {
		closeAbandoned(client)
		return nil, err
	}
	return client, nil
}

// closeAbandoned closes c, whose probe failed, without waiting: the call
// the probe gave up on may run on in the official client for seconds past
// the connect timeout (a port that accepts and never answers), and the
// client's Close waits for it. It is closed once that call returns.
func closeAbandoned(c eventStore) {
	go func() { _ = c.Close() }()
}

// probeESDB makes sure the EventStoreDB at c answers, within timeout, and
// says in one line what to do when it does not: nothing listens there (at
// once, not after the client's discovery gives up), the server does not
// speak TLS while the connection string asks for it, or it does not answer.
func probeESDB(parent context.Context, c eventStore, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	if err := probeESDBWithin(ctx, c, timeout); err != nil && parent.Err() != nil {
		// Stopped (a signal), not timed out: the command stops as asked.
		return fmt.Errorf("EventStoreDB at %s: stopped while connecting: %w", c, parent.Err())
	} else if err != nil {
		return err
	}
	return nil
}

// probeESDBWithin is probeESDB within ctx's deadline of timeout.
func probeESDBWithin(ctx context.Context, c eventStore, timeout time.Duration) error {
	if addr, single := c.Address(); single {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("EventStoreDB at %s: nothing answers at %s (%v): is the server running, and is it the right address?", c, addr, dialError(err))
		}
		conn.Close()
	}
	_, err := c.Head(ctx)
	switch {
	case err == nil:
		return nil
	case c.TLS() && strings.Contains(err.Error(), "first record does not look like a TLS handshake"):
		return fmt.Errorf("EventStoreDB at %s does not speak TLS: add ?tls=false to the connection string (for an insecure server), or give the server its certificate", c)
	}
	if ctx.Err() == nil {
		// Refused before the time was up: something answers there, and not
		// as EventStoreDB does.
		return fmt.Errorf("EventStoreDB at %s: the server there does not answer as EventStoreDB (is it the right port?): %w", c, err)
	}
	return fmt.Errorf("EventStoreDB at %s does not answer within %v: %w", c, timeout, err)
}

// dialError is the gist of a failed TCP dial: "connection refused".
func dialError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			return sys.Err
		}
		return op.Err
	}
	return err
}

// lagCap bounds how many events of $all are looked at behind a checkpoint.
const lagCap = 10000

// countAfter counts the events of $all after cp (from the start when cp is
// nil) that f reads, among the first lagCap events after it; more reports
// that there were more than lagCap to look at (the count is a lower bound).
func countAfter(ctx context.Context, c eventStore, cp *uint64, prepare uint64, f Filter) (n int, more bool, err error) {
	var from *projector.Checkpoint
	if cp != nil {
		from = &projector.Checkpoint{Position: *cp, Prepare: prepare}
	}
	scanned := 0
	err = c.ScanAll(ctx, from, lagCap+2, func(at projector.Checkpoint, stream, eventType string) bool {
		if from != nil && (at.Position < from.Position || at.Position == from.Position && (from.Prepare == 0 || at.Prepare <= from.Prepare)) {
			// Reading forwards from a position includes the event there;
			// the events of its append after it (the same commit position,
			// a later prepare one, when the checkpoint has one) are behind
			// it.
			return true
		}
		if scanned++; scanned > lagCap {
			more = true
			return false
		}
		if f.matches(stream, eventType) {
			n++
		}
		return true
	})
	return n, more, err
}
