package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// eventStore is the event store the commands read, through one of the two
// official clients: the connection string's scheme picks it (see
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
	ScanAll(ctx context.Context, cp *projector.Checkpoint, n int, each func(neutral.Record) bool) error
	// Head is the commit position of the last event of $all (0: none).
	Head(ctx context.Context) (uint64, error)
	// all is a catch-up source on $all.
	all(opts neutral.AllOptions) (projector.Source, error)
	// group is a consumer of persistent subscription group name on $all,
	// filtered as opts, created if missing; a failed event is handed back
	// to be retried (block) or parked at once.
	group(name string, opts neutral.AllOptions, block bool, logger *slog.Logger) (groupSource, error)
	// parked is how many events group (on $all) has parked, and its name
	// as the server gives it.
	parked(ctx context.Context, group string) (string, int64, error)
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

// kurrentSchemes are the schemes KurrentDB-Client-Go reads (each also with
// "+discover"); esdb:// stays on EventStore-Client-Go v4.
var kurrentSchemes = []string{"kurrentdb", "kurrent", "kdb"}

// openEventStore returns a client of the event store at uri: on
// KurrentDB-Client-Go for kurrentdb://, kurrent:// and kdb://, on
// EventStore-Client-Go v4 for esdb://. It does not connect.
func openEventStore(uri string, logger *slog.Logger) (eventStore, error) {
	scheme, _, ok := strings.Cut(uri, "://")
	scheme = strings.TrimSuffix(strings.ToLower(scheme), "+discover")
	switch {
	case ok && scheme == "esdb":
		c, err := subscription.Dial(uri, logger)
		if err != nil {
			return nil, err
		}
		return esdbStore{c}, nil
	case ok && slices.Contains(kurrentSchemes, scheme):
		c, err := kurrent.Dial(uri, logger)
		if err != nil {
			return nil, err
		}
		return kurrentStore{c}, nil
	}
	return nil, fmt.Errorf("event store connection string %q: want esdb://host:port (EventStore-Client-Go) or kurrentdb://host:port (KurrentDB-Client-Go; also kurrent://, kdb://)", neutral.Redact(uri))
}

// esdbStore is an event store on EventStore-Client-Go v4. The groups it
// creates (as kurrentStore's) read from the start of $all, pinned (the
// server gives each stream's events to one consumer, by a hash of the
// stream's name, so that consumers do not wait for each other's events of
// one stream), and park after groupMaxDeliveries deliveries (the consumer
// parks first, and says so).
type esdbStore struct{ *subscription.Client }

func (s esdbStore) all(opts neutral.AllOptions) (projector.Source, error) {
	return subscription.NewAll(s.Client, opts)
}

func (s esdbStore) group(name string, opts neutral.AllOptions, block bool, logger *slog.Logger) (groupSource, error) {
	filter, err := subscription.ServerFilter(opts)
	if err != nil {
		return nil, err
	}
	settings := esdb.SubscriptionSettingsDefault()
	settings.StartFrom = esdb.Start{}
	settings.ConsumerStrategyName = esdb.ConsumerStrategyPinned
	settings.MaxRetryCount = groupMaxDeliveries
	onFailure := esdb.NackActionPark
	if block {
		onFailure = esdb.NackActionRetry
	}
	return subscription.NewPersistent(s.Client, subscription.PersistentOptions{
		Stream: subscription.AllStreams, Group: name, Logger: logger,
		OnPermanentFailure: onFailure, MaxDeliveries: groupMaxDeliveries,
		CreateAll: &esdb.PersistentAllSubscriptionOptions{Settings: &settings, StartFrom: esdb.Start{}, Filter: filter},
	})
}

// errNoGroup: the persistent subscription group does not exist.
var errNoGroup = errors.New("no such group")

