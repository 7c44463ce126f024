package projector_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// The engine remembers the document of a tied stream it read (WithKnownDocuments):
// card c0's declined CardMoved events after the first need no read of its stream.
// Other cards' routed CardAdded events (noteRouted) must not evict what a read gave.
func TestTieStreams_routed_events_of_other_tied_streams_do_not_evict_a_known_tie(t *testing.T) {
	ctx := context.Background()
	reg := kanbanRegistry()
	log := projectortest.NewLog(reg)
	var all []projector.Event
	add := func(stream string, p ...any) { all = append(all, log.MustAppend(t, stream, p...)...) }
	add(boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
	add(cardStreams+"c0", CardAdded{CardID: "c0", BoardID: "b1", Title: "c0"})
	add(cardStreams+"c0", CardMoved{CardID: "c0", Column: "doing"})
	for i := 1; i <= 4; i++ {
		id := fmt.Sprint("c", i)
		add(cardStreams+id, CardAdded{CardID: id, BoardID: "b1", Title: id})
	}
	add(cardStreams+"c0", CardMoved{CardID: "c0", Column: "done"})
	for i := range all {
		all[i].Payload = nil
	}
	h := newStreams(all...)
	e, err := projector.NewEngine(newStore(t), reg, []projector.Definition{boards()}, projector.WithRetry(patient()),
		projector.WithKnownDocuments(4), projector.WithStreamReader(h))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range all {
		if rs, err := e.Handle(ctx, ev); err != nil || rs[0].Outcome != projector.Applied {
			t.Fatalf("%s@%d: %+v %v", ev.StreamID, ev.StreamRevision, rs, err)
		}
	}
	if n := h.readsOf(cardStreams + "c0"); n != 1 {
		t.Errorf("stream %s read %d times, want 1: the tie it gave was evicted by 4 other streams' routed events (knownSize 4)", cardStreams+"c0", n)
	}
}
