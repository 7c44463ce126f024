package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/retry"
)

// An event stored under an older name with a version in its metadata
// ("CardCreated" v1, a form of CardAdded) whose upcaster fails: the engine
// must fail it in a projection that handles CardAdded, as Apply/Fold do.
func TestEngine_fails_an_undecodable_versioned_older_form_where_Apply_does(t *testing.T) {
	r := projector.NewRegistry().VersionField("v")
	projector.Register[CardAdded](r, "CardAdded", projector.Upcast("CardCreated.v1", func(json.RawMessage) (CardAdded, error) {
		return CardAdded{}, errors.New("bad old shape")
	}))
	p := projector.New[board]("versioned_cards", func(ev projector.Event) (string, bool) { return ev.StreamID, true }).
		Idempotency(projector.StreamRevision())
	projector.On(p, func(s board, e CardAdded) (board, error) { s.Name = e.Title; return s, nil })
	ev := projector.Event{ID: "e1", Type: "CardCreated", StreamID: "card-z", StreamRevision: 0, Position: 1,
		Data: []byte(`{}`), Metadata: []byte(`{"v":1}`)}
	dec, derr := r.Decode(ev)
	_, aerr := p.Apply(board{}, dec)
	t.Logf("Decode: %v; Apply: %v", derr, aerr)
	s := newStore(t)
	e, err := projector.NewEngine(s, r, []projector.Definition{p}, projector.WithRetry(retry.Default()), projector.WithFailurePolicy(projector.Block))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := e.Handle(context.Background(), ev)
	t.Logf("engine: %+v %v", rs, err)
	if (aerr != nil) != (err != nil) {
		t.Fatalf("Apply says %v, the engine %v", aerr, err)
	}
}
