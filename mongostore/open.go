package mongostore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// defaultConnectTimeout bounds how long [Connect] waits for a server to answer.
const defaultConnectTimeout = 10 * time.Second

// Connect parses uri, connects and pings the server within timeout (0 means
// 10 seconds), so that a bad URI or an unreachable server is a
// clear error at start-up rather than a hang on the first write. The error
// names the hosts, never the credentials.
func Connect(ctx context.Context, uri string, timeout time.Duration) (*mongo.Client, error) {
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	cs, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	if len(cs.Hosts) == 1 && cs.Scheme == connstring.SchemeMongoDB {
		// A refused connection, or a host name that does not exist, is
		// known at once, not when the driver's server selection gives up.
		dctx, cancel := context.WithTimeout(ctx, timeout)
		conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", cs.Hosts[0])
		cancel()
		var sys *os.SyscallError
		var dns *net.DNSError
		switch {
		case errors.As(err, &sys):
			return nil, fmt.Errorf("mongostore: no MongoDB answered at %s: nothing listens there (%v)", cs.Hosts[0], sys.Err)
		case errors.As(err, &dns) && dns.IsNotFound:
			return nil, fmt.Errorf("mongostore: no MongoDB at %s: no such host (%v)", cs.Hosts[0], dns)
		}
		if conn != nil {
			conn.Close()
		}
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pctx, notMongo := context.WithCancelCause(pctx)
	defer notMongo(nil)
	opts := options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(timeout).
		// A handshake that gets no reply fails well before the ping's
		// timeout, for the ping to say so (handshakeSilent).
		SetConnectTimeout(timeout / 2)
	var last atomic.Int32 // how the last handshake failed (handshake*)
	if len(cs.Hosts) == 1 && cs.Scheme == connstring.SchemeMongoDB {
		watchWireErrors(opts, notMongo, &last)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("mongostore: connect to %s: %w", strings.Join(cs.Hosts, ","), err)
	}
	if err := client.Ping(pctx, nil); err != nil {
		// In the background: a connection the driver is still opening to a
		// server that does not answer holds Disconnect for up to another
		// timeout, which the caller would wait out after this one.
		go func() {
			dctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_ = client.Disconnect(dctx)
		}()
		if cause := context.Cause(pctx); errors.As(cause, new(errNotMongo)) {
			return nil, cause
		}
		if ctx.Err() != nil {
			// Stopped (the caller's context ended), not timed out.
			return nil, fmt.Errorf("mongostore: stopped while connecting to %s: %w", strings.Join(cs.Hosts, ","), ctx.Err())
		}
		hosts := strings.Join(cs.Hosts, ",")
		switch last.Load() {
		case handshakeClosed:
			return nil, fmt.Errorf("mongostore: no MongoDB answered at %s within %v: the server there closed the connection at each handshake "+
				"(a TLS port: a MongoDB that requires TLS needs tls=true in the URI; or a proxy whose MongoDB is not up yet): %w", hosts, timeout, err)
		case handshakeSilent:
			return nil, fmt.Errorf("mongostore: no MongoDB answered at %s within %v: the server there took the connection but did not answer the handshake "+
				"(is it the right port? a server of another protocol, such as HTTP, waits so; or a MongoDB too busy to answer): %w", hosts, timeout, err)
		}
		return nil, fmt.Errorf("mongostore: no MongoDB answered at %s within %v: %w", hosts, timeout, err)
	}
	return client, nil
}

// errNotMongo is a server that answered the MongoDB handshake as no
// MongoDB does: at, its address; why, how.
type errNotMongo struct{ at, why string }

func (e errNotMongo) Error() string {
	return fmt.Sprintf("mongostore: the server at %s does not answer as MongoDB (is it the right port?): %s", e.at, e.why)
}

// How a heartbeat's handshake fails (the driver's own words for it,
// x/mongo/driver/topology's errResponseTooLarge and parseWmSizeBytes, and
// its connection's read of a reply's header):
//   - a reply whose length, its first 4 bytes, is out of bounds: no
//     MongoDB sends one, and a server that speaks first in a binary
//     protocol does (an HTTP/2 or gRPC server: an event store without
//     TLS, its port given as MongoDB's). Said at once (errNotMongo);
//   - the server ends the connection instead of replying (handshakeClosed).
//     A TLS server does, to a client that does not begin with TLS, but so
//     does a proxy whose MongoDB is not up yet, or a MongoDB at its limit
//     of connections: the driver goes on trying until the timeout, which
//     then says so;
//   - no reply within the connect timeout (handshakeSilent): a server that
//     waits for a request it can read (HTTP/1), or a MongoDB too busy.
const (
	wireTooLarge   = "length of read message too large"
	wireMalformed  = "malformed message length"
	wireClosed     = "connection closed unexpectedly by the other side"
	wireHeaderRead = "incomplete read of message header"
)

// How the last handshake failed, as watchWireErrors notes it.
const (
	handshakeOther int32 = iota
	handshakeClosed
	handshakeSilent
)

// watchWireErrors has the client of opts end its first ping with
// errNotMongo (by cancel) at the first heartbeat whose reply no MongoDB
// sends, and notes in last how each heartbeat's handshake failed (or
// that one succeeded); later calls of cancel do nothing.
func watchWireErrors(opts *options.ClientOptions, cancel context.CancelCauseFunc, last *atomic.Int32) {
	opts.SetServerMonitor(&event.ServerMonitor{
		ServerHeartbeatSucceeded: func(*event.ServerHeartbeatSucceededEvent) { last.Store(handshakeOther) },
		ServerHeartbeatFailed: func(e *event.ServerHeartbeatFailedEvent) {
			if e.Failure == nil {
				return
			}
			msg := e.Failure.Error()
			switch {
			case strings.Contains(msg, wireTooLarge), strings.Contains(msg, wireMalformed):
				// "host:port[-2]": the server's address, and the connection's.
				at, _, _ := strings.Cut(e.ConnectionID, "[")
				cancel(errNotMongo{at, "its reply does not begin as a MongoDB message does"})
			case strings.Contains(msg, wireHeaderRead) && strings.Contains(msg, wireClosed):
				last.Store(handshakeClosed)
			case strings.Contains(msg, wireHeaderRead) && errors.Is(e.Failure, context.DeadlineExceeded):
				last.Store(handshakeSilent)
			default:
				last.Store(handshakeOther)
			}
		},
	})
}

// Open connects to uri (see [Connect]) and returns a store on database that
// owns the client: Close disconnects it.
func Open(ctx context.Context, uri, database string, timeout time.Duration, opts ...Option) (*Store, error) {
	client, err := Connect(ctx, uri, timeout)
	if err != nil {
		return nil, err
	}
	s := New(client.Database(database), opts...)
	s.client = client
	return s, nil
}

// CheckURI reports, without connecting, whether uri is a MongoDB connection
// string Connect can use: what a command line checks before it connects to
// anything. The error names no credentials.
func CheckURI(uri string) error {
	// A mongodb+srv:// string is resolved by DNS when parsed: its syntax is
	// checked on a mongodb:// copy, and the lookup left to Connect, with its
	// timeout (a DNS failure is no usage error).
	if rest, ok := cutPrefixFold(uri, connstring.SchemeMongoDBSRV+"://"); ok {
		uri = connstring.SchemeMongoDB + "://" + rest
	}
	_, err := parseURI(uri)
	return err
}

// cutPrefixFold is strings.CutPrefix, ignoring case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

func parseURI(uri string) (*connstring.ConnString, error) {
	cs, err := connstring.ParseAndValidate(uri)
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns):
		// A mongodb+srv:// host is looked up as the string is parsed: a
		// lookup that fails is no fault of the string's.
		return nil, fmt.Errorf("mongostore: the MongoDB URI's SRV host does not resolve: %w", redact(err, uri))
	case err != nil:
		return nil, fmt.Errorf("mongostore: invalid MongoDB URI: %w", redact(err, uri))
	}
	// The driver takes whatever follows the hosts' slash as the database
	// (the default for authentication): text pasted after the URI (", the
	// database x") would pass unseen. MongoDB refuses these characters in
	// a database name:
	// https://www.mongodb.com/docs/manual/reference/limits/#naming-restrictions
	if i := strings.IndexAny(cs.Database, "/\\. \"$\x00"); i >= 0 {
		return nil, fmt.Errorf("mongostore: invalid MongoDB URI: the database after the hosts, %q, has %q, which no database name has (is there text after the URI?)", cs.Database, cs.Database[i:i+1])
	}
	return cs, nil
}

// redact removes the URI's password from an error message, in case the parser
// quoted it.
func redact(err error, uri string) error {
	cs, perr := connstring.Parse(uri)
	if perr != nil || cs.Password == "" {
		return err
	}
	return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), cs.Password, "xxxxx"))
}
