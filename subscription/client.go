package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// Client is a connection to EventStoreDB that outlives an outage. The
// official client closes itself for good once its discovery attempts fail
// (about a second of an unreachable server with the defaults); Client then
// builds a new one on the next call, so a projector that loses its server
// picks up again when it is back.
type Client struct {
	config *esdb.Configuration
	uri    string // for messages, without credentials

	mu      sync.Mutex
	client  *esdb.Client
	closed  bool
	rebuilt int
}

// Rebuilt returns how many times the official client was replaced after it
// closed itself or stopped answering.
func (c *Client) Rebuilt() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rebuilt
}

// Dial parses an EventStoreDB connection string (esdb://host:port?tls=false,
// esdb+discover://..., as the official client documents) and returns a
// client. It does not connect: the first subscription does, and an
// unreachable server shows there, under the runner's reconnect policy. The
// official client's own log goes to logger (nil: discarded): its errors and
// warnings at warn level, the rest at debug.
func Dial(uri string, logger *slog.Logger) (*Client, error) {
	cfg, err := esdb.ParseConnectionString(uri)
	if err != nil {
		return nil, fmt.Errorf("subscription: EventStoreDB connection string %q: %s", Redact(uri), scrub(err.Error(), uri))
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = clientLog(logger.With("component", "esdb-client"))
	return &Client{config: cfg, uri: Redact(uri)}, nil
}

// clientLog adapts the official client's logging to slog.
func clientLog(l *slog.Logger) esdb.LoggingFunc {
	return func(level esdb.LogLevel, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		lv := slog.LevelDebug
		if (level == esdb.LogWarn || level == esdb.LogError) && !strings.Contains(msg, "context canceled") {
			lv = slog.LevelWarn
		}
		l.Log(context.Background(), lv, msg)
	}
}

// scrub removes the password of uri from msg.
func scrub(msg, uri string) string {
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return msg
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return msg
	}
	if _, pass, found := strings.Cut(rest[:at], ":"); found && pass != "" {
		msg = strings.ReplaceAll(msg, pass, "xxxxx")
	}
	return msg
}

// Redact returns uri with its password replaced by "xxxxx".
func Redact(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.User == nil {
		if at := strings.LastIndex(uri, "@"); at >= 0 {
			if scheme := strings.Index(uri, "://"); scheme >= 0 && scheme < at {
				return uri[:scheme+3] + "xxxxx" + uri[at:]
			}
		}
		return uri
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

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
func (c *Client) ESDB() (*esdb.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("subscription: client closed")
	}
	if c.client == nil {
		cl, err := esdb.NewClient(c.config)
		if err != nil {
			return nil, fmt.Errorf("subscription: EventStoreDB client for %s: %w", c.uri, err)
		}
		c.client = cl
	}
	return c.client, nil
}

// check looks at an error of a call made with cl: when it says the client
// has closed itself, the next [Client.ESDB] builds a new one.
func (c *Client) check(cl *esdb.Client, err error) error {
	var e *esdb.Error
	if err == nil || !errors.As(err, &e) || e.Code() != esdb.ErrorCodeConnectionClosed {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == cl {
		// Not closed: a call may still be queued on its channel, and closing
		// it would make that call panic. It has closed its connection.
		c.client = nil
		c.rebuilt++
	}
	return err
}

// Close closes the official client.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.client == nil {
		return nil
	}
	err := c.client.Close()
	c.client = nil
	return err
}

// Do runs fn with the official client, bounded by ctx and by a hang limit
// (the client can block for ever after its discovery gave up; see call).
func (c *Client) Do(ctx context.Context, fn func(*esdb.Client) error) error {
	_, err := call(ctx, c, func(cl *esdb.Client) (struct{}, error) { return struct{}{}, fn(cl) })
	return err
}

// hangLimit bounds one call into the official client. Its connection state
// machine stops for good when discovery fails, and a call that was already
// queued for it then blocks forever (esdb/impl.go, v4.2.0): after hangLimit
// the call is abandoned (its goroutine stays blocked), the client is replaced,
// and the caller gets an error it can retry.
var hangLimit = 30 * time.Second

// call runs fn with the current official client, bounded by ctx and hangLimit.
func call[T any](ctx context.Context, c *Client, fn func(*esdb.Client) (T, error)) (T, error) {
	var zero T
	cl, err := c.ESDB()
	if err != nil {
		return zero, err
	}
	done := make(chan result[T], 1)
	go func() {
		v, err := fn(cl)
		done <- result[T]{v, err}
	}()
	timer := time.NewTimer(hangLimit)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, c.check(cl, r.err)
	case <-ctx.Done():
		go closeLate(done)
		return zero, ctx.Err()
	case <-timer.C:
		go closeLate(done)
		c.replace(cl)
		return zero, fmt.Errorf("subscription: EventStoreDB client at %s did not answer within %v; replaced it", c.uri, hangLimit)
	}
}

type result[T any] struct {
	v   T
	err error
}

// closeLate closes what an abandoned call returns, if it ever returns.
func closeLate[T any](done <-chan result[T]) {
	r := <-done
	if c, ok := any(r.v).(interface{ Close() error }); ok && r.err == nil {
		c.Close()
	}
}

// replace drops cl so that the next call builds a new client.
func (c *Client) replace(cl *esdb.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == cl {
		// Left open on purpose: closing it would make the stuck call panic
		// (a send on its closed channel). Its state machine has stopped.
		c.client = nil
		c.rebuilt++
	}
}
