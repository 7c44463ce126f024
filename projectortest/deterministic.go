package projectortest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/projector"
)

// checkDeterministic fails where the fold of a document is not a function
// of its events, which no delivery can then match, so that the proof says
// why rather than that documents differ from a fold that is not one: the
// router sends an event to another document the second time it is asked,
// or folding the documents twice, one after the other, gives a document
// another state the second time (a handler that reads the clock or draws
// a random number; a starting state whose map or slice every document
// shares, so that folding one changes another). events are decoded, in
// log order; byDoc is p.Documents(events).
func checkDeterministic[S any](p *projector.Projection[S], events []projector.Event, byDoc map[string][]projector.Event) error {
	again := p.Documents(events)
	for _, id := range slices.Sorted(maps.Keys(byDoc)) {
		sameID := func(x, y projector.Event) bool { return x.ID == y.ID }
		if a, b := byDoc[id], again[id]; !slices.EqualFunc(a, b, sameID) {
			return fmt.Errorf("%w: the router is not a function of the event: asked again, it sent document %s of %s %d events, not %d "+
				"(a router that reads the clock, draws a random number or keeps state)", ErrNotExactlyOnce, id, p.Collection(), len(b), len(a))
		}
	}
	type folded struct {
		state S
		kept  []byte // its BSON when folded: what sharing changes later
	}
	fold := func() (map[string]folded, bool) {
		out := map[string]folded{}
		for id, evs := range byDoc {
			s, err := p.Fold(evs...)
			if err != nil {
				return nil, false // a failing handler: the proof says so
			}
			kept, _ := bson.Marshal(s)
			out[id] = folded{s, kept}
		}
		return out, true
	}
	first, ok := fold()
	if !ok {
		return nil
	}
	second, _ := fold()
	for _, id := range slices.Sorted(maps.Keys(byDoc)) {
		a, b := first[id], second[id]
		same := sameState(a.state, b.state)
		if same && a.kept != nil && b.kept != nil {
			var ka, kb S
			same = bson.Unmarshal(a.kept, &ka) != nil || bson.Unmarshal(b.kept, &kb) != nil || sameState(ka, kb)
			if !same {
				a.state, b.state = ka, kb
			}
		}
		if !same {
			return fmt.Errorf("%w: the fold of %s/%s is not a function of its events: folded twice, its %d events gave %v (%+v, then %+v): "+
				"a handler reads the clock or draws a random number, or the documents share state (a map or slice of a starting state "+
				"that is not made anew for each document, so that folding one changes another)", ErrNotExactlyOnce, p.Collection(), id, len(byDoc[id]),
				firstDiff(reflect.ValueOf(a.state), reflect.ValueOf(b.state), "state"), a.state, b.state)
		}
	}
	return nil
}
