package projector_test

import (
	"context"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// An undecodable event of a handled type at the start of a tied stream
// (before any routed event): the router reads the payload, so it cannot be
// routed. It must not go to a document named "".
func TestTieStreams_an_undecodable_first_event_of_a_tied_stream_gets_no_document_of_empty_id(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Block, projector.Skip, projector.Park} {
		s := newStore(t)
		log := projectortest.NewLog(kanbanRegistry())
		card := log.MustAppend(t, cardStreams+"z", projector.Event{Type: "CardAdded", Data: []byte(`{"CardID": "z", "BoardID": `)})
		e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(retry.Default()),
			projector.WithFailurePolicy(pol), projector.WithParker(s), projector.WithStreamReader(newStreams(card...)))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		rs, err := e.Handle(ctx, card[0])
		t.Logf("policy %v: %+v %v", pol, rs, err)
		for _, r := range rs {
			if r.Document == "" && r.Outcome != projector.Failed && r.Outcome != projector.Parked && r.Outcome != projector.Skipped {
				t.Errorf("policy %v: result for empty document: %+v", pol, r)
			}
		}
		var got board
		if found, _, err := projector.ReadDocument(ctx, s, boards(), "", &got); err != nil || found {
			t.Errorf("policy %v: a document with id \"\" was written: %+v (%v)", pol, got, err)
		}
		parked, _ := s.Parked(ctx, "kanban_boards")
		t.Logf("parked: %+v", parked)
	}
}
