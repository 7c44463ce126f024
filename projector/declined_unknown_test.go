package projector_test

import (
	"context"
	"strings"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// FailUnknownTypes: an event of a type nobody registered (a rename the
// registry misses) in the middle of a stream, declined by a router that
// switches on the payload's type, is not passed over as one that is not the
// projection's: under Block it stops the projection.
func TestRevisionMap_a_declined_unknown_type_fails_a_projection_that_fails_unknown_types(t *testing.T) {
	log := projectortest.NewLog(kanbanRegistry())
	evs := log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
	evs = append(evs, log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", BoardID: "b1", Title: "a"},
		projector.Event{Type: "CardRetitled", Data: []byte(`{"CardID":"z","Title":"renamed"}`)},
		CardAdded{CardID: "z", BoardID: "b1", Title: "b"})...)
	p := boardsTying().FailUnknownTypes()
	s := newStore(t)
	e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{p}, projector.WithRetry(patient()),
		projector.WithFailurePolicy(projector.Block), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, ev := range evs {
		rs, err := e.Handle(context.Background(), ev)
		t.Logf("%s@%d %s: %+v %v", ev.StreamID, ev.StreamRevision, ev.Type, rs, err)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		t.Fatal("the unknown CardRetitled was passed over without a word under FailUnknownTypes + Block")
	}
	// The error says why the event went to no document, and the fix:
	// not a router's, the registry's.
	for _, want := range []string{"revision 1 (CardRetitled", "is of a type nobody registered", "register the type"} {
		if !strings.Contains(errs[0].Error(), want) {
			t.Errorf("the error does not say %q: %v", want, errs[0])
		}
	}
	if strings.Contains(errs[0].Error(), "route them to") {
		t.Errorf("the error advises routing the unknown event: %v", errs[0])
	}
}
