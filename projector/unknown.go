package projector

import (
	"fmt"
	"strings"
)

// FailUnknownTypes makes an event of a type that nobody registered fail in
// this projection, under its failure policy ([Block], [Hold], [Park],
// [Skip]), with an error wrapping [ErrUndecodable]: for a projection that
// routes its streams whole, where such an event is most likely one of its
// own under a name the registry does not know (a rename, a new version).
// By default such an event is passed over, as an event of a type the
// projection has no handler for: under the revision gate its document
// still moves past it. Only the events the projection's router routes are
// its concern, and the node's own types (starting with "$") are never
// unknown. An event an upcaster dropped ([DropEvent]) is not unknown.
func (p *Projection[S]) FailUnknownTypes() *Projection[S] {
	p.failUnknown = true
	return p
}

// unknownType reports whether ev, decoded, is of a type nobody registered:
// it has no payload, and is not the node's own.
func unknownType(ev Event) bool {
	return ev.Payload == nil && !strings.HasPrefix(ev.Type, "$")
}

// unknownIn is the failure of ev, of a type nobody registered, in
// projection name, which fails such types.
func unknownIn(name string, ev Event) error {
	return fmt.Errorf("%w: event type %q is not in the event registry (projection %q fails unknown types)", ErrUndecodable, ev.Type, name)
}
