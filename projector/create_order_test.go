package projector_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// A stream whose creation event is not its first (a card moved, then
// added, then moved again): its document is made by the first event, and
// the creation fails as a second one, under park parked while the
// document moves past it. Whatever order the three are delivered in, the
// engine ends where the log's order takes it: the creation waits for the
// event before it, as any event does, instead of inserting the document
// at once, which would leave that event a duplicate of nothing.
func TestCreate_after_earlier_events_of_its_stream_gives_the_same_document_in_any_order(t *testing.T) {
	cards := projector.New[boardCard]("cards_created", projector.StreamSuffix(cardStreams))
	projector.Create(cards, func(e CardAdded) (boardCard, error) { return boardCard{Title: e.Title}, nil })
	projector.On(cards, func(s boardCard, _ CardMoved) (boardCard, error) { s.Moves++; return s, nil })
	log := projectortest.NewLog(kanbanRegistry())
	evs := log.MustAppend(t, cardStreams+"c", CardMoved{CardID: "c"}, CardAdded{CardID: "c", Title: "t"}, CardMoved{CardID: "c"})
	for _, order := range [][]int{{0, 1, 2}, {1, 0, 2}, {1, 2, 0}, {2, 1, 0}, {0, 2, 1}, {2, 0, 1}} {
		s := newStore(t)
		e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{cards}, projector.WithRetry(patient()),
			projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		for i, k := range order {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 20 * time.Millisecond)
				if _, err := e.Handle(ctx, evs[k]); err != nil {
					t.Errorf("order %v: event %d: %v", order, k, err)
				}
			})
		}
		wg.Wait()
		var got boardCard
		if found, rev, err := projector.ReadDocument(ctx, s, cards, "c", &got); err != nil || !found || rev != 2 || got != (boardCard{Moves: 2}) {
			t.Errorf("order %v: card %+v at revision %d (found %v, %v); want the two moves at revision 2, the creation parked", order, got, rev, found, err)
		}
		parked, err := s.Parked(ctx, "cards_created")
		if err != nil || len(parked) != 1 || parked[0].Event.StreamRevision != 1 || !strings.Contains(parked[0].Error, projector.ErrAlreadyCreated.Error()) {
			t.Errorf("order %v: parked %+v (%v); want the creation, as a second one", order, parked, err)
		}
	}
}
