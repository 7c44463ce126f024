package projector_test

import (
	"context"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

type truncatedStreams struct {
	*streams
	first map[string]uint64
}

func (s truncatedStreams) FirstRevision(_ context.Context, stream string) (uint64, error) {
	return s.first[stream], nil
}

// Under Block, a document at revision 0 of its stream; revision 1 (routed
// to it, handled) is truncated before the projector saw it; revision 2 is
// not the projection's (declined, unregistered type); revision 3 comes. The
// document does not move past revision 1 without a word: whose it was
// cannot be told.
func TestRevisionMap_events_gone_before_a_declined_one_are_not_passed_over_silently(t *testing.T) {
	log := projectortest.NewLog(kanbanRegistry())
	evs := log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
	card := log.MustAppend(t, cardStreams+"z",
		CardAdded{CardID: "z", BoardID: "b1", Title: "a"},
		CardAdded{CardID: "y", BoardID: "b1", Title: "lost"},
		projector.Event{Type: "CardFlipped", Data: []byte(`{}`)},
		CardAdded{CardID: "x", BoardID: "b1", Title: "c"})
	p := boardsTying()
	s := newStore(t)
	st := truncatedStreams{newStreams(append(evs, card[2:]...)...), map[string]uint64{cardStreams + "z": 2}}
	e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{p}, projector.WithRetry(patient()),
		projector.WithFailurePolicy(projector.Block), projector.WithParker(s), projector.WithStreamReader(st))
	if err != nil {
		t.Fatal(err)
	}
	var failed bool
	for _, ev := range []projector.Event{evs[0], card[0], card[2], card[3]} {
		rs, err := e.Handle(context.Background(), ev)
		t.Logf("%s@%d %s: %+v %v", ev.StreamID, ev.StreamRevision, ev.Type, rs, err)
		failed = failed || err != nil
	}
	if !failed {
		var b board
		_, _, _ = projector.ReadDocument(context.Background(), s, p, "b1", &b)
		t.Fatalf("under Block, b1 moved past the truncated revision 1 silently: %+v", b)
	}
}
