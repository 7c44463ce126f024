package subscription

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
)

// AllOptions configure a catch-up subscription to $all. It is the same type
// as kurrent.AllOptions, so that one value configures a source on either
// client. Its fields (go doc shows them under [neutral.AllOptions]):
// StreamPrefixes or StreamRegex (which streams, filtered on the server),
// EventTypePrefixes or EventTypeRegex (which event types), MaxSearchWindow
// and CheckpointInterval (how often the server sends checkpoints),
// ResolveLinks and Logger.
type AllOptions = neutral.AllOptions

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
	opts.Logger = neutral.OrDiscard(opts.Logger)
	return &All{client: client, opts: opts, filter: f}, nil
}

// ServerFilter returns the server-side filter of o's stream or event-type
// settings, for a catch-up subscription to $all or a persistent subscription
// group on $all; with none set it leaves out system events only.
func ServerFilter(o AllOptions) (*esdb.SubscriptionFilter, error) {
	f, err := o.ServerFilter()
	switch {
	case err != nil:
		return nil, fmt.Errorf("subscription: %w", err)
	case f.ExcludeSystemEvents:
		return esdb.ExcludeSystemEventsFilter(), nil
	case f.EventTypes:
		return &esdb.SubscriptionFilter{Type: esdb.EventFilterType, Prefixes: f.Prefixes, Regex: f.Regex}, nil
	}
	return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: f.Prefixes, Regex: f.Regex}, nil
}

// Log implements [projector.AnchoredSource]: the id of the first event of
// $all, system events included, and its position (see [neutral.LogOf]; ""
// while it is empty). An event store that was reset or replaced starts with
// another one.
func (a *All) Log(ctx context.Context) (string, error) {
	var log string
	err := a.client.Do(ctx, func(cl *esdb.Client) error {
		var err error
		log, err = firstOfAll(ctx, cl)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("subscription: the start of $all on %s: %w", a.client, err)
	}
	return log, nil
}

// Check implements [projector.AnchoredSource] by [neutral.CheckAnchor].
func (a *All) Check(ctx context.Context, cp projector.Checkpoint) error {
	var now neutral.Anchor
	err := a.client.Do(ctx, func(cl *esdb.Client) error {
		var err error
		if now.Log, err = firstOfAll(ctx, cl); err != nil {
			return err
		}
		if now.Head, err = lastPosition(ctx, cl); err != nil || cp.EventID == "" || cp.Position > now.Head {
			return err
		}
		now.Found, _, err = eventAt(ctx, cl, esdb.ReadAllOptions{From: esdb.Position{Commit: cp.Position, Prepare: cp.Prepare}}, &cp)
		return err
	})
	if err != nil {
		return fmt.Errorf("subscription: checking checkpoint %s on %s: %w", cp, a.client, err)
	}
	return neutral.CheckAnchor(cp, now)
}

// firstOfAll returns the log of $all: its first event (see [neutral.LogOf]).
func firstOfAll(ctx context.Context, cl *esdb.Client) (string, error) {
	id, at, err := eventAt(ctx, cl, esdb.ReadAllOptions{From: esdb.Start{}}, nil)
	return neutral.LogOf(id, at), err
}

// eventAt returns the id and commit position of the first event o reads
// from $all ("" for none), or of none unless it is at position at (its
// commit and, when set, its prepare position: the events of one append
// share their commit position), when at is set.
func eventAt(ctx context.Context, cl *esdb.Client, o esdb.ReadAllOptions, at *projector.Checkpoint) (string, uint64, error) {
	s, err := cl.ReadAll(ctx, o, 1)
	if err != nil {
		return "", 0, err
	}
	defer s.Close()
	ev, err := s.Recv()
	switch {
	case errors.Is(err, io.EOF):
		return "", 0, nil
	case err != nil:
		return "", 0, err
	}
	if r := ev.OriginalEvent(); at == nil || r.Position.Commit == at.Position && (at.Prepare == 0 || r.Position.Prepare == at.Prepare) {
		return r.EventID.String(), r.Position.Commit, nil
	}
	return "", 0, nil
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
func (a *All) FiltersEventTypes() bool { return a.opts.FiltersEventTypes() }

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
	return neutral.NewAllCatchUp("subscription", catchUp{sub: sub, checkpoint: allCheckpoint}, a.opts.Logger, from, neutral.NewHead(a.opts, a.client.ScanAll)), nil
}

// StreamOptions configure a catch-up subscription to one stream (the same
// type as kurrent.StreamOptions; see [neutral.StreamOptions]).
type StreamOptions = neutral.StreamOptions

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
	opts.Logger = neutral.OrDiscard(opts.Logger)
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
	return neutral.NewCatchUp("subscription", catchUp{sub: sub, checkpoint: streamCheckpoint}, s.opts.Logger), nil
}

