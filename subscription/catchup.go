package subscription

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/projector"
)

// AllOptions configure a catch-up subscription to $all.
type AllOptions struct {
	// StreamPrefixes keeps, on the server, only the events of streams whose
	// name starts with one of these (for the cart: "shopping_cart-"). Empty
	// keeps every stream; events of system types ("$...") are left out then.
	StreamPrefixes []string
	// StreamRegex keeps only streams whose name matches it; it replaces
	// StreamPrefixes.
	StreamRegex string
	// EventTypePrefixes keeps only events whose type starts with one of these.
	// It leaves holes in the revisions of a stream, which the revision gate
	// would wait for forever: the runner refuses it for gated projections.
	EventTypePrefixes []string
	// EventTypeRegex keeps only events whose type matches it; it replaces
	// EventTypePrefixes. The same holes in revisions follow.
	EventTypeRegex string
	// MaxSearchWindow and CheckpointInterval tune the server's checkpoint
	// messages: one after every MaxSearchWindow*CheckpointInterval events it
	// scans, kept or not (server defaults when 0). They move the stored
	// position on while filtered-out events go by, so that a quiet
	// projection's restart does not rescan them.
	MaxSearchWindow    int
	CheckpointInterval int
	// ResolveLinks delivers the events that link events point to.
	ResolveLinks bool
	// Logger logs drops and skipped deliveries (default: none).
	Logger *slog.Logger
}

// All is a catch-up subscription to $all, as a [projector.Source]: it reads
// from the checkpoint to the head, then follows live. Its checkpoints are
// positions in $all.
type All struct {
	client *Client
	opts   AllOptions
	filter *esdb.SubscriptionFilter
}

var (
	_ projector.OrderedSource       = (*All)(nil)
	_ projector.TypeFilteringSource = (*All)(nil)
	_ projector.AnchoredSource      = (*All)(nil)
)

// NewAll returns a $all source on client.
func NewAll(client *Client, opts AllOptions) (*All, error) {
	if client == nil {
		return nil, errors.New("subscription: no client")
	}
	f, err := ServerFilter(opts)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &All{client: client, opts: opts, filter: f}, nil
}

// ServerFilter returns the server-side filter of o's stream or event-type
// settings, for a catch-up subscription to $all or a persistent subscription
// group on $all; with none set it leaves out system events only.
func ServerFilter(o AllOptions) (*esdb.SubscriptionFilter, error) {
	streams := len(o.StreamPrefixes) > 0 || o.StreamRegex != ""
	types := len(o.EventTypePrefixes) > 0 || o.EventTypeRegex != ""
	if streams && types {
		return nil, errors.New("subscription: $all filters by stream or by event type, not both (the server takes one filter)")
	}
	for _, rx := range []string{o.StreamRegex, o.EventTypeRegex} {
		if _, err := regexp.Compile(rx); err != nil {
			return nil, fmt.Errorf("subscription: filter regex: %w", err)
		}
	}
	switch {
	case o.StreamRegex != "":
		return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Regex: o.StreamRegex}, nil
	case len(o.StreamPrefixes) > 0:
		return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: o.StreamPrefixes}, nil
	case o.EventTypeRegex != "":
		return &esdb.SubscriptionFilter{Type: esdb.EventFilterType, Regex: o.EventTypeRegex}, nil
	case len(o.EventTypePrefixes) > 0:
		return &esdb.SubscriptionFilter{Type: esdb.EventFilterType, Prefixes: o.EventTypePrefixes}, nil
	}
	return esdb.ExcludeSystemEventsFilter(), nil
}