func (s esdbStore) parked(ctx context.Context, group string) (string, int64, error) {
	var name string
	var n int64
	err := s.Do(ctx, func(cl *esdb.Client) error {
		info, err := cl.GetPersistentSubscriptionInfoToAll(ctx, group, esdb.GetPersistentSubscriptionOptions{})
		if err == nil {
			name = info.GroupName
			if info.Stats != nil {
				n = info.Stats.ParkedMessagesCount
			}
		}
		if e := (*esdb.Error)(nil); errors.As(err, &e) && e.Code() == esdb.ErrorCodeResourceNotFound {
			return errNoGroup
		}
		return err
	})
	return name, n, err
}

func (s esdbStore) groups(ctx context.Context) ([]string, error) {
	var names []string
	err := s.Do(ctx, func(cl *esdb.Client) error {
		gs, err := cl.ListPersistentSubscriptionsToAll(ctx, esdb.ListPersistentSubscriptionsOptions{})
		var e *esdb.Error
		if errors.As(err, &e) && e.Code() == esdb.ErrorCodeResourceNotFound {
			return nil // no groups at all
		}
		for _, g := range gs {
			names = append(names, g.GroupName)
		}
		return err
	})
	return names, err
}

func (s esdbStore) replayParked(ctx context.Context, group string) error {
	return s.Do(ctx, func(cl *esdb.Client) error {
		return cl.ReplayParkedMessagesToAll(ctx, group, esdb.ReplayParkedMessagesOptions{})
	})
}

// kurrentStore is an event store on KurrentDB-Client-Go.
type kurrentStore struct{ *kurrent.Client }

func (s kurrentStore) all(opts neutral.AllOptions) (projector.Source, error) {
	return kurrent.NewAll(s.Client, opts)
}

func (s kurrentStore) group(name string, opts neutral.AllOptions, block bool, logger *slog.Logger) (groupSource, error) {
	filter, err := kurrent.ServerFilter(opts)
	if err != nil {
		return nil, err
	}
	settings := kurrentdb.SubscriptionSettingsDefault()
	settings.StartFrom = kurrentdb.Start{}
	settings.ConsumerStrategyName = kurrentdb.ConsumerStrategyPinned
	settings.MaxRetryCount = groupMaxDeliveries
	onFailure := kurrentdb.NackActionPark
	if block {
		onFailure = kurrentdb.NackActionRetry
	}
	return kurrent.NewPersistent(s.Client, kurrent.PersistentOptions{
		Stream: kurrent.AllStreams, Group: name, Logger: logger,
		OnPermanentFailure: onFailure, MaxDeliveries: groupMaxDeliveries,
		CreateAll: &kurrentdb.PersistentAllSubscriptionOptions{Settings: &settings, StartFrom: kurrentdb.Start{}, Filter: filter},
	})
}

func (s kurrentStore) parked(ctx context.Context, group string) (string, int64, error) {
	var name string
	var n int64
	err := s.Do(ctx, func(cl *kurrentdb.Client) error {
		info, err := cl.GetPersistentSubscriptionInfoToAll(ctx, group, kurrentdb.GetPersistentSubscriptionOptions{})
		if err == nil {
			name = info.GroupName
			if info.Stats != nil {
				n = info.Stats.ParkedMessagesCount
			}
		}
		if e := (*kurrentdb.Error)(nil); errors.As(err, &e) && e.Code() == kurrentdb.ErrorCodeResourceNotFound {
			return errNoGroup
		}
		return err
	})
	return name, n, err
}

func (s kurrentStore) groups(ctx context.Context) ([]string, error) {
	var names []string
	err := s.Do(ctx, func(cl *kurrentdb.Client) error {
		gs, err := cl.ListPersistentSubscriptionsToAll(ctx, kurrentdb.ListPersistentSubscriptionsOptions{})
		var e *kurrentdb.Error
		if errors.As(err, &e) && e.Code() == kurrentdb.ErrorCodeResourceNotFound {
			return nil // no groups at all
		}
		for _, g := range gs {
			names = append(names, g.GroupName)
		}
		return err
	})
	return names, err
}

func (s kurrentStore) replayParked(ctx context.Context, group string) error {
	return s.Do(ctx, func(cl *kurrentdb.Client) error {
		return cl.ReplayParkedMessagesToAll(ctx, group, kurrentdb.ReplayParkedMessagesOptions{})
	})
}
