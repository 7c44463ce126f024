package subscription

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
)

// Client is a connection to EventStoreDB or KurrentDB that outlives an
// outage. The official clients close themselves for good once their
// discovery attempts fail (about a second of an unreachable server with the
// defaults); Client then builds a new one on the next call, so a projector
// that loses its server picks up again when it is back. An adapter
// package's Dial returns one: package [github.com/revgate/projector/kurrent]
// on KurrentDB-Client-Go, package
// [github.com/revgate/projector/subscription/esdbv4] on EventStore-Client-Go
// v4.
type Client struct {
	driver      neutral.Driver
	at          neutral.Endpoint
	pkg, server string
	uri         string // for messages, without credentials
	conn        *neutral.Conn[neutral.Session]
}

// NewClient is the adapters' door: it returns a client of the server at
// uri (at, as the adapter read it) through d, an official client's driver.
// It does not connect. A projector's user calls an adapter's Dial instead.
func NewClient(uri string, at neutral.Endpoint, d neutral.Driver) *Client {
	pkg, server := at.Package, at.Server
	c := &Client{driver: d, at: at, pkg: pkg, server: server, uri: neutral.Redact(uri)}
	c.conn = neutral.NewConn(neutral.ConnConfig[neutral.Session]{
		Package: pkg, Server: server, URI: c.uri,
		New:           d.Open,
		Close:         neutral.Session.Close,
		ClosedForGood: func(err error) bool { return d.Kind(err) == neutral.ErrClosed },
		Denied:        func(err error) bool { return d.Kind(err) == neutral.ErrDenied },
	})
	return c
}

// Rebuilt returns how many times the official client was replaced after it
// closed itself or stopped answering.
func (c *Client) Rebuilt() int { return c.conn.Rebuilt() }

func (c *Client) String() string { return c.uri }

// Address returns the host:port of a single-node connection string, and
// false for a cluster (gossip seeds, DNS discovery).
func (c *Client) Address() (string, bool) { return c.at.Address, c.at.Address != "" }

// TLS reports whether the client connects with TLS (tls=false turns it off).
func (c *Client) TLS() bool { return c.at.TLS }

// Close closes the official client.
func (c *Client) Close() error { return c.conn.Close() }

// do runs fn with the official client, bounded by ctx and by a hang limit
// (the client can block for ever after its discovery gave up; see
// [neutral.Call]).
func (c *Client) do(ctx context.Context, fn func(neutral.Session) error) error {
	return c.conn.Do(ctx, fn)
}

// call runs fn with the current official client, bounded by ctx and the hang
// limit.
func call[T any](ctx context.Context, c *Client, fn func(neutral.Session) (T, error)) (T, error) {
	return neutral.Call(ctx, c.conn, fn)
}

// is reports whether err, from the official client, is of kind k.
func (c *Client) is(err error, k neutral.ErrorKind) bool {
	return err != nil && c.driver.Kind(err) == k
}

// NewEvent is an event to append ([Client.Append]), with JSON data: its
// fields are ID (uuid.Nil: the client makes one), Type, Data and Metadata.
type NewEvent = neutral.NewEvent

// Expected revisions of [Client.Append] besides a revision.
const (
	NoStream    = neutral.NoStream    // the stream must not exist
	AnyRevision = neutral.AnyRevision // no check
)

// ErrWrongRevision: an append's expected revision was not the stream's.
var ErrWrongRevision = errors.New("wrong expected revision")

// Append appends events to stream if its last revision is expected
// ([NoStream], [AnyRevision], or a revision), and returns the commit
// position of the write. A stream at another revision is an error wrapping
// [ErrWrongRevision].
func (c *Client) Append(ctx context.Context, stream string, expected int64, events ...NewEvent) (uint64, error) {
	if expected < AnyRevision {
		return 0, fmt.Errorf("%s: append: bad expected revision %d", c.pkg, expected)
	}
	pos, err := call(ctx, c, func(s neutral.Session) (uint64, error) { return s.Append(ctx, stream, expected, events) })
	if c.is(err, neutral.ErrWrongRevision) {
		return 0, fmt.Errorf("%w: %w", ErrWrongRevision, err)
	}
	return pos, err
}

var _ projector.StreamReader = (*Client)(nil)

// FirstRevision implements [projector.StreamReader]: the revision of the
// first event a forward read of stream returns now (above 0 once the node
// truncated its start, by the stream's $maxCount, $maxAge or $tb, or after
// it was deleted and written again), or [projector.ErrStreamDeleted] when
// the read finds no event (deleted, tombstoned, truncated entirely).
func (c *Client) FirstRevision(ctx context.Context, stream string) (uint64, error) {
	// The record comes back as call's value: a call abandoned at ctx's end
	// finishes in the background and must not write to this frame.
	first, err := call(ctx, c, func(s neutral.Session) (*neutral.Resolved, error) {
		return firstRecord(s.ReadStream(ctx, stream, 0, 1))
	})
	if (err == nil && first == nil) || c.is(err, neutral.ErrNotFound) || c.is(err, neutral.ErrDeleted) {
		return 0, projector.ErrStreamDeleted
	}
	if err != nil {
		return 0, err
	}
	return first.Original().Revision, nil
}

