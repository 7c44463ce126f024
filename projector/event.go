package projector

import (
	"reflect"
	"strings"
	"time"
)

// Event is one recorded event as the engine sees it: where it sits in its stream
// and in the global log, its raw payload, and, once decoded, its Go value.
type Event struct {
	// ID is the event's unique id (a UUID in EventStoreDB).
	ID string
	// Type is the event type name, the key of the [Registry].
	Type string
	// StreamID is the stream the event was appended to.
	StreamID string
	// StreamRevision is the event's position within its stream, from 0.
	StreamRevision uint64
	// Position is the event's commit position in the global log ($all); 0 when
	// the source does not tell it (an event read from its stream: see
	// [OnEvent]).
	Position uint64
	// Prepare is its prepare position in $all: Position itself for an event
	// appended by gRPC; below it for the events of a transaction written
	// by the legacy TCP API, which share their commit position (0: not
	// told, taken as Position).
	Prepare uint64
	// Data is the payload as stored (JSON for registered types).
	Data []byte
	// Metadata is the event's metadata as stored.
	Metadata []byte
	// Created is when the event store recorded the event.
	Created time.Time
	// Payload is Data decoded into its registered Go type (an older form
	// upcast to it: see [Upcast]); nil until decoded and for types the
	// registry does not know. An event an upcaster dropped has a payload of
	// an unexported type that no projection handles.
	Payload any

	// undecodable is why [Registry.Decode] could not decode the event, and
	// the type it is registered as (nil when it could, or was not asked):
	// [Projection.Apply] fails such an event in a projection that handles
	// that type, as the engine does, instead of passing over it as over a
	// type nobody registered.
	undecodable *decodeFailure
}

// decodeFailure is why an event of registered type t did not decode.
type decodeFailure struct {
	err error
	t   reflect.Type
}

// IDFunc picks the document an event feeds in a projection; ok is false when
// the projection does not want the event at all.
type IDFunc func(Event) (id string, ok bool)

// RouteFunc picks the document an event feeds, as an [IDFunc] does, and can
// fail: an error says that the event is the projection's but that it cannot
// tell which document it feeds, say because a metadata field it routes by is
// missing or mangled. Such an event is not dropped as unwanted: it fails
// permanently in the projection, under its [FailurePolicy] (blocked, skipped
// or parked), and the error wraps [ErrUnroutable]. Use it with [NewRouted].
type RouteFunc func(Event) (id string, ok bool, err error)

// StreamSuffix routes every event of the streams named prefix+id to document
// id: the EventStoreDB convention of a category prefix ("shopping_cart-") and
// the entity id. Events of other streams are not wanted.
func StreamSuffix(prefix string) IDFunc {
	return func(e Event) (string, bool) {
		id, ok := strings.CutPrefix(e.StreamID, prefix)
		if !ok || id == "" {
			return "", false
		}
		return id, true
	}
}
