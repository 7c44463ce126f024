package projector

import (
	"cmp"
	"container/heap"
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/revgate/projector/projector/driver"
)

// maxRefoldStreams is how many streams a document under [RevisionMap] may
// have for a replay to fold it anew from them ([Engine.refoldMap]); one
// fed by more (a summary of the whole log) gets the replayed event applied
// to it as it is, as without streams to read.
const maxRefoldStreams = 1000

// refoldsMap reports whether a replay of parked event ev into document t
// under [RevisionMap], whose meta is meta, would fold the document anew
// from its streams rather than apply ev to it as it is: where the engine
// reads streams and folds from them, the document has later events of
// ev's stream than ev (applied as it is, ev would come after them: out of
// its stream's order, the one order a revision map keeps). It does where
// the document is fed by at most maxRefoldStreams streams. With nothing of
// its stream after it, ev applied as it is keeps every stream's order.
func (e *Engine) refoldsMap(meta driver.Meta, ev Event) bool {
	have, seen := meta.Revisions[streamKey(ev.StreamID)]
	return e.streamHistory() != nil && !e.noFolds && seen && have > ev.StreamRevision
}

// refoldMap folds document t anew, as the projection is built now, from
// the events of the streams its revision map has (meta), each up to the
// revision the map holds, with ev, the parked event replayed, in its place.
// The streams' events are merged in the order they were written (by their
// creation time, each stream's in its order), which is an order the
// strategy lets the engine apply them in. Of the events read, those the
// router sends to another document, or declines (in a stream the
// projection does not tie to t), are passed over, as when they came; so
// are the events parked against t and not replayed yet: each is t's to
// replay in its turn (replayed, it is folded in its place, as ev is now).
// One that fails is left out, parked, as in a fold anew of one stream
// ([Engine.foldAnew]). errNoRefold where the fold cannot tell which
// events t has: a stream that no longer starts at revision 0, or an event
// whose document cannot be told (its payload does not decode, its router
// fails, or it is declined in a tied stream before any of its events is
// routed); the replay then applies ev to t as it is.
func (e *Engine) refoldMap(ctx context.Context, t target, meta driver.Meta, ev Event) (any, error) {
	streams, err := e.mapStreams(ctx, t, meta, ev)
	if err != nil {
		return nil, err
	}
	parked, err := e.parkedAgainst(ctx, t, ev)
	if err != nil {
		return nil, err
	}
	var evs []Event
	for _, m := range mergeByCreation(streams) {
		if m.ours && !parked[m.ev.ID] {
			evs = append(evs, m.ev)
		}
	}
	return e.foldAnew(ctx, t, ev, evs)
}

// mapEvent is an event of a stream of a document under a revision map, as
// refoldMap reads it: ours is false for one routed to another document.
type mapEvent struct {
	ev   Event
	ours bool
}

// mapStreams reads the streams of t's revision map, each up to its
// revision, with ev in its place, and tells which events go to t (see
// refoldMap): errNoRefold where that cannot be told.
func (e *Engine) mapStreams(ctx context.Context, t target, meta driver.Meta, ev Event) ([][]mapEvent, error) {
	var streams [][]mapEvent
	for _, key := range slices.Sorted(maps.Keys(meta.Revisions)) {
		evs, err := e.mapStream(ctx, t, streamName(key), meta.Revisions[key], ev)
		if err != nil {
			return nil, err
		}
		streams = append(streams, evs)
	}
	return streams, nil
}