func allCheckpoint(re *esdb.ResolvedEvent) *projector.Checkpoint {
	ev := re.OriginalEvent()
	return &projector.Checkpoint{Position: ev.Position.Commit, Prepare: ev.Position.Prepare, EventID: ev.EventID.String()}
}

func streamCheckpoint(re *esdb.ResolvedEvent) *projector.Checkpoint {
	return &projector.Checkpoint{Position: re.OriginalEvent().EventNumber}
}

// catchUp translates what the official client's catch-up subscription
// delivers for [neutral.NewCatchUp].
type catchUp struct {
	sub        *esdb.Subscription
	checkpoint func(*esdb.ResolvedEvent) *projector.Checkpoint
}

func (c catchUp) Recv() neutral.Message {
	m := c.sub.Recv()
	switch {
	case m.SubscriptionDropped != nil:
		return neutral.Message{Dropped: m.SubscriptionDropped.Error}
	case m.EventAppeared != nil:
		cp := c.checkpoint(m.EventAppeared)
		ev, err := Envelope(m.EventAppeared)
		if err != nil {
			return neutral.Message{EventErr: err, Checkpoint: cp}
		}
		return neutral.Message{Event: &ev, Checkpoint: cp}
	case m.CheckPointReached != nil:
		return neutral.Message{Checkpoint: &projector.Checkpoint{Position: m.CheckPointReached.Commit, Prepare: m.CheckPointReached.Prepare}}
	case m.CaughtUp != nil:
		return neutral.Message{CaughtUp: true}
	}
	return neutral.Message{} // FellBehind
}

func (c catchUp) Close() error { return c.sub.Close() }

// ScanAll implements [neutral.ScanAll]: it reads $all forwards from after
// (the start when nil), at most max records, handing each to each until it
// returns false.
func (c *Client) ScanAll(ctx context.Context, after *projector.Checkpoint, max int, each func(neutral.Record) bool) error {
	var from esdb.AllPosition = esdb.Start{}
	if after != nil {
		from = esdb.Position{Commit: after.Position, Prepare: after.Prepare}
	}
	return c.Do(ctx, func(cl *esdb.Client) error {
		s, err := cl.ReadAll(ctx, esdb.ReadAllOptions{From: from}, uint64(max))
		if err != nil {
			return err
		}
		defer s.Close()
		for {
			re, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			ev := re.OriginalEvent()
			cp := projector.Checkpoint{Position: ev.Position.Commit, Prepare: ev.Position.Prepare, EventID: ev.EventID.String()}
			if !each(neutral.Record{Checkpoint: cp, Stream: ev.StreamID, Type: ev.EventType}) {
				return nil
			}
		}
	})
}

// Head returns the commit position of the last event in $all (0: none).
func (c *Client) Head(ctx context.Context) (uint64, error) {
	var pos uint64
	err := c.Do(ctx, func(cl *esdb.Client) error {
		var err error
		pos, err = lastPosition(ctx, cl)
		return err
	})
	return pos, err
}
