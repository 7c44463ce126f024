package kurrent

import (
	"errors"
	"fmt"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
)

// ErrUnresolvedLink: a link event whose target no longer exists (a deleted or
// truncated stream). The revision it stood for is a hole in its stream. It
// is the same error as subscription.ErrUnresolvedLink.
var ErrUnresolvedLink = neutral.ErrUnresolvedLink

// Envelope returns the event the engine handles for one delivery: an event
// read through a link is its original (its own stream, revision and
// position); a link whose event is gone is an error wrapping
// [ErrUnresolvedLink].
func Envelope(re *kurrentdb.ResolvedEvent) (projector.Event, error) {
	if re == nil {
		return projector.Event{}, errors.New("kurrent: nil event")
	}
	ev, err := neutral.Envelope(recorded(re.Event), recorded(re.Link), re.Commit)
	if err != nil {
		return projector.Event{}, fmt.Errorf("kurrent: %w", err)
	}
	return ev, nil
}

// recorded is e in the neutral package's terms (nil for nil).
func recorded(e *kurrentdb.RecordedEvent) *neutral.Recorded {
	if e == nil {
		return nil
	}
	return &neutral.Recorded{
		ID: e.EventID, Type: e.EventType, Stream: e.StreamID, Revision: e.EventNumber,
		Commit: e.Position.Commit, Created: e.CreatedDate, Data: e.Data, Metadata: e.UserMetadata,
	}
}
