// Package subscription feeds the projector from EventStoreDB or KurrentDB:
// it holds the sources (a catch-up subscription to $all ([All]) or to one
// stream ([Stream]), a consumer of a persistent subscription group
// ([Persistent])) and the resilient [Client] they read through, written
// once over a narrow driver that each official client implements in an
// adapter package. [github.com/revgate/projector/kurrent].Dial returns a
// Client on the maintained KurrentDB client (kurrentdb://, kurrent://,
// kdb:// and esdb://), [github.com/revgate/projector/subscription/esdbv4].Dial
// one on the archived EventStore-Client-Go v4 (esdb://). This package
// imports neither client.
//
// The engine gates on the stream an event was appended to, so an event read
// through a link (from a $ce- or $et- projection stream, or a filtered
// persistent subscription) is seen as its original: its own stream, revision
// and position, not the link's. A link whose event was deleted or truncated
// resolves to nothing: the sources report it with [ErrUnresolvedLink]
// instead of handing the engine an empty event.
package subscription

import "github.com/revgate/projector/internal/neutral"

// ErrUnresolvedLink: a link event whose target no longer exists (a deleted or
// truncated stream). The revision it stood for is a hole in its stream.
var ErrUnresolvedLink = neutral.ErrUnresolvedLink
