package projector

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/revgate/projector/projector/driver"
)

// A strategy's tally says and records, event after event, what its check
// and record say and give one event at a time, for a document read with
// something already in it or not at all, through redeliveries, streams
// out of step and events older than a window.
func TestTally_folds_as_check_and_record_do_one_event_at_a_time(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, k := range []keeper{revisionMap{}, handledIDs{window: 7}, handledIDs{window: 1}, globalPosition{}} {
		for round := range 200 {
			var events []Event
			revs := map[string]uint64{}
			for i := range 40 {
				stream := fmt.Sprintf("s%d", r.IntN(4))
				ev := Event{ID: fmt.Sprintf("e%d", i), StreamID: stream, StreamRevision: revs[stream], Position: uint64(10 * (i + 1))}
				revs[stream]++
				events = append(events, ev)
				for r.IntN(3) == 0 { // a redelivery of an earlier event
					events = append(events, events[r.IntN(len(events))])
				}
			}
			r.Shuffle(len(events)/4, func(i, j int) { events[i], events[j] = events[j], events[i] })
			read := func() stored {
				if round%2 == 0 {
					return stored{}
				}
				// a document that holds something already
				return stored{found: true, meta: driver.Meta{Version: 3, Revisions: map[string]uint64{"s0": 0, "s9": 4},
					Position: 15, Handled: []driver.Handled{{ID: "e0", Position: 10}, {ID: "old", Position: 5}}, Evicted: 3}}
			}
			start := read()
			plain, fast := &plainTally{k: k, d: start}, tallyOf(k, start)
			for n, ev := range events {
				pv, perr := plain.check(ev, false)
				fv, ferr := fast.check(ev, false)
				if pv != fv || (perr == nil) != (ferr == nil) {
					t.Fatalf("%s, round %d, event %d (%+v): check says %v %v, tally %v %v", k, round, n, ev, pv, perr, fv, ferr)
				}
				if perr == nil && (pv == apply || pv == create) {
					plain.record(ev)
					fast.record(ev)
				}
			}
			if got, want := fast.meta(), plain.meta(); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, round %d: tally's meta %+v, check and record's %+v", k, round, got, want)
			}
			if !reflect.DeepEqual(start, read()) {
				t.Fatalf("%s, round %d: the document as read changed: %+v", k, round, start)
			}
		}
	}
}
