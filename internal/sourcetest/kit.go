// Package sourcetest is the acceptance suite of the event-store sources:
// [Run] runs, as subtests, the behaviours every source must have (a
// catch-up subscription to $all or to a stream, a consumer of a persistent
// subscription group), against the in-process EventStoreDB-protocol double
// of package esdbtest, through the client a [Kit] names. The tests of
// package subscription/esdbv4 run it on EventStore-Client-Go v4, those of
// package kurrent on KurrentDB-Client-Go; both hand [Sources] the client
// their Dial returned. (The double is built on KurrentDB-Client-Go's
// protocol code: a test binary that runs the suite on v4 links both
// clients, and is built as package esdbv4 says.)
//
// The read models go to a fresh database of internal/mongotest per
// subtest: a package running the suite calls mongotest.Main from its
// TestMain. The helpers that build the suite ([Carts], [Engine],
// [NewRunner], [Start]) are exported for the tests of each adapter
// that the suite does not hold (its Docker tier, say).
package sourcetest

import (
	"context"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// Kit is what the suite needs of one client.
type Kit struct {
	// Name says which client it is, in messages.
	Name string
	// Dial returns a client for uri: the URI of an esdbtest.Server, or one
	// derived from it. The suite closes it.
	Dial func(uri string) (Client, error)
}

// Client is one connection of the client under test, and the sources built
// on it.
type Client interface {
	Appender
	// StreamHistory reads streams, for the engine's hole checks and
	// stream folds (the source package's Client).
	projector.StreamHistory
	// All returns a catch-up source on $all, as the source package's NewAll.
	All(opts neutral.AllOptions) (AllSource, error)
	// Stream returns a catch-up source on one stream, as NewStream.
	Stream(stream string, opts neutral.StreamOptions) (projector.OrderedSource, error)
	// Persistent returns a consumer of group on $all, as NewPersistent, that
	// creates the group when it subscribes if it does not exist: RoundRobin,
	// from the start of $all, filtered to group.StreamPrefixes.
	Persistent(group Group) (PersistentSource, error)
	// Group returns what the server says of group on $all (the source
	// package's Client.Group).
	Group(ctx context.Context, group string) (neutral.GroupInfo, error)
	// Rebuilt says how many times the client replaced its official client
	// (the source package's Client.Rebuilt).
	Rebuilt() int
	Close() error
}

// Appender appends events through a client.
type Appender interface {
	// Append appends events to stream if its last revision is expected
	// ([NoStream], [AnyRevision], or a revision), and returns the commit
	// position of the write.
	Append(ctx context.Context, stream string, expected int64, events ...Event) (uint64, error)
}

// Expected revisions of an append besides a revision.
const (
	NoStream    = neutral.NoStream    // the stream must not exist
	AnyRevision = neutral.AnyRevision // no check
)

// Event is an event to append, with JSON data.
type Event = neutral.NewEvent

// AllSource is what a catch-up source on $all is: ordered, able to say
// whether it filters by event type, and anchored to its log.
type AllSource interface {
	projector.OrderedSource
	projector.TypeFilteringSource
	projector.AnchoredSource
}

// PersistentSource is what a consumer of a persistent subscription group
// is: a source that keeps counts and the documents it left blocked.
type PersistentSource interface {
	projector.Source
	Stats() neutral.PersistentStats
	Blocked() []string
}

// Group describes a persistent subscription group on $all.
type Group struct {
	Name string
	// StreamPrefixes filter the group's events by stream name.
	StreamPrefixes []string
	// ResolveLinks makes the group deliver the events links point to.
	ResolveLinks bool
	// BufferSize is the consumer's (0: the source's default).
	BufferSize int
}

// Sources returns c, a client an adapter's Dial returned, as the suite uses
// it: its sources are package subscription's, its appends the client's.
func Sources(c *subscription.Client) Client { return sources{c} }

// sources is a [subscription.Client] as the suite uses it.
type sources struct{ *subscription.Client }

func (c sources) All(o neutral.AllOptions) (AllSource, error) {
	src, err := subscription.NewAll(c.Client, o)
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (c sources) Stream(stream string, o neutral.StreamOptions) (projector.OrderedSource, error) {
	src, err := subscription.NewStream(c.Client, stream, o)
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (c sources) Persistent(g Group) (PersistentSource, error) {
	src, err := subscription.NewPersistent(c.Client, subscription.PersistentOptions{
		Stream: subscription.AllStreams, Group: g.Name, BufferSize: g.BufferSize,
		Create: &subscription.GroupSettings{
			Strategy: subscription.RoundRobin, ResolveLinks: g.ResolveLinks, FromStart: true,
			Filter: subscription.AllOptions{StreamPrefixes: g.StreamPrefixes},
		},
	})
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (c sources) Append(ctx context.Context, stream string, expected int64, events ...Event) (uint64, error) {
	return c.Client.Append(ctx, stream, expected, events...)
}
