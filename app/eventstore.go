package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// eventStore is the event store the commands read, through the official
// client of the adapter the binary names in [Config.Dial] (see
// [openEventStore]).
type eventStore interface {
	projector.StreamHistory
	String() string
	// Address is the one address of a single-node connection string.
	Address() (string, bool)
	TLS() bool
	Close() error
	// ScanAll reads $all forwards from cp (the start when nil), to each
	// until it returns false or n records were read.
	ScanAll(ctx context.Context, cp *projector.Checkpoint, n int, each func(cp projector.Checkpoint, stream, eventType string) bool) error
	// Head is the commit position of the last event of $all (0: none).
	Head(ctx context.Context) (uint64, error)
	// all is a catch-up source on $all.
	all(opts neutral.AllOptions) (projector.Source, error)
	// group is a consumer of persistent subscription group name on $all,
	// filtered as opts, created if missing; a failed event is handed back
	// to be retried (block) or parked at once.
	group(name string, opts neutral.AllOptions, block bool, logger *slog.Logger) (groupSource, error)
	// groupInfo is what the server says of group (on $all): its name as the
	// server gives it, how many events it has parked, how many consumers
	// are connected.
	groupInfo(ctx context.Context, group string) (neutral.GroupInfo, error)
	// groups lists the persistent subscription groups on $all.
	groups(ctx context.Context) ([]string, error)
	// replayParked has group deliver its parked events again.
	replayParked(ctx context.Context, group string) error
}

// groupSource is a consumer of a persistent subscription group.
type groupSource interface {
	projector.Source
	Blocked() []string
	Stats() neutral.PersistentStats
}

// dialFunc is [Config.Dial]: an adapter's Dial.
type dialFunc = func(uri string, logger *slog.Logger) (*subscription.Client, error)

// schemes are the schemes of the official clients' connection strings (each
// also with "+discover"): esdb:// for both, kurrentdb://, kurrent:// and
// kdb:// for KurrentDB-Client-Go.
var schemes = []string{"esdb", "kurrentdb", "kurrent", "kdb"}

// checkScheme refuses, in one line without its password, a connection
// string whose scheme no official client reads.
func checkScheme(uri string) error {
	scheme, _, ok := strings.Cut(uri, "://")
	scheme = strings.TrimSuffix(strings.ToLower(scheme), "+discover")
	if ok && slices.Contains(schemes, scheme) {
		return nil
	}
	return fmt.Errorf("event store connection string %q: want esdb://host:port or kurrentdb://host:port (also kurrent://, kdb://)", neutral.Redact(uri))
}

// openEventStore returns a client of the event store at uri through dial
// ([Config.Dial]). It does not connect.
func openEventStore(dial dialFunc, uri string, logger *slog.Logger) (eventStore, error) {
	if err := checkScheme(uri); err != nil {
		return nil, err
	}
	c, err := dial(uri, logger)
	switch {
	case err != nil:
		return nil, err
	case c == nil:
		return nil, errors.New("Config.Dial returned no client and no error")
	}
	return store{c}, nil
}

// store is an event store on either official client. The groups it
// creates read from the start of $all, pinned (the server gives each
// stream's events to one consumer, by a hash of the stream's name, so that
// consumers do not wait for each other's events of one stream), and park
// after groupMaxDeliveries deliveries (the consumer parks first, and says
// so).
type store struct{ *subscription.Client }

func (s store) all(opts neutral.AllOptions) (projector.Source, error) {
	return subscription.NewAll(s.Client, opts)
}

func (s store) group(name string, opts neutral.AllOptions, block bool, logger *slog.Logger) (groupSource, error) {
	onFailure := subscription.NackPark
	if block {
		onFailure = subscription.NackRetry
	}
	return subscription.NewPersistent(s.Client, subscription.PersistentOptions{
		Stream: subscription.AllStreams, Group: name, Logger: logger,
		OnPermanentFailure: onFailure, MaxDeliveries: groupMaxDeliveries,
		Create: &subscription.GroupSettings{
			Strategy: subscription.Pinned, MaxRetryCount: groupMaxDeliveries, FromStart: true, Filter: opts,
		},
	})
}

// errNoGroup: the persistent subscription group does not exist.
var errNoGroup = subscription.ErrNoGroup

func (s store) groupInfo(ctx context.Context, group string) (neutral.GroupInfo, error) {
	return s.Group(ctx, group)
}

func (s store) groups(ctx context.Context) ([]string, error) { return s.Groups(ctx) }

func (s store) replayParked(ctx context.Context, group string) error {
	return s.ReplayParked(ctx, group)
}