// readRecords hands each record of read rs (opened with err) to each, until
// the read ends or each says there is no more to read (more false), and
// closes it.
func readRecords(rs neutral.Reader, err error, each func(*neutral.Resolved) (more bool, err error)) error {
	if err != nil {
		return err
	}
	defer rs.Close()
	for {
		re, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if more, err := each(re); !more || err != nil {
			return err
		}
	}
}

// firstRecord returns the first record of read rs (opened with err), nil
// when it has none, and closes it.
func firstRecord(rs neutral.Reader, err error) (first *neutral.Resolved, _ error) {
	err = readRecords(rs, err, func(re *neutral.Resolved) (bool, error) {
		first = re
		return false, nil
	})
	return first, err
}

var _ projector.StreamHistory = (*Client)(nil)

// ReadStream implements [projector.StreamHistory]: it reads stream forwards
// from revision from, handing each event to each, undecoded (its Data as
// stored, a nil Payload: [projector.Registry.Decode] gives it). A stream that was never
// written is the client's not-found error; a deleted or tombstoned one the
// client's error for it; both wrap [projector.ErrStreamDeleted].
func (c *Client) ReadStream(ctx context.Context, stream string, from uint64, each func(projector.Event) error) error {
	err := c.do(ctx, func(s neutral.Session) error {
		rs, err := s.ReadStream(ctx, stream, from, math.MaxInt64)
		return readRecords(rs, err, func(re *neutral.Resolved) (bool, error) {
			ev, err := c.envelope(re)
			if err != nil {
				return false, err
			}
			if err := each(ev); errors.Is(err, projector.ErrStopRead) {
				return false, nil
			} else if err != nil {
				return false, err
			}
			return true, nil
		})
	})
	switch {
	case c.is(err, neutral.ErrNotFound):
		return fmt.Errorf("%w: %w", neutral.ErrStreamNotFound, err)
	case c.is(err, neutral.ErrDeleted):
		return fmt.Errorf("%w: %w", projector.ErrStreamDeleted, err)
	}
	return err
}

// envelope returns the event the engine handles for one delivery.
func (c *Client) envelope(re *neutral.Resolved) (projector.Event, error) {
	if re == nil {
		return projector.Event{}, fmt.Errorf("%s: nil event", c.pkg)
	}
	ev, err := neutral.Envelope(re.Event, re.Link, re.Commit)
	if err != nil {
		return projector.Event{}, fmt.Errorf("%s: %w", c.pkg, err)
	}
	return ev, nil
}

// ScanAll reads $all forwards from after (the start when nil), at most max
// events, system events included, handing each one's checkpoint, stream and
// type to each until it returns false: what is behind a checkpoint, without
// the events' data.
func (c *Client) ScanAll(ctx context.Context, after *projector.Checkpoint, max int, each func(cp projector.Checkpoint, stream, eventType string) bool) error {
	return c.scanAll(ctx, after, max, func(r neutral.Record) bool { return each(r.Checkpoint, r.Stream, r.Type) })
}

// scanAll is [Client.ScanAll] in the records of [neutral.ScanAll].
func (c *Client) scanAll(ctx context.Context, after *projector.Checkpoint, max int, each func(neutral.Record) bool) error {
	return c.do(ctx, func(s neutral.Session) error {
		rs, err := s.ReadAll(ctx, after, false, uint64(max))
		return readRecords(rs, err, func(re *neutral.Resolved) (bool, error) {
			ev := re.Original()
			cp := projector.Checkpoint{Position: ev.Commit, Prepare: ev.Prepare, EventID: ev.ID.String()}
			return each(neutral.Record{Checkpoint: cp, Stream: ev.Stream, Type: ev.Type}), nil
		})
	})
}

// Head returns the commit position of the last event in $all (0: none).
func (c *Client) Head(ctx context.Context) (uint64, error) {
	// The position comes back as call's value: a call abandoned at ctx's
	// end finishes in the background and must not write to this frame.
	return call(ctx, c, func(s neutral.Session) (uint64, error) { return lastPosition(ctx, s) })
}

// ErrNoGroup: the persistent subscription group does not exist.
var ErrNoGroup = errors.New("no such group")

// Group returns what the server says of persistent subscription group on
// $all: its name as the server gives it, how many events it has parked,
// how many consumers are connected to it, and whether it feeds them live
// (it has read $all to its end); a group that does not exist is
// [ErrNoGroup].
func (c *Client) Group(ctx context.Context, group string) (neutral.GroupInfo, error) {
	got, err := call(ctx, c, func(s neutral.Session) (neutral.GroupInfo, error) { return s.GroupInfo(ctx, group) })
	if c.is(err, neutral.ErrNotFound) {
		return neutral.GroupInfo{}, ErrNoGroup
	}
	return got, err
}

// Groups lists the persistent subscription groups on $all.
func (c *Client) Groups(ctx context.Context) ([]string, error) {
	names, err := call(ctx, c, func(s neutral.Session) ([]string, error) { return s.ListGroups(ctx) })
	if c.is(err, neutral.ErrNotFound) {
		return nil, nil // no groups at all
	}
	return names, err
}

// ReplayParked has persistent subscription group on $all deliver its
// parked events again.
func (c *Client) ReplayParked(ctx context.Context, group string) error {
	return c.do(ctx, func(s neutral.Session) error { return s.ReplayParked(ctx, group) })
}
