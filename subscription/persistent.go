package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
)

// AllStreams names $all as the stream of a persistent subscription group.
const AllStreams = neutral.AllStreams

// NackAction is what a consumer asks the server to do with an event it
// declines: [NackPark], [NackRetry] or [NackSkip].
type NackAction = neutral.Action

// The nack actions of [PersistentOptions.OnPermanentFailure].
const (
	NackPark  = neutral.ActionPark
	NackRetry = neutral.ActionRetry
	NackSkip  = neutral.ActionSkip
)

// GroupSettings are the settings [Persistent.EnsureGroup] creates a group
// with. Its fields: Strategy, how the group shares its events among its
// consumers ([RoundRobin], the default, [DispatchToSingle] or [Pinned]);
// MaxRetryCount, how many times the server delivers an event before it
// parks it on its own (0: the client's default, 10); ResolveLinks; FromStart
// (else the group starts at the end of its stream); and, for a group on
// $all, Filter, whose stream or event-type fields are the server-side filter
// (its other fields do not apply to a group).
type GroupSettings = neutral.GroupSettings

// ConsumerStrategy is how a group shares its events among its consumers.
type ConsumerStrategy = neutral.ConsumerStrategy

// The consumer strategies a group can be created with.
const (
	RoundRobin       = neutral.RoundRobin
	DispatchToSingle = neutral.DispatchToSingle
	Pinned           = neutral.Pinned
)

// PersistentOptions configure a consumer of a persistent subscription group.
type PersistentOptions struct {
	// Stream the group reads: a stream name, or [AllStreams].
	Stream string
	// Group is the group's name; every projector process sharing the work
	// joins the same group.
	Group string
	// BufferSize is how many events the server may have in flight to this
	// consumer (default 64).
	BufferSize int
	// OnPermanentFailure is what the consumer tells the server about an event
	// that failed permanently under the engine's [projector.Block] policy (a
	// payload that does not decode, a domain error, a panic): [NackPark] (the
	// default) moves it to the group's parked stream, with the reason;
	// [NackRetry] has it redelivered, up to MaxDeliveries, after which the
	// consumer parks it; [NackSkip] drops it. An event the engine's policy
	// settled is not failed: one it parked ([projector.Park]) is
	// acknowledged, its record in the engine's parker the one to replay, and
	// one it skipped ([projector.Skip]) is told to the server as skipped.
	// Transient failures (a predecessor not there in time) are retried:
	// another consumer may apply it meanwhile.
	OnPermanentFailure NackAction
	// MaxDeliveries bounds how many times a failing event is delivered
	// (default 10): once it has failed that many times, whether for good
	// under [NackRetry] or because its predecessor never came, the consumer
	// parks it in the group's parked stream, logs it, and counts it in
	// [PersistentStats.Parked], instead of retrying it for ever. Keep the
	// group's own MaxRetryCount at least this high (the server parks on its
	// own, without a word to the consumer, past it).
	MaxDeliveries int
	// Create, when set, creates the group with these settings if it does
	// not exist.
	Create *GroupSettings
	Logger *slog.Logger
}

// PersistentStats counts what a consumer told the server about the events it
// was given: Acked (handled), Parked (moved to the group's parked stream
// with their reason), Retried (handed back to be delivered again) and
// Skipped (dropped).
type PersistentStats = neutral.PersistentStats

// Persistent is a consumer of a persistent subscription group, as a
// [projector.Source]. The server keeps the group's position and shares the
// events among the consumers connected to it, in as many processes as wanted;
// events of one stream may reach two consumers, in any order, and the revision
// gate keeps the documents right. The consumer acknowledges each event once
// the engine has handled it, and declines (nacks) failed ones per
// OnPermanentFailure.
//
// The group must exist (see Create). Create makes it RoundRobin,
// DispatchToSingle or Pinned; a group made by other means may be
// PinnedByCorrelation too.
type Persistent struct {
	client   *Client
	opts     PersistentOptions
	consumer neutral.ConsumerOptions
	ledger   neutral.Ledger
}

