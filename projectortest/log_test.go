package projectortest_test

import (
	"math/rand/v2"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

type tick struct{ N int }

func TestLog_assigns_revisions_per_stream_and_positions_globally(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[tick](reg, "Tick")
	log := projectortest.NewLog(reg)
	a := log.MustAppend(t, "a", tick{1}, tick{2})
	b := log.MustAppend(t, "b", tick{3})
	a2 := log.MustAppend(t, "a", tick{4})
	if a[0].StreamRevision != 0 || a[1].StreamRevision != 1 || b[0].StreamRevision != 0 || a2[0].StreamRevision != 2 {
		t.Fatalf("revisions %d %d %d %d", a[0].StreamRevision, a[1].StreamRevision, b[0].StreamRevision, a2[0].StreamRevision)
	}
	if a[0].Position != 1 || a[1].Position != 2 || b[0].Position != 3 || a2[0].Position != 4 {
		t.Fatal("positions are not global and increasing")
	}
	decoded, err := reg.Decode(projector.Event{Type: a[1].Type, Data: a[1].Data})
	if err != nil || decoded.Payload != (tick{2}) || a[1].Payload != (tick{2}) {
		t.Fatalf("payload %v, decoded %v, err %v", a[1].Payload, decoded.Payload, err)
	}
	if _, err := log.Append("a", struct{}{}); err == nil {
		t.Fatal("an unregistered payload was appended")
	}
	// A batch with one payload that cannot be appended appends none:
	// the next event takes the revision and position the batch would have.
	if _, err := log.Append("a", tick{5}, struct{}{}); err == nil {
		t.Fatal("a batch with an unregistered payload was appended")
	}
	next := log.MustAppend(t, "a", tick{6})
	if next[0].StreamRevision != 3 || next[0].Position != 5 {
		t.Fatalf("after a refused batch: revision %d, position %d; want 3 and 5 (nothing of it appended)", next[0].StreamRevision, next[0].Position)
	}
}

func TestRedeliver_delivers_each_event_1_to_n_times_copies_after_the_original(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[tick](reg, "Tick")
	log := projectortest.NewLog(reg)
	var events []projector.Event
	for i := range 40 {
		events = append(events, log.MustAppend(t, "s", tick{i})...)
	}
	r := rand.New(rand.NewPCG(5, 5))
	seenMore := false
	for range 50 {
		out := projectortest.Redeliver(r, events, 3)
		count := map[string]int{}
		lastFirst := -1
		for i, e := range out {
			count[e.ID]++
			if count[e.ID] == 1 {
				// First deliveries keep the log's order.
				if int(e.StreamRevision) != lastFirst+1 {
					t.Fatalf("first delivery of revision %d at %d after revision %d", e.StreamRevision, i, lastFirst)
				}
				lastFirst = int(e.StreamRevision)
			}
		}
		for _, e := range events {
			if n := count[e.ID]; n < 1 || n > 3 {
				t.Fatalf("event %d delivered %d times", e.StreamRevision, n)
			} else if n > 1 {
				seenMore = true
			}
		}
	}
	if !seenMore {
		t.Fatal("no event was ever delivered twice")
	}
}
