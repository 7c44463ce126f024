package projector

import (
	"maps"

	"github.com/revgate/projector/projector/driver"
)

// RevisionMap gates each source stream on its own: the document holds the
// last revision applied of every stream that feeds it, so a document fed by
// several streams (a per-client summary of the client's carts) gets each
// stream's events exactly once and in order. Every event of a feeding stream
// must be routed to the document (handled or not), as with the gate.
func RevisionMap() Strategy { return Strategy{revisionMap{}} }

type revisionMap struct{ versioned }

func (revisionMap) String() string { return "per-stream revision map" }

// check: the revision gate per stream, on the revisions in the meta.
func (revisionMap) check(d stored, ev Event, _ bool) (verdict, error) {
	have, seen := d.meta.Revisions[streamKey(ev.StreamID)]
	switch n := ev.StreamRevision; {
	case seen && have >= n:
		return duplicate, nil
	case !seen && n > 0, seen && have < n-1:
		return wait, nil // the stream's previous event first
	}
	return apply, nil
}

// record: the stream's revision, in a copy of the map.
func (revisionMap) record(d stored, ev Event) stored {
	revs := make(map[string]uint64, len(d.meta.Revisions)+1)
	maps.Copy(revs, d.meta.Revisions)
	revs[streamKey(ev.StreamID)] = ev.StreamRevision
	d.meta.Revisions = revs
	return d
}

func (revisionMap) needs(store driver.Store) error {
	return needGuarded(store, "per-stream revision map")
}

func (revisionMap) everyRevision() bool { return true }
func (revisionMap) orderedSource() bool { return false }

// tally: the map copied once, then set in place.
func (r revisionMap) tally(d stored) tally { return &revisionTally{d: d} }

type revisionTally struct {
	d     stored
	owned bool // d.meta.Revisions is the tally's own copy
}

func (t *revisionTally) check(ev Event, creates bool) (verdict, error) {
	return revisionMap{}.check(t.d, ev, creates)
}

func (t *revisionTally) record(ev Event) {
	if !t.owned {
		t.d = revisionMap{}.record(t.d, ev)
		t.owned = true
	} else {
		t.d.meta.Revisions[streamKey(ev.StreamID)] = ev.StreamRevision
	}
	t.d.found = true
}

func (t *revisionTally) meta() driver.Meta { return t.d.meta }
