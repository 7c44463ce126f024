package neutral

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/revgate/projector/projector"
)

// Driver is the part of the sources that depends on one official client:
// how it builds clients and what the errors they return mean. Package
// internal/official implements it once for both clients; each adapter
// package (kurrent on KurrentDB-Client-Go, subscription/esdbv4 on
// EventStore-Client-Go v4) builds it in one small file, with the [Endpoint]
// it read of its connection string; package subscription holds everything
// else once, over it.
type Driver interface {
	// Open builds a client; it does not connect.
	Open() (Session, error)
	// Kind says what an error a client returned means ([KindOf]).
	Kind(err error) ErrorKind
}

// Endpoint is what the sources' messages say of an adapter and of the
// server its connection string names.
type Endpoint struct {
	// Package and Server name the adapter package and the server
	// ("kurrent", "KurrentDB").
	Package, Server string
	// Address is the host:port of a single-node connection string; "" for
	// a cluster (gossip seeds, DNS discovery).
	Address string
	// TLS: the client connects with TLS.
	TLS bool
}

// At returns e for a connection string whose node address is addr, unless
// it names a cluster, and whose client connects with TLS or not.
func (e Endpoint) At(addr string, cluster, tls bool) Endpoint {
	if !cluster {
		e.Address = addr
	}
	e.TLS = tls
	return e
}

// BadURI is the error of a connection string uri the client could not
// parse (err): one line, without the password.
func (e Endpoint) BadURI(uri string, err error) error {
	return fmt.Errorf("%s: %s connection string %q: %s", e.Package, e.Server, Redact(uri), Scrub(err.Error(), uri))
}

// KindOf classifies err, an error of an official client, by its code in
// kinds: the client's error type E carries the code C.
func KindOf[E interface {
	error
	Code() C
}, C comparable](err error, kinds map[C]ErrorKind) ErrorKind {
	var e E
	if !errors.As(err, &e) {
		return ErrOther
	}
	return kinds[e.Code()] // ErrOther when it has none
}

// ErrStreamNotFound wraps the error of a read of a stream that was never
// written ([ErrNotFound]), for the module's own callers (the cart's write
// side reads it as a new stream). It is also a
// [projector.ErrStreamDeleted]: the stream has no events to read.
var ErrStreamNotFound error = streamNotFound{}

type streamNotFound struct{}

func (streamNotFound) Error() string { return "stream not found" }

func (streamNotFound) Is(target error) bool { return target == projector.ErrStreamDeleted }

// ErrorKind is what an error of an official client means to the sources.
type ErrorKind int

// The kinds of errors the sources tell apart.
const (
	// ErrOther is any other error.
	ErrOther ErrorKind = iota
	// ErrClosed: the client has closed itself for good (its discovery gave
	// up).
	ErrClosed
	// ErrDenied: the server's ACLs refused the caller. (A failed
	// authentication is not one: a node answers so while it starts or
	// elects a leader too.)
	ErrDenied
	// ErrNotFound: the stream or group does not exist.
	ErrNotFound
	// ErrDeleted: the stream was deleted or tombstoned.
	ErrDeleted
	// ErrExists: the group already exists.
	ErrExists
	// ErrWrongRevision: an append's expected revision was not the
	// stream's.
	ErrWrongRevision
)

// Session is one client an adapter built. Reads return their records one
// by one; subscriptions end when their context does.
type Session interface {
	Close() error
	// ReadAll reads at most n records of $all: forwards from the position
	// of from (the start when nil), or backwards from the end.
	ReadAll(ctx context.Context, from *projector.Checkpoint, backwards bool, n uint64) (Reader, error)
	// ReadStream reads at most n events of stream forwards from revision
	// from.
	ReadStream(ctx context.Context, stream string, from, n uint64) (Reader, error)
	// SubscribeAll starts a catch-up subscription to $all.
	SubscribeAll(ctx context.Context, o AllSubscription) (Feed, error)
	// SubscribeStream starts a catch-up subscription to stream after
	// revision from (from its start when nil).
	SubscribeStream(ctx context.Context, stream string, from *uint64, resolveLinks bool) (Feed, error)
	// Append appends events to stream if its last revision is expected
	// (NoStream, AnyRevision, or a revision), and returns the commit
	// position of the write.
	Append(ctx context.Context, stream string, expected int64, events []NewEvent) (uint64, error)
	// CreateGroup creates persistent subscription group on stream (or
	// [AllStreams], filtered by filter) with settings s.
	CreateGroup(ctx context.Context, stream, group string, s GroupSettings, filter Filter) error
	// SubscribeGroup connects to group on stream (or [AllStreams]) as a
	// consumer with bufferSize events in flight.
	SubscribeGroup(ctx context.Context, stream, group string, bufferSize int) (GroupFeed, error)
	// GroupInfo returns what the server says of group on $all.
	GroupInfo(ctx context.Context, group string) (GroupInfo, error)
	// ListGroups lists the groups on $all.
	ListGroups(ctx context.Context) ([]string, error)
	// ReplayParked has group on $all deliver its parked events again.
	ReplayParked(ctx context.Context, group string) error
}

