package projector_test

import (
	"testing"

	"github.com/revgate/projector/projector"
)

// Under RevisionMap a creation applies as the engine applies it: it makes
// the state anew.
func TestFold_under_RevisionMap_a_creation_makes_the_state_anew(t *testing.T) {
	ev := func(rev uint64, payload any) projector.Event {
		return projector.Event{StreamID: cardStreams + "c1", StreamRevision: rev, Payload: payload}
	}
	summary := projector.New[boardCard]("card_summary", projector.StreamSuffix(cardStreams)).Idempotency(projector.RevisionMap())
	projector.Create(summary, func(e CardAdded) (boardCard, error) { return boardCard{Title: e.Title}, nil })
	projector.On(summary, func(s boardCard, e CardMoved) (boardCard, error) { s.Moves++; return s, nil })
	if got, err := summary.Fold(ev(0, CardMoved{CardID: "c1"}), ev(1, CardAdded{CardID: "c1", Title: "t"})); err != nil || got != (boardCard{Title: "t"}) {
		t.Errorf("under RevisionMap: %+v, %v", got, err)
	}
}
