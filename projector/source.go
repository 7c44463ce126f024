package projector

import (
	"context"
	"errors"
	"fmt"
)

// Source is where a [Runner]'s events come from. Package subscription has the
// EventStoreDB sources: a catch-up subscription to $all or to one stream, and
// a persistent subscription group.
type Source interface {
	// Subscribe starts delivering what comes after from; nil from means the
	// beginning. Sources that keep their own position (a persistent
	// subscription group) ignore from.
	Subscribe(ctx context.Context, from *Checkpoint) (Subscription, error)
}

// OrderedSource is a [Source] that can say it delivers its log to one
// consumer in log order (a catch-up subscription does; a persistent
// subscription group does not). A runner runs a projection whose strategy
// needs the log in order ([Strategy.NeedsOrderedSource]) only from a source
// that says so, with one worker, and a projection under the [Hold] policy
// only from a source that says so ([Check]). A source that wraps
// another passes Ordered through.
type OrderedSource interface {
	Source
	Ordered() bool
}

// TypeFilteringSource is a [Source] that can say it leaves events out by
// their type (a server-side event-type filter), so that streams reach the
// runner with holes in their revisions. A runner refuses such a source for a
// projection whose strategy needs every revision
// ([Strategy.NeedsEveryRevision]).
type TypeFilteringSource interface {
	Source
	FiltersEventTypes() bool
}

// Subscription is one open subscription of a [Source].
type Subscription interface {
	// Next blocks until the next delivery. An error ends the subscription
	// (the server dropped it, the connection broke, ctx is done): the runner
	// closes it and subscribes again from its stored checkpoint.
	Next(ctx context.Context) (Delivery, error)
	// Close ends the subscription; it is safe to call more than once.
	Close() error
}

// Delivery is one thing a subscription delivers: an event, or only news that
// the source has moved on (a filtered $all subscription's checkpoint message,
// sent while events no projection wants go by).
type Delivery struct {
	// Event is nil for a delivery that only moves the checkpoint.
	Event *Event
	// Checkpoint is where to resume once this delivery is handled; nil for
	// sources that keep their own position (persistent subscriptions).
	Checkpoint *Checkpoint
	// CaughtUp says that the source has reached the head of its log with this
	// delivery: what follows is live.
	CaughtUp bool
	// Settle, when set, is called once the event has been handled, with its
	// results: a persistent subscription acknowledges the event there, or
	// declines it per its policy. A source that settles its events owns their
	// failures: the runner goes on after a failed event instead of stopping.
	Settle func(results []Result) error
}

// Checkpoint is how far a subscription has got, in the order of its source.
type Checkpoint struct {
	// Position orders the source: the commit position in $all, or the
	// revision of the last event in a single-stream subscription.
	Position uint64
	// Prepare is the prepare position in $all (0 for a single stream).
	Prepare uint64
	// EventID is the id of the event at Position ("" for a checkpoint a
	// filtered subscription sent while other events went by), and Log what
	// identifies the log it is a position of ([AnchoredSource]): with them a
	// runner knows a checkpoint from another, or a reset, event store.
	EventID, Log string
}

// ErrForeignCheckpoint: a stored checkpoint is not a position of the
// source's log: it was taken in another or a reset event store, or it is
// past the head. Resuming from it would leave the read models silently
// behind, so the runner stops.
var ErrForeignCheckpoint = errors.New("the stored checkpoint does not belong to this event store")

// AnchoredSource is a [Source] that can tell whether a checkpoint is a
// position of its log (the $all source does). A runner checks its stored
// checkpoint with it before it resumes, and stores what identifies the log
// with every checkpoint.
type AnchoredSource interface {
	Source
	// Log identifies the log: the id of its first event ("" while it is
	// empty).
	Log(ctx context.Context) (string, error)
	// Check reports, wrapping [ErrForeignCheckpoint], a checkpoint that is
	// not a position of the log: past its head, with another event at its
	// position than cp.EventID, or taken in another log than this one
	// (cp.Log, as stored with it; a source tells another log from its own
	// whose start was removed since, as a scavenge does).
	Check(ctx context.Context, cp Checkpoint) error
}

// After reports whether c is past o in the source's order: by Position,
// then by Prepare (the events of a transaction written by the legacy TCP
// API share their commit position in $all, their prepare positions apart;
// a gRPC append gives each event its own).
func (c Checkpoint) After(o Checkpoint) bool {
	return c.Position > o.Position || c.Position == o.Position && c.Prepare > o.Prepare
}

func (c Checkpoint) String() string {
	if c.Prepare == 0 || c.Prepare == c.Position {
		return fmt.Sprint(c.Position)
	}
	return fmt.Sprintf("%d/%d", c.Position, c.Prepare)
}

// ErrorRecorder is implemented by checkpoint stores that also keep the error
// a subscription stopped with (mongostore does), for operators to see: the
// runner records it when it stops with one, and clears it once it has
// caught up again.
type ErrorRecorder interface {
	RecordError(ctx context.Context, name, message string) error
	ClearError(ctx context.Context, name string) error
}

// CheckpointStore keeps one checkpoint per subscription name: mongostore, in
// the same database as the read models.
type CheckpointStore interface {
	// LoadCheckpoint returns the stored checkpoint of name, nil if none.
	LoadCheckpoint(ctx context.Context, name string) (*Checkpoint, error)
	// SaveCheckpoint stores c as the checkpoint of name.
	SaveCheckpoint(ctx context.Context, name string, c Checkpoint) error
}