// Expected revisions of an append besides a revision.
const (
	NoStream    int64 = -1 // the stream must not exist
	AnyRevision int64 = -2 // no check
)

// NewEvent is an event to append, with JSON data.
type NewEvent struct {
	ID       uuid.UUID
	Type     string
	Data     []byte
	Metadata []byte
}

// Resolved is one event a client read or was delivered: the event, and the
// link it was read through, if any.
type Resolved struct {
	Event, Link *Recorded
	// Commit is the commit position the server sent with the delivery, if
	// any.
	Commit *uint64
	// Handle is the client's own value, which a [GroupFeed] acknowledges.
	Handle any
}

// Original returns the link the event was read through, or else the event.
func (r *Resolved) Original() *Recorded {
	if r.Link != nil {
		return r.Link
	}
	return r.Event
}

// Reader is an open read; Recv returns io.EOF after its last record.
type Reader interface {
	Recv() (*Resolved, error)
	Close() error
}

// AllSubscription is what a catch-up subscription to $all asks the server.
type AllSubscription struct {
	// From is where it starts, after (the start when nil).
	From               *projector.Checkpoint
	Filter             Filter
	ResolveLinks       bool
	MaxSearchWindow    int
	CheckpointInterval int
}

// Feed is an open catch-up subscription of a client.
type Feed interface {
	// Recv blocks for the next message; after Close it returns one that
	// says the subscription dropped.
	Recv() Notice
	Close() error
}

// Notice is one message of a catch-up subscription. At most one field is
// set; none is the server's FellBehind.
type Notice struct {
	// Dropped ends the subscription with the client's error.
	Dropped error
	// Event appeared.
	Event *Resolved
	// Checkpoint is the server's checkpoint of a filtered subscription to
	// $all (its commit and prepare positions).
	Checkpoint *projector.Checkpoint
	// CaughtUp: the subscription has reached the head of its log.
	CaughtUp bool
}

// GroupFeed is a client's open connection to a persistent subscription
// group, as [NewConsumer] takes it (without Envelope).
type GroupFeed interface {
	Recv() (event *Resolved, deliveries int, err error)
	Ack(*Resolved) error
	Nack(reason string, action Action, event *Resolved) error
}

// ConsumerStrategy is how a group shares its events among its consumers.
// Its values are the protocol's names, which both clients' ConsumerStrategy
// use, so a conversion is a type conversion.
type ConsumerStrategy string

// The strategies both clients can create.
const (
	RoundRobin       ConsumerStrategy = "RoundRobin"
	DispatchToSingle ConsumerStrategy = "DispatchToSingle"
	Pinned           ConsumerStrategy = "Pinned"
)

// GroupSettings are the settings a persistent subscription group is
// created with; the others are the client's defaults.
type GroupSettings struct {
	// Strategy shares the events among the consumers (default RoundRobin).
	Strategy ConsumerStrategy
	// MaxRetryCount is how many times the server delivers an event before
	// it parks it on its own (0: the client's default, 10).
	MaxRetryCount int
	// ResolveLinks delivers the events that links point to.
	ResolveLinks bool
	// FromStart starts the group at the start of its stream; otherwise at
	// its end, as the clients do.
	FromStart bool
	// Filter, for a group on $all, is the server-side filter of its stream
	// or event-type fields (see [AllOptions.ServerFilter]).
	Filter AllOptions
}

// GroupInfo is what the server says of a persistent subscription group.
type GroupInfo struct {
	// Name is the group's name as the server gives it.
	Name string
	// Parked is how many events the group has parked.
	Parked int64
	// Consumers is how many consumers are connected to it.
	Consumers int
	// Live: the server has read the group's source to its end and feeds
	// its consumers as events are written (its status says Live, not
	// Behind), with at most its buffer of events still to deliver.
	Live bool
}
