package subscription

import (
	"context"
	"errors"
	"fmt"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
)

// AllOptions configure a catch-up subscription to $all. Its fields:
// StreamPrefixes or StreamRegex
// (which streams, filtered on the server), EventTypePrefixes or
// EventTypeRegex (which event types), MaxSearchWindow and
// CheckpointInterval (how often the server sends checkpoints),
// QuietCheckpoint, ResolveLinks and Logger.
type AllOptions = neutral.AllOptions

// All is a catch-up subscription to $all, as a [projector.Source]: it reads
// from the checkpoint to the head, then follows live. Its checkpoints are
// positions in $all.
type All struct {
	client *Client
	opts   AllOptions
	filter neutral.Filter
}

var (
	_ projector.OrderedSource       = (*All)(nil)
	_ projector.TypeFilteringSource = (*All)(nil)
	_ projector.AnchoredSource      = (*All)(nil)
	_ projector.StreamHistory       = (*All)(nil)
)

// ReadStream implements [projector.StreamHistory] with the source's client
// ([Client.ReadStream]): [projector.NewRunner] gives it to an engine made
// without a stream reader, which then folds each document's stream at once
// in a catch-up, and knows holes from events still to come.
func (a *All) ReadStream(ctx context.Context, stream string, from uint64, each func(projector.Event) error) error {
	return a.client.ReadStream(ctx, stream, from, each)
}

// FirstRevision implements [projector.StreamReader] ([Client.FirstRevision]).
func (a *All) FirstRevision(ctx context.Context, stream string) (uint64, error) {
	return a.client.FirstRevision(ctx, stream)
}

// NewAll returns a $all source on client.
func NewAll(client *Client, opts AllOptions) (*All, error) {
	if client == nil {
		return nil, errors.New("subscription: no client")
	}
	f, err := opts.ServerFilter()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", client.pkg, err)
	}
	opts.Logger = neutral.OrDiscard(opts.Logger)
	return &All{client: client, opts: opts, filter: f}, nil
}

// Log implements [projector.AnchoredSource]: the id of the first event of
// $all, system events included, and its position (see [neutral.LogOf]; ""
// while it is empty). An event store that was reset or replaced starts with
// another one.
func (a *All) Log(ctx context.Context) (string, error) {
	var log string
	err := a.client.do(ctx, func(s neutral.Session) error {
		var err error
		log, err = firstOfAll(ctx, s)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("%s: the start of $all on %s: %w", a.client.pkg, a.client, err)
	}
	return log, nil
}

// Check implements [projector.AnchoredSource] by [neutral.CheckAnchor].
func (a *All) Check(ctx context.Context, cp projector.Checkpoint) error {
	var now neutral.Anchor
	err := a.client.do(ctx, func(s neutral.Session) error {
		var err error
		if now.Log, err = firstOfAll(ctx, s); err != nil {
			return err
		}
		if now.Head, err = lastPosition(ctx, s); err != nil || cp.EventID == "" || cp.Position > now.Head {
			return err
		}
		now.Found, _, err = eventAt(ctx, s, &cp)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: checking checkpoint %s on %s: %w", a.client.pkg, cp, a.client, err)
	}
	return neutral.CheckAnchor(cp, now)
}

// firstOfAll returns the log of $all: its first event (see [neutral.LogOf]).
func firstOfAll(ctx context.Context, s neutral.Session) (string, error) {
	id, at, err := eventAt(ctx, s, nil)
	return neutral.LogOf(id, at), err
}

// eventAt returns the id and commit position of the first event of $all
// ("" for none) or, when at is set, of the first event read from at, or of
// none unless it is at position at (its commit and, when set, its prepare
// position: the events of one append share their commit position).
func eventAt(ctx context.Context, s neutral.Session, at *projector.Checkpoint) (string, uint64, error) {
	first, err := firstRecord(s.ReadAll(ctx, at, false, 1))
	if err != nil || first == nil {
		return "", 0, err
	}
	if r := first.Original(); at == nil || r.Commit == at.Position && (at.Prepare == 0 || r.Prepare == at.Prepare) {
		return r.ID.String(), r.Commit, nil
	}
	return "", 0, nil
}

// lastPosition returns the commit position of the last event in $all (0:
// none).
func lastPosition(ctx context.Context, s neutral.Session) (uint64, error) {
	last, err := firstRecord(s.ReadAll(ctx, nil, true, 1))
	if err != nil || last == nil {
		return 0, err
	}
	return last.Original().Commit, nil
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
	o := neutral.AllSubscription{
		From: from, Filter: a.filter, ResolveLinks: a.opts.ResolveLinks,
		MaxSearchWindow: a.opts.MaxSearchWindow, CheckpointInterval: a.opts.CheckpointInterval,
	}
	sub, err := call(ctx, a.client, func(s neutral.Session) (neutral.Feed, error) { return s.SubscribeAll(ctx, o) })
	if err != nil {
		return nil, fmt.Errorf("%s: $all on %s: %w", a.client.pkg, a.client, err)
	}
	feed := catchUp{client: a.client, feed: sub, checkpoint: allCheckpoint}
	return neutral.NewAllCatchUp(a.client.pkg, feed, a.opts.Logger, from, neutral.NewHead(a.opts, a.client.scanAll)), nil
}

// StreamOptions configure a catch-up subscription to one stream: its fields
// are ResolveLinks and Logger.
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
	var start *uint64
	if from != nil {
		start = &from.Position
	}
	sub, err := call(ctx, s.client, func(ss neutral.Session) (neutral.Feed, error) {
		return ss.SubscribeStream(ctx, s.stream, start, s.opts.ResolveLinks)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: stream %q on %s: %w", s.client.pkg, s.stream, s.client, err)
	}
	return neutral.NewCatchUp(s.client.pkg, catchUp{client: s.client, feed: sub, checkpoint: streamCheckpoint}, s.opts.Logger), nil
}

// allCheckpoint is the checkpoint after re in $all. id is the id of re's
// event as its envelope spelled it ("" when it has none), which is the
// checkpoint's too when re was not read through a link: the id is then
// written out once an event, not twice.
func allCheckpoint(re *neutral.Resolved, id string) *projector.Checkpoint {
	ev := re.Original()
	if re.Link != nil || id == "" {
		id = ev.ID.String()
	}
	return &projector.Checkpoint{Position: ev.Commit, Prepare: ev.Prepare, EventID: id}
}

func streamCheckpoint(re *neutral.Resolved, _ string) *projector.Checkpoint {
	return &projector.Checkpoint{Position: re.Original().Revision}
}

// catchUp translates what a driver's catch-up subscription delivers for
// [neutral.NewCatchUp].
type catchUp struct {
	client     *Client
	feed       neutral.Feed
	checkpoint func(re *neutral.Resolved, id string) *projector.Checkpoint
}

func (c catchUp) Recv() neutral.Message {
	m := c.feed.Recv()
	switch {
	case m.Dropped != nil:
		return neutral.Message{Dropped: m.Dropped}
	case m.Event != nil:
		ev, err := c.client.envelope(m.Event)
		cp := c.checkpoint(m.Event, ev.ID)
		if err != nil {
			return neutral.Message{EventErr: err, Checkpoint: cp}
		}
		return neutral.Message{Event: &ev, Checkpoint: cp}
	case m.Checkpoint != nil:
		return neutral.Message{Checkpoint: m.Checkpoint}
	case m.CaughtUp:
		return neutral.Message{CaughtUp: true}
	}
	return neutral.Message{} // FellBehind
}

func (c catchUp) Close() error { return c.feed.Close() }