// mapStream reads stream, one of t's revision map, up to revision upTo,
// with ev in its place if it is of it, and tells which of its events go
// to t: those its router sends there, and, in a stream the projection
// ties, those it declines after an event routed there.
func (e *Engine) mapStream(ctx context.Context, t target, stream string, upTo uint64, ev Event) ([]mapEvent, error) {
	var evs []mapEvent
	first := ""     // the document of the stream's first routed event
	opaque := false // an event whose document cannot be told
	tied := ties(t.p, stream)
	err := e.readStream(ctx, stream, 0, func(raw Event) error {
		switch {
		case len(evs) == 0 && raw.StreamRevision != 0:
			opaque = true // truncated, or deleted and written again
			return ErrStopRead
		case raw.StreamRevision > upTo:
			return ErrStopRead
		case raw.StreamRevision == ev.StreamRevision && stream == ev.StreamID:
			// t's, as its record says: the first routed event of its
			// stream, if none came before it.
			first = cmp.Or(first, t.id)
			evs = append(evs, mapEvent{ev: ev, ours: true})
			return nil
		}
		ours, unknown := e.mapOwner(t, raw, tied, &first)
		opaque = opaque || unknown
		evs = append(evs, mapEvent{ev: raw, ours: ours})
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case opaque || len(evs) == 0:
		return nil, errNoRefold
	}
	return evs, nil
}

// mapOwner tells whether raw, an event of a stream of t's revision map,
// goes to t (ours), or whether that cannot be told (unknown). first is the
// document of the stream's first routed event, set by the first such
// event; tied: the projection ties the stream.
func (e *Engine) mapOwner(t target, raw Event, tied bool, first *string) (ours, unknown bool) {
	dec, undecoded := e.registry.Decode(raw)
	if undecoded != nil {
		return false, handlesType(t.p, dec.Payload) // its zero value stands in
	}
	id, ok, err := t.p.Route(dec)
	switch {
	case err != nil:
		return false, true
	case ok && *first == "":
		*first = id
	case !ok && tied && *first == "" && handlesType(t.p, dec.Payload):
		return false, true // declined before the tie names a document
	}
	return ok && id == t.id || !ok && tied && *first == t.id, false
}

// documentParked lists the events parked against one document, in one
// build, not replayed yet (mongostore.Store does, by an index).
type documentParked interface {
	ParkedOf(ctx context.Context, projection, collection, document string) ([]ParkedEvent, error)
}

// parkedAgainst returns the ids of the events parked against document t,
// in its build, and not replayed yet, but ev.
func (e *Engine) parkedAgainst(ctx context.Context, t target, ev Event) (map[string]bool, error) {
	var parked []ParkedEvent
	var err error
	switch p := e.parker.(type) {
	case documentParked:
		parked, err = p.ParkedOf(ctx, t.p.Name(), t.p.Collection(), t.id)
	case parkedLister:
		parked, err = p.Parked(ctx, t.p.Name())
	}
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, pe := range parked {
		if pe.Document == t.id && pe.ID != ev.ID && (pe.Collection == t.p.Collection() || pe.Collection == "") {
			ids[pe.ID] = true
		}
	}
	return ids, nil
}

// mergeByCreation merges the streams' events into one list, each stream's
// in its order, taking next the stream whose next event was written
// first (the earlier stream on a tie).
func mergeByCreation(streams [][]mapEvent) []mapEvent {
	var merged []mapEvent
	h := &heads{streams: streams}
	for i, evs := range streams {
		if len(evs) > 0 {
			h.at = append(h.at, head{stream: i})
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		top := &h.at[0]
		merged = append(merged, streams[top.stream][top.next])
		if top.next++; top.next == len(streams[top.stream]) {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	return merged
}

// head is where mergeByCreation is in one stream: its next event.
type head struct{ stream, next int }

// heads is mergeByCreation's heap of the streams' next events, the one
// written first on top.
type heads struct {
	streams [][]mapEvent
	at      []head
}

func (h *heads) Len() int { return len(h.at) }
func (h *heads) Less(i, j int) bool {
	a, b := h.streams[h.at[i].stream][h.at[i].next].ev.Created, h.streams[h.at[j].stream][h.at[j].next].ev.Created
	return a.Before(b) || a.Equal(b) && h.at[i].stream < h.at[j].stream
}
func (h *heads) Swap(i, j int) { h.at[i], h.at[j] = h.at[j], h.at[i] }
func (h *heads) Push(x any)    { h.at = append(h.at, x.(head)) }
func (h *heads) Pop() any {
	last := h.at[len(h.at)-1]
	h.at = h.at[:len(h.at)-1]
	return last
}

// streamName is the stream of a revision map's key (see streamKey).
func streamName(key string) string {
	if !strings.Contains(key, "%") {
		return key
	}
	return streamNames.Replace(key)
}

var streamNames = strings.NewReplacer("%25", "%", "%2E", ".", "%24", "$")
