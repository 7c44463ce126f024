// Package subscription feeds the projector from EventStoreDB through its
// official Go client (github.com/EventStore/EventStore-Client-Go/v4, archived
// by its maintainers in 2025): it turns what the client delivers into
// [projector.Event] envelopes. Package
// [github.com/revgate/projector/kurrent] is its twin on the maintained
// KurrentDB client; what does not depend on the client (options, the
// settling of persistent deliveries, the connection that outlives an outage)
// is shared with it through package
// [github.com/revgate/projector/internal/neutral].
//
// The engine gates on the stream an event was appended to, so an event read
// through a link (from a $ce- or $et- projection stream, or a filtered
// persistent subscription) is seen as its original: its own stream, revision
// and position, not the link's. A link whose event was deleted or truncated
// resolves to nothing: [Envelope] reports it with [ErrUnresolvedLink] instead
// of handing the engine an empty event.
package subscription

import (
	"errors"
	"fmt"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
)

// ErrUnresolvedLink: a link event whose target no longer exists (a deleted or
// truncated stream). The revision it stood for is a hole in its stream. It
// is the same error as kurrent.ErrUnresolvedLink.
var ErrUnresolvedLink = neutral.ErrUnresolvedLink

// Envelope returns the event the engine handles for one delivery.
func Envelope(re *esdb.ResolvedEvent) (projector.Event, error) {
	if re == nil {
		return projector.Event{}, errors.New("subscription: nil event")
	}
	ev, err := neutral.Envelope(recorded(re.Event), recorded(re.Link), re.Commit)
	if err != nil {
		return projector.Event{}, fmt.Errorf("subscription: %w", err)
	}
	return ev, nil
}

// recorded is e in the neutral package's terms (nil for nil).
func recorded(e *esdb.RecordedEvent) *neutral.Recorded {
	if e == nil {
		return nil
	}
	return &neutral.Recorded{
		ID: e.EventID, Type: e.EventType, Stream: e.StreamID, Revision: e.EventNumber,
		Commit: e.Position.Commit, Created: e.CreatedDate, Data: e.Data, Metadata: e.UserMetadata,
	}
}
