// Package projectortest helps authors test projections: it records events the
// way an event store would (ids, stream revisions, global positions, encoded
// payloads) and delivers them the way a real subscription may: more than once,
// out of order, from many goroutines.
package projectortest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/revgate/projector/projector"
)

// Log is an in-memory, append-only event log for tests. It is safe for
// concurrent use.
type Log struct {
	mu       sync.Mutex
	registry *projector.Registry
	streams  map[string]uint64 // next revision
	position uint64
	clock    func() time.Time
}

// NewLog returns an empty log that encodes payloads with registry.
func NewLog(registry *projector.Registry) *Log {
	return &Log{registry: registry, streams: map[string]uint64{}, clock: time.Now}
}

// Append records payloads at the end of stream and returns them as the engine
// receives them: encoded, decoded, with ids, revisions and positions. It fails
// only for a payload whose type is not registered, and then appends none of
// them, as an event store appends a batch.
//
// A payload that is a [projector.Event] is an event as stored, in an older
// form maybe: its Type and Data (and its Metadata, when it has some) are
// recorded as they are, and it comes back decoded by the registry, through
// its upcasters ([projector.Upcast]), or undecoded when it does not decode
// (an upcaster fails) or nobody registered its type:
//
//	log.Append("card-1", projector.Event{Type: "CardMoved", Data: []byte(`{"to": "Done"}`)})
func (l *Log) Append(stream string, payloads ...any) ([]projector.Event, error) {
	return l.AppendWithMetadata(stream, nil, payloads...)
}

// AppendWithMetadata is [Log.Append] with the same metadata on every event.
func (l *Log) AppendWithMetadata(stream string, metadata []byte, payloads ...any) ([]projector.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]projector.Event, 0, len(payloads))
	for _, p := range payloads {
		ev, err := encode(l.registry, p, metadata)
		if err != nil {
			return nil, err // nothing appended: as a store appends, all or none
		}
		out = append(out, ev)
	}
	for i, ev := range out {
		l.position++
		ev.ID, ev.StreamID, ev.StreamRevision, ev.Position, ev.Created = uuid.NewString(), stream, l.streams[stream], l.position, l.clock()
		l.streams[stream]++
		if ev.Payload == nil {
			ev, _ = l.registry.Decode(ev) // an event as stored: undecoded when it does not decode
		}
		out[i] = ev
	}
	return out, nil
}

// encode returns payload p as an event to append: its registered type name
// and JSON, with metadata; or, for a [projector.Event] (an event as stored,
// in an older form maybe), its type, data and metadata (its own, else
// metadata), undecoded.
func encode(registry *projector.Registry, p any, metadata []byte) (projector.Event, error) {
	if ev, ok := p.(projector.Event); ok {
		if ev.Metadata == nil {
			ev.Metadata = metadata
		}
		return projector.Event{Type: ev.Type, Data: ev.Data, Metadata: ev.Metadata}, nil
	}
	name, data, err := registry.Encode(p)
	if err != nil {
		return projector.Event{}, err
	}
	return projector.Event{Type: name, Data: data, Metadata: metadata, Payload: p}, nil
}

// MustAppend is [Log.Append] for tests: it fails tb on error.
func (l *Log) MustAppend(tb interface {
	Helper()
	Fatalf(string, ...any)
}, stream string, payloads ...any) []projector.Event {
	tb.Helper()
	evs, err := l.Append(stream, payloads...)
	if err != nil {
		tb.Fatalf("projectortest: append to %s: %v", stream, err)
	}
	return evs
}

// Redeliver returns events with each delivered between 1 and maxTimes times,
// the copies placed at random later points, so that old events arrive after
// newer ones; the first delivery of each keeps its order.
func Redeliver(r *rand.Rand, events []projector.Event, maxTimes int) []projector.Event {
	out := make([]projector.Event, 0, len(events)*maxTimes)
	out = append(out, events...)
	for _, e := range events {
		for range r.IntN(maxTimes) {
			// A copy goes anywhere after the original's first delivery.
			at := indexOf(out, e.ID) + 1 + r.IntN(len(out)-indexOf(out, e.ID))
			out = append(out[:at], append([]projector.Event{e}, out[at:]...)...)
		}
	}
	return out
}

func indexOf(events []projector.Event, id string) int {
	for i, e := range events {
		if e.ID == id {
			return i
		}
	}
	panic(fmt.Sprintf("projectortest: event %s not found", id))
}

// Shuffled returns a copy of events in random order. Hand them to an
// engine from concurrent workers, or put back each one that fails with
// [projector.ErrPredecessorMissing] (as a subscription delivers it again),
// as [Prove] does: one goroutine handing them in this order waits for each
// event's predecessor, which is behind it, until the gate gives up.
func Shuffled(r *rand.Rand, events []projector.Event) []projector.Event {
	out := append([]projector.Event(nil), events...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
