// Package subscription feeds the projector from EventStoreDB through its
// official Go client (github.com/EventStore/EventStore-Client-Go/v4): it turns
// what the client delivers into [projector.Event] envelopes.
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

	"github.com/revgate/projector/projector"
)

// ErrUnresolvedLink: a link event whose target no longer exists (a deleted or
// truncated stream). The revision it stood for is a hole in its stream.
var ErrUnresolvedLink = errors.New("link to an event that no longer exists")

// Envelope returns the event the engine handles for one delivery.
func Envelope(re *esdb.ResolvedEvent) (projector.Event, error) {
	if re == nil {
		return projector.Event{}, errors.New("subscription: nil event")
	}
	if re.Event == nil {
		if re.Link != nil {
			return projector.Event{}, fmt.Errorf("subscription: %w: link %d@%s", ErrUnresolvedLink, re.Link.EventNumber, re.Link.StreamID)
		}
		return projector.Event{}, errors.New("subscription: delivery without an event")
	}
	e := re.Event
	position := e.Position.Commit
	if position == 0 && re.Commit != nil && re.Link == nil {
		position = *re.Commit
	}
	return projector.Event{
		ID:             e.EventID.String(),
		Type:           e.EventType,
		StreamID:       e.StreamID,
		StreamRevision: e.EventNumber,
		Position:       position,
		Data:           e.Data,
		Metadata:       e.UserMetadata,
		Created:        e.CreatedDate,
	}, nil
}
