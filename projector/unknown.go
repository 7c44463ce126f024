package projector

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
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

// known reports whether the registry decodes events like ev: its type, or
// its type with its metadata's version, is registered.
func (r *Registry) known(ev Event) bool {
	_, _, ok := r.formOf(ev)
	return ok
}

// maxUnknownTypes bounds how many unknown types a runner counts by name;
// the others are counted under otherUnknownTypes.
const maxUnknownTypes = 1000

const otherUnknownTypes = "(other types)"

// unknownCounted is how many of the events it counted a runner remembers,
// so that it counts each once: a redelivery is not counted again (a new
// runner, which a process starts after an error or when the segments it
// holds change, counts afresh).
const unknownCounted = 1 << 14

// unknownTypes counts the events of types nobody registered that a runner
// was delivered, by type, each once.
type unknownTypes struct {
	mu      sync.Mutex
	counts  map[string]uint64
	counted eventsSeen
	// warned: the types said at Warn (close to a registered one, or moved
	// past by a document).
	warned map[string]bool
}

// note counts ev when nobody registered its type, and says so in the log
// the first time: at Warn when the type is close to a registered one (a
// rename, or a new version, that the registry misses); else at Info, and at
// Warn the first time an event of it went to a document that moved past it
// (results, its handling's; not only for the type's first event, which may
// have failed or been held): its stream feeds the document, which moves
// past an event of it that nothing reads (a rename the registry misses, not
// close to the old name; an event type deployed before the projector that
// knows it).
func (u *unknownTypes) note(registry *Registry, ev Event, results []Result, logger *slog.Logger) {
	if registry.known(ev) || !unknownType(Event{Type: ev.Type}) {
		return
	}
	u.mu.Lock()
	if u.counts == nil {
		u.counts = map[string]uint64{}
		u.warned = map[string]bool{}
	}
	name := ev.Type
	if _, ok := u.counts[name]; !ok && len(u.counts) >= maxUnknownTypes {
		name = otherUnknownTypes
	}
	first := false
	if u.counted.first(eventKey(ev)) {
		// Counted once; a redelivery may still be the first that a
		// document moves past (its first delivery held or failed).
		u.counts[name]++
		first = u.counts[name] == 1
	}
	near, isNear := "", false
	if first {
		near, isNear = registry.Near(ev.Type)
	}
	movedPast := -1
	if !u.warned[name] && !isNear {
		movedPast = slices.IndexFunc(results, func(r Result) bool {
			// Passed over by its document (applied: moved past); one that
			// failed it (FailUnknownTypes) has said so under its policy. A
			// duplicate says nothing: a held or parked event delivered
			// again is one too.
			return r.Document != "" && r.Outcome == Applied
		})
	}
	u.warned[name] = u.warned[name] || isNear || movedPast >= 0
	u.mu.Unlock()
	switch {
	case isNear:
		logger.Warn("an event type nobody registered, close to a registered one: a rename or a new version without its upcaster?",
			"type", ev.Type, "registered", near, "stream", ev.StreamID, "revision", ev.StreamRevision)
	case movedPast >= 0:
		r := results[movedPast]
		logger.Warn("an event type nobody registered, in a stream that feeds a document: the document moves past it "+
			"(a rename or a new version without its upcaster? FailUnknownTypes makes such events fail instead)",
			"type", ev.Type, "projection", r.Projection, "document", r.Document, "stream", ev.StreamID, "revision", ev.StreamRevision)
	case first:
		logger.Info("an event type nobody registered: projections pass over its events, or fail them (FailUnknownTypes)",
			"type", ev.Type, "stream", ev.StreamID, "revision", ev.StreamRevision)
	}
}

// eventsSeen remembers the last unknownCounted keys it was given (an
// event's, see eventKey), so that a runner counts a redelivered event once.
type eventsSeen struct {
	mu   sync.Mutex
	seen *lru.Cache[string, struct{}]
}

// first reports whether key is new, and remembers it.
func (s *eventsSeen) first(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen, _ = lru.New[string, struct{}](unknownCounted)
	}
	again, _ := s.seen.ContainsOrAdd(key, struct{}{})
	return !again
}

// eventKey names ev among the deliveries: its id, or where it is when it
// has none.
func eventKey(ev Event) string {
	if ev.ID != "" {
		return ev.ID
	}
	return ev.StreamID + "@" + strconv.FormatUint(ev.StreamRevision, 10)
}

// snapshot returns the counts so far (nil when none).
func (u *unknownTypes) snapshot() map[string]uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.counts) == 0 {
		return nil
	}
	return maps.Clone(u.counts)
}
