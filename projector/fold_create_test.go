package projector_test

import (
	"errors"
	"testing"

	"github.com/revgate/projector/projector"
)

// Fold follows the revision gate's rule for creations, so that a test that
// compares a document with it agrees with the engine: a second creation of
// a document that holds something fails, as the engine refuses it; a
// stream written again from revision 0 starts its document over.
func TestFold_a_second_creation_under_the_gate_fails_as_the_engine_refuses_it(t *testing.T) {
	cards := projector.New[boardCard]("cards", projector.StreamSuffix(cardStreams))
	projector.Create(cards, func(e CardAdded) (boardCard, error) { return boardCard{Title: e.Title, Column: "todo"}, nil })
	projector.On(cards, func(s boardCard, e CardMoved) (boardCard, error) { s.Column = e.Column; s.Moves++; return s, nil })
	ev := func(rev uint64, payload any) projector.Event {
		return projector.Event{StreamID: cardStreams + "c1", StreamRevision: rev, Payload: payload}
	}
	// Moved first, then added: the addition would reset the move.
	_, err := cards.Fold(ev(0, CardMoved{CardID: "c1", Column: "doing"}), ev(1, CardAdded{CardID: "c1", Title: "t"}))
	if !errors.Is(err, projector.ErrAlreadyCreated) {
		t.Errorf("a second creation: %v, want ErrAlreadyCreated", err)
	}
	// Written again from revision 0: it starts over.
	got, err := cards.Fold(ev(0, CardAdded{CardID: "c1", Title: "old"}), ev(1, CardMoved{CardID: "c1", Column: "done"}),
		ev(0, CardAdded{CardID: "c1", Title: "new"}))
	if err != nil || got != (boardCard{Title: "new", Column: "todo"}) {
		t.Errorf("a stream written again: %+v, %v", got, err)
	}
	// Under RevisionMap a creation applies as the engine applies it: it
	// makes the state anew.
	summary := projector.New[boardCard]("card_summary", projector.StreamSuffix(cardStreams)).Idempotency(projector.RevisionMap())
	projector.Create(summary, func(e CardAdded) (boardCard, error) { return boardCard{Title: e.Title}, nil })
	projector.On(summary, func(s boardCard, e CardMoved) (boardCard, error) { s.Moves++; return s, nil })
	if got, err := summary.Fold(ev(0, CardMoved{CardID: "c1"}), ev(1, CardAdded{CardID: "c1", Title: "t"})); err != nil || got != (boardCard{Title: "t"}) {
		t.Errorf("under RevisionMap: %+v, %v", got, err)
	}
}
