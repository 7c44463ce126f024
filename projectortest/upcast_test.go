package projectortest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// Points of a player: "points.scored" was {"n": 3} (v1), and is now
// "points.scored.v2" {"points": 3}; v1's "n": 0 was a mistake, dropped.
type scoredV1 struct {
	N int `json:"n"`
}

type Scored struct {
	Points int `json:"points"`
}

type score struct {
	Total int `bson:"total"`
	Goals int `bson:"goals"`
}

func scoreRegistry(upcast func(scoredV1) (Scored, error)) *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[Scored](r, "points.scored.v2", projector.Upcast("points.scored", upcast))
	return r
}

func upScored(old scoredV1) (Scored, error) {
	if old.N == 0 {
		return Scored{}, projector.DropEvent
	}
	return Scored{Points: old.N}, nil
}

func scores() *projector.Projection[score] {
	p := projector.New[score]("scores", projector.StreamSuffix("player-"))
	projector.On(p, func(s score, e Scored) (score, error) {
		s.Total += e.Points
		s.Goals++
		return s, nil
	})
	return p
}

func v1(n int) projector.Event {
	return projector.Event{Type: "points.scored", Data: fmt.Appendf(nil, `{"n": %d}`, n)}
}

func TestLog_appends_an_event_as_stored_and_returns_it_upcast(t *testing.T) {
	log := projectortest.NewLog(scoreRegistry(upScored))
	evs := log.MustAppend(t, "player-1", v1(3), Scored{Points: 2}, v1(0))
	if evs[0].Type != "points.scored" || string(evs[0].Data) != `{"n": 3}` || evs[0].Payload != (Scored{Points: 3}) {
		t.Fatalf("the v1 event: %+v", evs[0])
	}
	if evs[1].Type != "points.scored.v2" || evs[1].StreamRevision != 1 || evs[2].StreamRevision != 2 {
		t.Fatalf("revisions or types: %+v", evs)
	}
	if s, err := scores().Fold(evs...); err != nil || s != (score{Total: 5, Goals: 2}) {
		t.Fatalf("fold %+v, %v: the dropped event counts", s, err)
	}
}

// Prove takes events in their older forms: the upcaster is proven
// exactly-once end to end, and one that is not pure is caught.
func TestProve_takes_events_in_older_forms(t *testing.T) {
	streams := map[string][]any{}
	for i := range 6 {
		streams[fmt.Sprintf("player-%d", i)] = []any{v1(i), Scored{Points: 1}, v1(2), projector.Event{Type: "points.scored.v2", Data: []byte(`{"points": 4}`)}}
	}
	store := mongostore.New(mongotest.Database(t))
	rep, err := projectortest.Prove(context.Background(), store, scoreRegistry(upScored), scores(), streams, projectortest.Delivery{Shuffle: true, Seed: 3})
	if err != nil || rep.Events != 24 || rep.Documents != 6 {
		t.Fatalf("%v: %v", rep, err)
	}

	// An upcaster that gives another answer each time it runs (it counts
	// its calls) is not a pure function: the documents differ from the fold.
	var calls atomic.Int64
	impure := func(old scoredV1) (Scored, error) { return Scored{Points: old.N + int(calls.Add(1))}, nil }
	store = mongostore.New(mongotest.Database(t))
	_, err = projectortest.Prove(context.Background(), store, scoreRegistry(impure), scores(), streams, projectortest.Delivery{Seed: 3, Workers: 1})
	if !errors.Is(err, projectortest.ErrNotExactlyOnce) {
		t.Fatalf("an impure upcaster: %v, want ErrNotExactlyOnce", err)
	}
}

// An event that does not decode fails the proof before any delivery, under
// every failure policy: the pure fold would leave it out, as an event of a
// type the projection does not handle, and the proof would pass whatever
// the engine did with it.
func TestProve_an_event_that_does_not_decode_fails_the_proof(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Block, projector.Skip} {
		store := mongostore.New(mongotest.Database(t))
		streams := map[string][]any{"player-1": {Scored{Points: 2}, projector.Event{Type: "points.scored", Data: []byte(`{"n": "three"}`)}, Scored{Points: 1}}}
		rep, err := projectortest.Prove(context.Background(), store, scoreRegistry(upScored), scores().OnFailure(pol), streams, projectortest.Delivery{Seed: 1})
		if !errors.Is(err, projector.ErrUndecodable) || rep.Deliveries != 0 {
			t.Errorf("%v: Prove = %v, %v; want the event that does not decode, before any delivery", pol, rep, err)
		}
	}
}

// The fold of an event that does not decode (its payload, or its upcaster,
// fails) fails, as the engine does, instead of leaving it out as an event of
// a type nobody registered: a document that lost the event would otherwise
// equal its fold.
func TestFold_of_an_event_that_does_not_decode_fails(t *testing.T) {
	log := projectortest.NewLog(scoreRegistry(upScored))
	evs := log.MustAppend(t, "player-1", Scored{Points: 2}, projector.Event{Type: "points.scored", Data: []byte(`{"n": "three"}`)}, v1(0))
	if evs[1].Payload != nil {
		t.Fatalf("the event that does not decode came back with payload %#v", evs[1].Payload)
	}
	if s, err := scores().Fold(evs...); !errors.Is(err, projector.ErrUndecodable) || !strings.Contains(err.Error(), "revision 1") {
		t.Fatalf("Fold = %+v, %v; want the event at revision 1 that does not decode", s, err)
	}
	if _, err := scores().Apply(score{}, evs[1]); !errors.Is(err, projector.ErrUndecodable) {
		t.Fatalf("Apply = %v, want ErrUndecodable", err)
	}
	// The events around it fold, the dropped one included.
	if s, err := scores().Fold(evs[0], evs[2]); err != nil || s != (score{Total: 2, Goals: 1}) {
		t.Fatalf("Fold of the others = %+v, %v", s, err)
	}
	// A projection without a handler for its type passes over it, as the
	// engine does.
	appearances := projector.New[score]("appearances", projector.StreamSuffix("player-"))
	projector.On(appearances, func(s score, _ projector.Event) (score, error) { s.Goals++; return s, nil })
	if s, err := appearances.Fold(evs...); err != nil || s != (score{}) {
		t.Fatalf("Fold without a handler for the type = %+v, %v; want it passed over", s, err)
	}

	store := mongostore.New(mongotest.Database(t))
	err := projectortest.CheckDocument(context.Background(), store, scores(), "1", evs)
	if !errors.Is(err, projector.ErrUndecodable) || errors.Is(err, projectortest.ErrMismatch) {
		t.Fatalf("CheckDocument = %v, want the fold's ErrUndecodable", err)
	}
}