// Blocked returns the documents that stay behind an event this consumer
// parked after it failed (under the engine's [projector.Block] policy the
// document did not move past it, so its later events cannot apply either),
// each with why, until the document applies an event again (once the parked
// events are replayed, say). Sorted; empty when none.
func (p *Persistent) Blocked() []string { return p.ledger.Blocked() }

// Stats returns the consumer's counts since it was made.
func (p *Persistent) Stats() PersistentStats { return p.ledger.Stats() }

var _ projector.Source = (*Persistent)(nil)

// NewPersistent returns a consumer of a persistent subscription group.
func NewPersistent(client *Client, opts PersistentOptions) (*Persistent, error) {
	co := neutral.ConsumerOptions{
		Stream: opts.Stream, Group: opts.Group, BufferSize: opts.BufferSize,
		OnPermanentFailure: opts.OnPermanentFailure, MaxDeliveries: opts.MaxDeliveries, Logger: opts.Logger,
	}
	if client == nil {
		return nil, errors.New("subscription: a persistent subscription needs a client, a stream (or $all) and a group")
	}
	if err := co.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", client.pkg, err)
	}
	if opts.Create != nil {
		switch opts.Create.Strategy {
		case "", RoundRobin, DispatchToSingle, Pinned:
		default:
			// Either client panics on a name it does not know.
			return nil, fmt.Errorf("%s: group %q: consumer strategy %q: want %s, %s or %s", client.pkg, opts.Group,
				opts.Create.Strategy, RoundRobin, DispatchToSingle, Pinned)
		}
		if _, err := opts.Create.Filter.ServerFilter(); err != nil {
			return nil, fmt.Errorf("%s: %w", client.pkg, err)
		}
	}
	opts.OnPermanentFailure, opts.BufferSize, opts.MaxDeliveries, opts.Logger =
		co.OnPermanentFailure, co.BufferSize, co.MaxDeliveries, co.Logger
	return &Persistent{client: client, opts: opts, consumer: co}, nil
}

// EnsureGroup creates the group if it does not exist, with opts.Create; it
// does nothing when that is not set.
func (p *Persistent) EnsureGroup(ctx context.Context) error {
	if p.opts.Create == nil {
		return nil
	}
	s := *p.opts.Create
	filter, err := s.Filter.ServerFilter()
	if err != nil {
		return fmt.Errorf("%s: %w", p.client.pkg, err)
	}
	err = p.client.do(ctx, func(ss neutral.Session) error {
		return ss.CreateGroup(ctx, p.opts.Stream, p.opts.Group, s, filter)
	})
	if err != nil && !p.client.is(err, neutral.ErrExists) {
		return fmt.Errorf("%s: creating group %q on %s: %w", p.client.pkg, p.opts.Group, p.opts.Stream, err)
	}
	return nil
}

// Subscribe implements [projector.Source]; from is ignored: the server keeps
// the group's position.
func (p *Persistent) Subscribe(ctx context.Context, _ *projector.Checkpoint) (projector.Subscription, error) {
	if err := p.EnsureGroup(ctx); err != nil {
		return nil, err
	}
	// The stream lives until Close cancels streamCtx, not until ctx ends: a
	// stopping runner still acknowledges the events it finishes.
	streamCtx, cancel := context.WithCancel(context.Background())
	sub, err := call(ctx, p.client, func(s neutral.Session) (neutral.GroupFeed, error) {
		return s.SubscribeGroup(streamCtx, p.opts.Stream, p.opts.Group, p.opts.BufferSize)
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s: group %q on %s (%s): %w", p.client.pkg, p.opts.Group, p.opts.Stream, p.client, err)
	}
	return neutral.NewConsumer(p.client.pkg, groupStream{sub, p.client}, &p.consumer, &p.ledger, cancel), nil
}

// groupStream is a driver's connection to a group, for
// [neutral.NewConsumer].
type groupStream struct {
	neutral.GroupFeed
	client *Client
}

func (g groupStream) Envelope(re *neutral.Resolved) (projector.Event, error) {
	return g.client.envelope(re)
}
