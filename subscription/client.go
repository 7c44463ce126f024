package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/internal/neutral"
	_ "github.com/revgate/projector/internal/neutral/coexist" // both clients in one binary
)

// Client is a connection to EventStoreDB that outlives an outage. The
// official client closes itself for good once its discovery attempts fail
// (about a second of an unreachable server with the defaults); Client then
// builds a new one on the next call, so a projector that loses its server
// picks up again when it is back.
type Client struct {
	config *esdb.Configuration
	uri    string // for messages, without credentials
	conn   *neutral.Conn[*esdb.Client]
}

// Rebuilt returns how many times the official client was replaced after it
// closed itself or stopped answering.
func (c *Client) Rebuilt() int { return c.conn.Rebuilt() }

// Dial parses an EventStoreDB connection string (esdb://host:port?tls=false,
// esdb+discover://..., as the official client documents) and returns a
// client. It does not connect: the first subscription does, and an
// unreachable server shows there, under the runner's reconnect policy. The
// official client's own log goes to logger (nil: discarded): its errors and
// warnings at warn level, the rest at debug.
func Dial(uri string, logger *slog.Logger) (*Client, error) {
	cfg, err := esdb.ParseConnectionString(uri)
	if err != nil {
		return nil, fmt.Errorf("subscription: EventStoreDB connection string %q: %s", Redact(uri), neutral.Scrub(err.Error(), uri))
	}
	cfg.Logger = neutral.ClientLog(neutral.OrDiscard(logger).With("component", "esdb-client"))
	c := &Client{config: cfg, uri: Redact(uri)}
	c.conn = neutral.NewConn(neutral.ConnConfig[*esdb.Client]{
		Package: "subscription", Server: "EventStoreDB", URI: c.uri,
		New:           func() (*esdb.Client, error) { return esdb.NewClient(cfg) },
		Close:         (*esdb.Client).Close,
		ClosedForGood: connectionClosed,
		Denied:        denied,
	})
	return c, nil
}

// connectionClosed reports whether err says that the official client has
// closed itself.
func connectionClosed(err error) bool {
	var e *esdb.Error
	return errors.As(err, &e) && e.Code() == esdb.ErrorCodeConnectionClosed
}

// denied reports whether err says that the server's ACLs refused the
// caller. (ErrorCodeUnauthenticated is retried: a node answers it while it
// starts or elects a leader as well as for wrong credentials.)
func denied(err error) bool {
	var e *esdb.Error
	return errors.As(err, &e) && e.Code() == esdb.ErrorCodeAccessDenied
}

// Redact returns uri with its password replaced by "xxxxx" (any scheme; see
// [neutral.Redact]).
func Redact(uri string) string { return neutral.Redact(uri) }

func (c *Client) String() string { return c.uri }

// Address returns the host:port of a single-node connection string, and
// false for a cluster (gossip seeds, DNS discovery).
func (c *Client) Address() (string, bool) {
	if c.config.DnsDiscover || len(c.config.GossipSeeds) > 0 || c.config.Address == "" {
		return "", false
	}
	return c.config.Address, true
}

// TLS reports whether the client connects with TLS (tls=false turns it off).
func (c *Client) TLS() bool { return !c.config.DisableTLS }

// ESDB returns the official client, building it if there is none or the last
// one closed itself.
func (c *Client) ESDB() (*esdb.Client, error) { return c.conn.Client() }

// Close closes the official client.
func (c *Client) Close() error { return c.conn.Close() }

// Do runs fn with the official client, bounded by ctx and by a hang limit
// (the client can block for ever after its discovery gave up; see
// [neutral.Call]).
func (c *Client) Do(ctx context.Context, fn func(*esdb.Client) error) error {
	return c.conn.Do(ctx, fn)
}

// call runs fn with the current official client, bounded by ctx and the hang
// limit.
func call[T any](ctx context.Context, c *Client, fn func(*esdb.Client) (T, error)) (T, error) {
	return neutral.Call(ctx, c.conn, fn)
}
