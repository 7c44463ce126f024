package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/projector"
)

// AllStreams names $all as the stream of a persistent subscription group.
const AllStreams = "$all"

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
	client                          *Client
	opts                            PersistentOptions
	acked, parked, retried, skipped atomic.Uint64

	mu      sync.Mutex
	blocked map[blockedDoc]string // documents left behind an event the consumer parked, and why
}

// blockedDoc is a document of a projection.
type blockedDoc struct{ projection, document string }

// Blocked returns the documents that stay behind an event this consumer
// parked after it failed (under the engine's [projector.Block] policy the
// document did not move past it, so its later events cannot apply either),
// each with why, until the document applies an event again (once the parked
// events are replayed, say). Sorted; empty when none.
func (p *Persistent) Blocked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.blocked))
	for d, why := range p.blocked {
		out = append(out, fmt.Sprintf("%s/%s: %s", d.projection, d.document, why))
	}
	slices.Sort(out)
	return out
}

// note records what results say of the documents: a failed one that was
// parked is blocked; one that applied an event is not any more.
func (p *Persistent) note(results []projector.Result, parked bool, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range results {
		d := blockedDoc{r.Projection, r.Document}
		switch {
		case r.Outcome == projector.Applied:
			delete(p.blocked, d)
		case r.Outcome == projector.Failed && parked && r.Document != "":
			if p.blocked == nil {
				p.blocked = map[blockedDoc]string{}
			}
			p.blocked[d] = why
		}
	}
}

// PersistentStats counts what a consumer told the server about the events it
// was given.
type PersistentStats struct {
	// Acked events were handled; Parked ones moved to the group's parked
	// stream with their reason; Retried ones were handed back to be
	// redelivered; Skipped ones were dropped (nack skip).
	Acked, Parked, Retried, Skipped uint64
}

// Stats returns the consumer's counts since it was made.
func (p *Persistent) Stats() PersistentStats {
	return PersistentStats{Acked: p.acked.Load(), Parked: p.parked.Load(), Retried: p.retried.Load(), Skipped: p.skipped.Load()}
}

func (p *Persistent) count(action esdb.NackAction) {
	switch action {
	case esdb.NackActionPark:
		p.parked.Add(1)
	case esdb.NackActionRetry:
		p.retried.Add(1)
	case esdb.NackActionSkip:
		p.skipped.Add(1)
	}
}

var _ projector.Source = (*Persistent)(nil)

