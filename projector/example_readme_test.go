package projector_test

import (
	"fmt"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// Board is the README's board summary: fed by the board's stream and by
// the streams of its cards, of which only the first event names the board.
type Board struct {
	Name  string
	Cards map[string]string // card id: title
}

// A board summary under RevisionMap, its cards' streams tied to the board
// their first event names (the README's TieStreams example):
// Documents gives each document's events as the engine routes them.
func ExampleProjection_TieStreams() {
	p := projector.New[Board]("boards", func(ev projector.Event) (string, bool) {
		switch e := ev.Payload.(type) {
		case BoardOpened:
			return e.BoardID, true
		case CardAdded: // the first event of a card- stream names the board
			return e.BoardID, true
		}
		return "", false // CardRenamed, CardMoved: the tie sends them to the card's board
	}).Idempotency(projector.RevisionMap()).TieStreams("card-")
	projector.On(p, func(b Board, e BoardOpened) (Board, error) { b.Name = e.Name; return b, nil })
	projector.On(p, func(b Board, e CardAdded) (Board, error) {
		if b.Cards == nil {
			b.Cards = map[string]string{}
		}
		b.Cards[e.CardID] = e.Title
		return b, nil
	})
	projector.On(p, func(b Board, e CardRenamed) (Board, error) { b.Cards[e.CardID] = e.Title; return b, nil })

	log := projectortest.NewLog(kanbanRegistry())
	board, _ := log.Append("board-b1", BoardOpened{BoardID: "b1", Name: "Release"})
	card, _ := log.Append("card-c1", CardAdded{CardID: "c1", BoardID: "b1", Title: "draft"}, CardRenamed{CardID: "c1", Title: "notes"})
	for id, evs := range p.Documents(append(board, card...)) {
		b, err := p.Fold(evs...)
		fmt.Println(id, len(evs), b.Name, b.Cards, err)
	}
	// Output: b1 3 Release map[c1:notes] <nil>
}

// The README's interview ratings: InterviewScored was renamed
// InterviewRated, whose v1 events keep the old shape {score}, and v2 has
// {rating}. The old name enters the chain through the identity, at the
// same step as v1.
type (
	Scored struct {
		Score int `json:"score"`
	}
	Rated struct {
		Rating int `json:"rating"`
	}
)

func scoredToRated(e Scored) (Rated, error) { return Rated{Rating: e.Score}, nil }

func ExampleUpcast_one_shape_under_two_names() {
	r := projector.NewRegistry()
	projector.Register[Rated](r, "InterviewRated.v2",
		projector.Upcast("InterviewScored", func(e Scored) (Scored, error) { return e, nil }),
		projector.Upcast("InterviewRated.v1", scoredToRated))
	for _, name := range []string{"InterviewScored", "InterviewRated.v1"} {
		ev, err := r.Decode(projector.Event{Type: name, Data: []byte(`{"score": 4}`)})
		fmt.Println(name, ev.Payload, err)
	}
	// Output:
	// InterviewScored {4} <nil>
	// InterviewRated.v1 {4} <nil>
}
