package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
)

// AllStreams names $all as the stream of a persistent subscription group.
const AllStreams = neutral.AllStreams

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
	// that failed permanently (a payload that does not decode, a domain error,
	// a panic): [esdb.NackActionPark] (the default) moves it to the group's
	// parked stream, with the reason; [esdb.NackActionRetry] has it
	// redelivered, up to MaxDeliveries, after which the consumer parks it.
	// Under the engine's [projector.Skip] policy the document has moved past
	// the event, so the rest of its stream flows either way.
	// Transient failures (a predecessor not there in time) are retried:
	// another consumer may apply it meanwhile.
	OnPermanentFailure esdb.NackAction
	// MaxDeliveries bounds how many times a failing event is delivered
	// (default 10): once it has failed that many times, whether for good
	// under [esdb.NackActionRetry] or because its predecessor never came, the
	// consumer parks it in the group's parked stream, logs it, and counts it
	// in [PersistentStats.Parked], instead of retrying it for ever. Keep the
	// group's own MaxRetryCount at least this high (the server parks on its
	// own, without a word to the consumer, past it).
	MaxDeliveries int
	// Create, when set, creates the group with these settings if it does not
	// exist (for $all, StartFrom and Filter are taken from CreateAll).
	Create    *esdb.PersistentStreamSubscriptionOptions
	CreateAll *esdb.PersistentAllSubscriptionOptions
	Logger    *slog.Logger
}

// PersistentStats counts what a consumer told the server about the events it
// was given (the same type as kurrent.PersistentStats; see
// [neutral.PersistentStats]).
type PersistentStats = neutral.PersistentStats

// Persistent is a consumer of a persistent subscription group, as a
// [projector.Source]. The server keeps the group's position and shares the
// events among the consumers connected to it, in as many processes as wanted;
// events of one stream may reach two consumers, in any order, and the revision
// gate keeps the documents right. The consumer acknowledges each event once
// the engine has handled it, and declines (nacks) failed ones per
// OnPermanentFailure.
//
// The group must exist (see Create). Its consumer strategy may be RoundRobin,
// DispatchToSingle or Pinned; the official Go client cannot create
// PinnedByCorrelation groups.
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
		OnPermanentFailure: neutral.Action(opts.OnPermanentFailure), MaxDeliveries: opts.MaxDeliveries, Logger: opts.Logger,
	}
	if err := co.Validate(); err != nil || client == nil {
		if err == nil {
			err = errors.New("a persistent subscription needs a client, a stream (or $all) and a group")
		}
		return nil, fmt.Errorf("subscription: %w", err)
	}
	opts.OnPermanentFailure, opts.BufferSize, opts.MaxDeliveries, opts.Logger =
		esdb.NackAction(co.OnPermanentFailure), co.BufferSize, co.MaxDeliveries, co.Logger
	return &Persistent{client: client, opts: opts, consumer: co}, nil
}

func (p *Persistent) toAll() bool { return p.opts.Stream == AllStreams }

// EnsureGroup creates the group if it does not exist, with opts.Create (or
// CreateAll); it does nothing when neither is set.
func (p *Persistent) EnsureGroup(ctx context.Context) error {
	if p.opts.Create == nil && p.opts.CreateAll == nil {
		return nil
	}
	_, err := call(ctx, p.client, func(cl *esdb.Client) (struct{}, error) {
		if p.toAll() {
			o := esdb.PersistentAllSubscriptionOptions{}
			if p.opts.CreateAll != nil {
				o = *p.opts.CreateAll
			}
			return struct{}{}, cl.CreatePersistentSubscriptionToAll(ctx, p.opts.Group, o)
		}
		o := esdb.PersistentStreamSubscriptionOptions{}
		if p.opts.Create != nil {
			o = *p.opts.Create
		}
		return struct{}{}, cl.CreatePersistentSubscription(ctx, p.opts.Stream, p.opts.Group, o)
	})
	var e *esdb.Error
	if errors.As(err, &e) && e.Code() == esdb.ErrorCodeResourceAlreadyExists {
		return nil
	}
	if err != nil {
		return fmt.Errorf("subscription: creating group %q on %s: %w", p.opts.Group, p.opts.Stream, err)
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
	o := esdb.SubscribeToPersistentSubscriptionOptions{BufferSize: uint32(p.opts.BufferSize)}
	sub, err := call(ctx, p.client, func(cl *esdb.Client) (*esdb.PersistentSubscription, error) {
		if p.toAll() {
			return cl.SubscribeToPersistentSubscriptionToAll(streamCtx, p.opts.Group, o)
		}
		return cl.SubscribeToPersistentSubscription(streamCtx, p.opts.Stream, p.opts.Group, o)
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("subscription: group %q on %s (%s): %w", p.opts.Group, p.opts.Stream, p.client, err)
	}
	return neutral.NewConsumer("subscription", groupStream{sub}, &p.consumer, &p.ledger, cancel), nil
}

// groupStream is the official client's connection to a group, for
// [neutral.NewConsumer].
type groupStream struct{ sub *esdb.PersistentSubscription }

func (g groupStream) Recv() (*esdb.ResolvedEvent, int, error) {
	m := g.sub.Recv()
	switch {
	case m.SubscriptionDropped != nil:
		return nil, 0, m.SubscriptionDropped.Error
	case m.EventAppeared == nil:
		return nil, 0, errors.New("empty message from the server")
	}
	return m.EventAppeared.Event, 1 + max(m.EventAppeared.RetryCount, 0), nil
}

func (g groupStream) Ack(re *esdb.ResolvedEvent) error { return g.sub.Ack(re) }

func (g groupStream) Nack(reason string, a neutral.Action, re *esdb.ResolvedEvent) error {
	return g.sub.Nack(reason, esdb.NackAction(a), re)
}

func (g groupStream) Envelope(re *esdb.ResolvedEvent) (projector.Event, error) { return Envelope(re) }
