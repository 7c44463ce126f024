package neutral

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/revgate/projector/projector"
)

// ErrUnresolvedLink: a link event whose target no longer exists (a deleted or
// truncated stream). The revision it stood for is a hole in its stream.
var ErrUnresolvedLink = errors.New("link to an event that no longer exists")

// Recorded is a recorded event as both clients read it (their
// RecordedEvent, field for field).
type Recorded struct {
	ID       uuid.UUID
	Type     string
	Stream   string
	Revision uint64
	// Commit is the event's commit position in $all (0 when the server did
	// not send it with the event).
	Commit   uint64
	Prepare  uint64
	Created  time.Time
	Data     []byte
	Metadata []byte
}

// Envelope returns the event the engine handles for one delivery: event,
// read through link when link is set. The engine gates on the stream an
// event was appended to, so an event read through a link is seen as its
// original (its own stream, revision and position). A link whose event is
// gone (event nil) is an error wrapping [ErrUnresolvedLink]. commit is the
// commit position the server sent with the delivery, if any: it stands in
// for the event's own when that is missing and the event was not read
// through a link.
func Envelope(event, link *Recorded, commit *uint64) (projector.Event, error) {
	if event == nil {
		if link != nil {
			return projector.Event{}, fmt.Errorf("%w: link %d@%s", ErrUnresolvedLink, link.Revision, link.Stream)
		}
		return projector.Event{}, errors.New("delivery without an event")
	}
	position, prepare := event.Commit, event.Prepare
	if position == 0 && commit != nil && link == nil {
		position, prepare = *commit, 0
	}
	if position == math.MaxUint64 {
		position, prepare = 0, 0 // a node's read of a stream gives none (-1): unknown
	}
	if prepare == math.MaxUint64 || prepare > position {
		prepare = 0 // not told: taken as the commit position
	}
	return projector.Event{
		ID:             event.ID.String(),
		Type:           event.Type,
		StreamID:       event.Stream,
		StreamRevision: event.Revision,
		Position:       position,
		Prepare:        prepare,
		Data:           event.Data,
		Metadata:       event.Metadata,
		Created:        event.Created,
	}, nil
}
