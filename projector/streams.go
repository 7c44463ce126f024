package projector

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// StreamReader tells the engine what its event store still holds of a
// stream. A real node can present holes in a stream's revisions: events
// truncated by the stream's $maxCount, $maxAge or $tb (gone from $all too
// once the node scavenges), a stream deleted and written again (it goes on
// from its old revision), a tombstone. With a StreamReader ([WithStreamReader])
// the revision gate tells a predecessor that is late from one that is gone:
// when an event waits for a predecessor, the engine asks for the stream's
// first readable revision once, and a predecessor below it is a hole, which
// goes through the failure policy at once ([ErrRevisionsGone]) instead of
// being waited for until the retries run out.
type StreamReader interface {
	// FirstRevision returns the revision of the first event a read of stream
	// returns now: 0 for a stream that has all its events, more once earlier
	// ones were truncated or the stream was deleted and written again.
	// ErrStreamDeleted when it has none (deleted, tombstoned, truncated
	// entirely, or never written).
	FirstRevision(ctx context.Context, stream string) (uint64, error)
}

var (
	// ErrStreamDeleted: the stream has no events left to read.
	ErrStreamDeleted = errors.New("stream deleted")
	// ErrRevisionsGone: a document's stream no longer holds the events
	// between the document's revision and the event's (truncated, or
	// deleted). They cannot be applied: under [Block] the event fails for
	// good with this error, which names them; under [Skip] and [Park] the
	// event applies on the document as it is, and under [Park] the hole is
	// recorded. A rebuild folds the stream as it is now.
	ErrRevisionsGone = errors.New("events gone from their stream")
)

// WithStreamReader lets the gate ask the event store about holes in a
// stream (see [StreamReader]). Without it, a predecessor that is gone is
// waited for like a late one, and the event fails when the retries run out.
func WithStreamReader(r StreamReader) Option { return func(e *Engine) { e.streams = r } }

// hole is what the event store says of the events between a document and
// an event that waits for its predecessor.
type hole struct {
	// gone: the predecessor is no longer in the stream: the revisions from
	// (the document's next) to the event's predecessor cannot come.
	gone     bool
	from, to uint64
	// deleted: the stream has nothing left to read.
	deleted bool
}

// err is the hole as the error of the event that found it.
func (h hole) err(stream string) error {
	why := "truncated by the stream's $maxCount, $maxAge or $tb, or deleted"
	if h.deleted {
		why = "the stream is deleted"
	}
	if h.from == h.to {
		return fmt.Errorf("%w: revision %d of stream %q (%s)", ErrRevisionsGone, h.from, stream, why)
	}
	return fmt.Errorf("%w: revisions %d to %d of stream %q (%s)", ErrRevisionsGone, h.from, h.to, stream, why)
}

// holeBefore asks the event store whether the revisions between a document
// (found at revision rev, or not found) and ev are gone. Without a
// [StreamReader], or for an event at revision 0, nothing is known to be
// gone.
func (e *Engine) holeBefore(ctx context.Context, ev Event, found bool, rev uint64) (hole, error) {
	n := ev.StreamRevision
	if e.streams == nil || n == 0 {
		return hole{}, nil
	}
	first, err := e.streams.FirstRevision(ctx, ev.StreamID)
	deleted := errors.Is(err, ErrStreamDeleted)
	switch {
	case deleted:
		first = math.MaxUint64
	case err != nil:
		return hole{}, fmt.Errorf("reading where stream %q starts: %w", ev.StreamID, err)
	}
	if n-1 >= first {
		return hole{}, nil // the predecessor is there to read: it is late
	}
	from := uint64(0)
	if found {
		from = rev + 1
	}
	return hole{gone: true, from: from, to: n - 1, deleted: deleted}, nil
}

// startsOver reports whether a document at revision rev belongs to a stream
// that was deleted (or truncated past it) and written again: its stream no
// longer holds its events, so a creation event starts it over instead of
// being a second creation.
func (e *Engine) startsOver(ctx context.Context, stream string, rev uint64) (bool, error) {
	if e.streams == nil {
		return false, nil
	}
	first, err := e.streams.FirstRevision(ctx, stream)
	switch {
	case errors.Is(err, ErrStreamDeleted):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading where stream %q starts: %w", stream, err)
	}
	return rev < first, nil
}
