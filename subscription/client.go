package subscription

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

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

	mu     sync.Mutex
	client *esdb.Client
	closed bool
}

// Dial parses an EventStoreDB connection string (esdb://host:port?tls=false,
// esdb+discover://..., as the official client documents) and returns a
// client. It does not connect: the first subscription does, and an
// unreachable server shows there, under the runner's reconnect policy.
func Dial(uri string) (*Client, error) {
	cfg, err := esdb.ParseConnectionString(uri)
	if err != nil {
		return nil, fmt.Errorf("subscription: EventStoreDB connection string %q: %w", Redact(uri), err)
	}
	return &Client{config: cfg, uri: Redact(uri)}, nil
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
		cl.Close()
		c.client = nil
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
