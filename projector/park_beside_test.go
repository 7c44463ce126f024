package projector_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// A tied stream begins, live, with an event its router declines (a card
// moved, before the card names its board): nothing says where it goes, so
// its delivery passes it over. The stream's next event names the board, and
// the board moves past the first under park, which parks it then: the
// runner counts it as parked later (the metric of parked events and its
// alert add those), once. An event parked when it came (its router names
// no board: an empty id), parked again then with the board that moved past
// it, stays counted once, as parked. Either way each delivery has one
// outcome, which the in-flight count of a group's consumer relies on.
func TestPark_an_event_parked_beside_the_one_handled_counts_once(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	for _, c := range []struct {
		name, typ, data     string
		parked, parkedLater uint64
	}{
		{"declined when it came", "CardMoved", `{"CardID": "q", "Column": "doing"}`, 0, 1},
		{"parked when it came", "CardAdded", `{"CardID": "q", "BoardID": "", "Title": "t"}`, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			server := esdbtest.New(t)
			client := dialESDB(t, server)
			s := newStore(t)
			e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(patient()),
				projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(client))
			if err != nil {
				t.Fatal(err)
			}
			src, err := subscription.NewAll(client, subscription.AllOptions{StreamPrefixes: []string{cardStreams}})
			if err != nil {
				t.Fatal(err)
			}
			runner := sourcetest.NewRunner(t, "cards", e, src, s)
			x := sourcetest.Start(t, runner)
			app := appender{client}
			put := func(typ, data string) uint64 {
				pos, err := app.Append(ctx, cardStreams+"q", sourcetest.AnyRevision, sourcetest.Event{ID: uuid.New(), Type: typ, Data: []byte(data)})
				if err != nil {
					t.Fatal(err)
				}
				return pos
			}
			at := func(pos uint64) func(projector.RunnerStats) bool {
				return func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position >= pos }
			}
			x.WaitFor(t, "the first event", at(put(c.typ, c.data)))
			x.WaitFor(t, "the second event", at(put("CardAdded", `{"CardID": "q", "BoardID": "b1", "Title": "t"}`)))
			if err := x.Stop(); err != nil {
				t.Fatal(err)
			}
			parked, err := s.Parked(ctx, "kanban_boards")
			if err != nil || len(parked) != 1 || parked[0].Event.StreamRevision != 0 || parked[0].Document != "b1" {
				t.Fatalf("parked %+v (%v), want the card's first event, against b1", parked, err)
			}
			st := runner.Stats()
			if st.Parked != c.parked || st.ParkedLater != c.parkedLater {
				t.Errorf("the runner counts %d parked and %d parked later, want %d and %d: %+v", st.Parked, st.ParkedLater, c.parked, c.parkedLater, st)
			}
			if done := st.Unrouted + st.Applied + st.Duplicates + st.Skipped + st.Parked + st.Held + st.Failed; done != st.Events {
				t.Errorf("%d outcomes for %d events delivered: %+v", done, st.Events, st)
			}
		})
	}
}
