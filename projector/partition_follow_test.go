package projector_test

import (
	"testing"

	"github.com/revgate/projector/projector"
)

type byline struct{ Author string }

type retracted struct{}

// An event of a document's stream that the projection cannot route (its
// router fails) goes to the worker of the document its stream's last event
// went to, after that document's events before it, without a route: under
// Hold it holds the document where the log does (in another worker it held
// it before the document's earlier events were applied, which were then
// held behind it), and under Park it is parked when it comes, before the
// stream's next event passes over it. An event the router declines goes by
// its stream, as it did: it does not fail, and following the document
// would pile a summary's declined events on one worker.
func TestSpread_an_event_not_routed_follows_its_streams_document(t *testing.T) {
	r := projector.NewRegistry()
	projector.Register[byline](r, "noted")
	projector.Register[retracted](r, "retracted")
	p := projector.New[struct{ N int }]("authors", func(ev projector.Event) (string, bool) {
		b, ok := ev.Payload.(byline)
		switch {
		case !ok:
			return "", false
		case b.Author != "":
			return b.Author, true
		}
		panic("no author")
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(s struct{ N int }, _ byline) (struct{ N int }, error) { s.N++; return s, nil })
	e, err := projector.NewEngine(newStore(t), r, []projector.Definition{p})
	if err != nil {
		t.Fatal(err)
	}
	first := projector.Event{Type: "noted", StreamID: "article-1", Data: []byte(`{"Author":"dan"}`)}
	bad := projector.Event{Type: "noted", StreamID: "article-1", StreamRevision: 1, Data: []byte(`{"Author":""}`)}
	alone := projector.Event{Type: "noted", StreamID: "article-2", Data: []byte(`{"Author":""}`)}
	declined := projector.Event{Type: "retracted", StreamID: "article-1", StreamRevision: 2, Data: []byte(`{}`)}
	worker, route := projector.Spread(e, first)
	if route != "dan" {
		t.Fatalf("the routed event: worker %q, route %q: want the engine to spread by document", worker, route)
	}
	if w, rt := projector.Spread(e, bad); w != worker || rt != "" {
		t.Errorf("the event not routed goes by %q with route %q, want %q (its stream's document's worker) and none", w, rt, worker)
	}
	if w, rt := projector.Spread(e, alone); w != "article-2" || rt != "" {
		t.Errorf("an event not routed of a stream not seen goes by %q with route %q, want its stream and none", w, rt)
	}
	if w, rt := projector.Spread(e, declined); w != "article-1" || rt != "" {
		t.Errorf("an event the router declines goes by %q with route %q, want its stream and none", w, rt)
	}
}