// NewPersistent returns a consumer of a persistent subscription group.
func NewPersistent(client *Client, opts PersistentOptions) (*Persistent, error) {
	if client == nil || opts.Stream == "" || opts.Group == "" {
		return nil, errors.New("subscription: a persistent subscription needs a client, a stream (or $all) and a group")
	}
	switch opts.OnPermanentFailure {
	case esdb.NackActionUnknown:
		opts.OnPermanentFailure = esdb.NackActionPark
	case esdb.NackActionPark, esdb.NackActionRetry, esdb.NackActionSkip:
	default:
		return nil, fmt.Errorf("subscription: nack action %d on permanent failure: use park, retry or skip", opts.OnPermanentFailure)
	}
	if opts.BufferSize <= 0 {
		opts.BufferSize = 64
	}
	if opts.MaxDeliveries <= 0 {
		opts.MaxDeliveries = 10
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Persistent{client: client, opts: opts}, nil
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
	c := &consumer{src: p, sub: sub, opts: &p.opts, cancel: cancel, msgs: make(chan *esdb.PersistentSubscriptionEvent), done: make(chan struct{})}
	go c.pump()
	return c, nil
}

// consumer is one open connection to a group.
type consumer struct {
	src  *Persistent
	sub  *esdb.PersistentSubscription
	opts *PersistentOptions
	// send serializes acks and nacks: they share one gRPC stream, which
	// allows one sender at a time.
	send   sync.Mutex
	cancel context.CancelFunc // ends the stream
	msgs   chan *esdb.PersistentSubscriptionEvent
	done   chan struct{}
	once   sync.Once
}

// pump receives from the server until the stream ends, so that Next can
// return on its context without ending the stream.
func (c *consumer) pump() {
	for {
		m := c.sub.Recv()
		select {
		case c.msgs <- m:
		case <-c.done:
			return
		}
		if m.SubscriptionDropped != nil {
			return
		}
	}
}

// Next implements [projector.Subscription].
func (c *consumer) Next(ctx context.Context) (projector.Delivery, error) {
	var m *esdb.PersistentSubscriptionEvent
	select {
	case m = <-c.msgs:
	case <-ctx.Done():
		return projector.Delivery{}, ctx.Err()
	case <-c.done:
		return projector.Delivery{}, errors.New("subscription: consumer closed")
	}
	switch {
	case m.SubscriptionDropped != nil:
		return projector.Delivery{}, fmt.Errorf("subscription: group %q dropped: %w", c.opts.Group, m.SubscriptionDropped.Error)
	case m.EventAppeared == nil:
		return projector.Delivery{}, errors.New("subscription: empty message from the server")
	}
	re := m.EventAppeared.Event
	ev, err := Envelope(re)
	if err != nil {
		// A link to a deleted event: park it with the reason, and go on.
		c.opts.Logger.Warn("parking a delivery", "group", c.opts.Group, "err", err)
		if nerr := c.nack(err.Error(), esdb.NackActionPark, re); nerr != nil {
			return projector.Delivery{}, nerr
		}
		return c.Next(ctx)
	}
	deliveries := 1 + max(m.EventAppeared.RetryCount, 0)
	return projector.Delivery{Event: &ev, Settle: func(results []projector.Result) error { return c.settle(re, deliveries, results) }}, nil
}

// settle acknowledges re when every projection handled it, and declines it
// otherwise: parked once it has failed on its last allowed delivery.
func (c *consumer) settle(re *esdb.ResolvedEvent, deliveries int, results []projector.Result) error {
	var permanent, transient []string
	for _, r := range results {
		switch r.Outcome {
		case projector.Skipped, projector.Parked:
			permanent = append(permanent, r.Err.Error())
		case projector.Failed:
			var perr *projector.Error
			if errors.As(r.Err, &perr) && perr.Retryable() {
				transient = append(transient, r.Err.Error())
			} else {
				permanent = append(permanent, r.Err.Error())
			}
		}
	}
	reason := strings.Join(append(transient, permanent...), "; ")
	action := esdb.NackActionRetry
	switch {
	case len(transient) == 0 && len(permanent) > 0:
		action = c.opts.OnPermanentFailure
	case len(transient) == 0:
		c.src.note(results, false, "")
		return c.ack(re)
	}
	if action == esdb.NackActionRetry && deliveries >= c.opts.MaxDeliveries {
		// Retried enough: parked, and said, instead of retried for ever.
		action = esdb.NackActionPark
		reason = fmt.Sprintf("failed on %d deliveries: %s", deliveries, reason)
		c.opts.Logger.Error("parked an event that kept failing: the documents it feeds stay behind it until the group's parked events are replayed",
			"group", c.opts.Group, "stream", re.OriginalEvent().StreamID, "revision", re.OriginalEvent().EventNumber,
			"deliveries", deliveries, "err", reason)
	}
	c.src.note(results, action == esdb.NackActionPark, reason)
	return c.nack(reason, action, re)
}

func (c *consumer) ack(re *esdb.ResolvedEvent) error {
	c.send.Lock()
	defer c.send.Unlock()
	if err := c.sub.Ack(re); err != nil {
		return err
	}
	c.src.acked.Add(1)
	return nil
}

func (c *consumer) nack(reason string, action esdb.NackAction, re *esdb.ResolvedEvent) error {
	c.send.Lock()
	defer c.send.Unlock()
	if err := c.sub.Nack(reason, action, re); err != nil {
		return err
	}
	c.src.count(action)
	return nil
}

// Close implements [projector.Subscription]. It cancels the stream rather
// than half-closing it (the official client's Close), which would race with an
// acknowledgement being sent.
func (c *consumer) Close() error {
	c.once.Do(func() {
		c.cancel()
		close(c.done)
	})
	return nil
}