// Log implements [projector.AnchoredSource]: the id of the first event of
// $all, system events included ("" while it is empty). An event store that
// was reset or replaced starts with another one.
func (a *All) Log(ctx context.Context) (string, error) {
	id := ""
	err := a.client.Do(ctx, func(cl *esdb.Client) error {
		s, err := cl.ReadAll(ctx, esdb.ReadAllOptions{From: esdb.Start{}}, 1)
		if err != nil {
			return err
		}
		defer s.Close()
		ev, err := s.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		id = ev.OriginalEvent().EventID.String()
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("subscription: the start of $all on %s: %w", a.client, err)
	}
	return id, nil
}

// Check implements [projector.AnchoredSource]: cp must not be past the head
// of $all, and the event at its position, when it names one, must be it.
func (a *All) Check(ctx context.Context, cp projector.Checkpoint) error {
	var head uint64
	found := ""
	err := a.client.Do(ctx, func(cl *esdb.Client) error {
		var err error
		if head, err = lastPosition(ctx, cl); err != nil || cp.EventID == "" || cp.Position > head {
			return err
		}
		s, err := cl.ReadAll(ctx, esdb.ReadAllOptions{From: esdb.Position{Commit: cp.Position, Prepare: cp.Prepare}}, 1)
		if err != nil {
			return err
		}
		defer s.Close()
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if r := ev.OriginalEvent(); r.Position.Commit == cp.Position {
			found = r.EventID.String()
		}
		return nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("subscription: checking checkpoint %s on %s: %w", cp, a.client, err)
	case cp.Position > head:
		return fmt.Errorf("%w: it is past the head of $all, %d", projector.ErrForeignCheckpoint, head)
	case cp.EventID != "" && found != cp.EventID:
		return fmt.Errorf("%w: the event at position %d is %s, not %s (head %d)", projector.ErrForeignCheckpoint, cp.Position, orNone(found), cp.EventID, head)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// lastPosition returns the commit position of the last event in $all (0:
// none).
func lastPosition(ctx context.Context, cl *esdb.Client) (uint64, error) {
	s, err := cl.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	ev, err := s.Recv()
	if errors.Is(err, io.EOF) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return ev.OriginalEvent().Position.Commit, nil
}

// Ordered reports that the subscription delivers $all in log order.
func (a *All) Ordered() bool { return true }

// Ordered reports that the subscription delivers the stream in order.
func (s *Stream) Ordered() bool { return true }

// FiltersEventTypes reports whether the subscription leaves out events by
// type, so that streams arrive with holes. (Leaving out system events only,
// the default, leaves no hole in a user's stream.)
func (a *All) FiltersEventTypes() bool {
	return len(a.opts.EventTypePrefixes) > 0 || a.opts.EventTypeRegex != ""
}

// Subscribe implements [projector.Source]: after from, or from the start.
func (a *All) Subscribe(ctx context.Context, from *projector.Checkpoint) (projector.Subscription, error) {
	var start esdb.AllPosition = esdb.Start{}
	if from != nil {
		start = esdb.Position{Commit: from.Position, Prepare: from.Prepare}
	}
	sub, err := call(ctx, a.client, func(cl *esdb.Client) (*esdb.Subscription, error) {
		return cl.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{
			From:               start,
			ResolveLinkTos:     a.opts.ResolveLinks,
			MaxSearchWindow:    a.opts.MaxSearchWindow,
			CheckpointInterval: a.opts.CheckpointInterval,
			Filter:             a.filter,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("subscription: $all on %s: %w", a.client, err)
	}
	return &catchUp{sub: sub, logger: a.opts.Logger, checkpoint: allCheckpoint}, nil
}

// StreamOptions configure a catch-up subscription to one stream.
type StreamOptions struct {
	// ResolveLinks delivers the events that link events point to (for a
	// $ce- or $et- stream).
	ResolveLinks bool
	Logger       *slog.Logger
}

// Stream is a catch-up subscription to one stream, as a [projector.Source].
// Its checkpoints are revisions of that stream.
type Stream struct {
	client *Client
	stream string
	opts   StreamOptions
}

var _ projector.OrderedSource = (*Stream)(nil)

// NewStream returns a source on one stream.
func NewStream(client *Client, stream string, opts StreamOptions) (*Stream, error) {
	if client == nil || stream == "" {
		return nil, errors.New("subscription: a stream source needs a client and a stream name")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Stream{client: client, stream: stream, opts: opts}, nil
}

// Subscribe implements [projector.Source]: after from, or from the start.
func (s *Stream) Subscribe(ctx context.Context, from *projector.Checkpoint) (projector.Subscription, error) {
	var start esdb.StreamPosition = esdb.Start{}
	if from != nil {
		start = esdb.Revision(from.Position)
	}
	sub, err := call(ctx, s.client, func(cl *esdb.Client) (*esdb.Subscription, error) {
		return cl.SubscribeToStream(ctx, s.stream, esdb.SubscribeToStreamOptions{From: start, ResolveLinkTos: s.opts.ResolveLinks})
	})
	if err != nil {
		return nil, fmt.Errorf("subscription: stream %q on %s: %w", s.stream, s.client, err)
	}
	return &catchUp{sub: sub, logger: s.opts.Logger, checkpoint: streamCheckpoint}, nil
}

func allCheckpoint(re *esdb.ResolvedEvent) *projector.Checkpoint {
	ev := re.OriginalEvent()
	return &projector.Checkpoint{Position: ev.Position.Commit, Prepare: ev.Position.Prepare, EventID: ev.EventID.String()}
}

func streamCheckpoint(re *esdb.ResolvedEvent) *projector.Checkpoint {
	return &projector.Checkpoint{Position: re.OriginalEvent().EventNumber}
}

// catchUp is an open catch-up subscription.
type catchUp struct {
	sub        *esdb.Subscription
	logger     *slog.Logger
	checkpoint func(*esdb.ResolvedEvent) *projector.Checkpoint
}

// Next implements [projector.Subscription].
func (c *catchUp) Next(ctx context.Context) (projector.Delivery, error) {
	stop := context.AfterFunc(ctx, func() { c.sub.Close() })
	defer stop()
	for {
		m := c.sub.Recv()
		switch {
		case ctx.Err() != nil:
			return projector.Delivery{}, ctx.Err()
		case m.SubscriptionDropped != nil:
			return projector.Delivery{}, fmt.Errorf("subscription: dropped: %w", m.SubscriptionDropped.Error)
		case m.EventAppeared != nil:
			cp := c.checkpoint(m.EventAppeared)
			ev, err := Envelope(m.EventAppeared)
			if err != nil {
				// A link to a deleted event: there is nothing to project, and
				// its stream's projection sees the hole in its revisions.
				c.logger.Warn("skipping a delivery", "err", err)
				return projector.Delivery{Checkpoint: cp}, nil
			}
			return projector.Delivery{Event: &ev, Checkpoint: cp}, nil
		case m.CheckPointReached != nil:
			cp := &projector.Checkpoint{Position: m.CheckPointReached.Commit, Prepare: m.CheckPointReached.Prepare}
			return projector.Delivery{Checkpoint: cp}, nil
		case m.CaughtUp != nil:
			return projector.Delivery{CaughtUp: true}, nil
		}
		// FellBehind: nothing to do; the runner keeps reading.
	}
}

// Close implements [projector.Subscription].
func (c *catchUp) Close() error { return c.sub.Close() }
