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
// runner counts it among its parked events (the metric and the alerts read
// that count), as it counts one parked when it comes.
func TestPark_an_event_parked_beside_the_one_handled_counts_as_parked(t *testing.T) {
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
	x.WaitFor(t, "the first event", at(put("CardMoved", `{"CardID": "q", "Column": "doing"}`)))
	x.WaitFor(t, "the second event", at(put("CardAdded", `{"CardID": "q", "BoardID": "b1", "Title": "t"}`)))
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
	parked, err := s.Parked(ctx, "kanban_boards")
	if err != nil || len(parked) != 1 || parked[0].Event.StreamRevision != 0 {
		t.Fatalf("parked %+v (%v), want the card's first event", parked, err)
	}
	if st := runner.Stats(); st.Parked != 1 {
		t.Errorf("the runner counts %d parked events, want 1 (the card's first): %+v", st.Parked, st)
	}
}
