package projectortest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// Joined is a player's first event: the only one that names the team.
type Joined struct {
	Team string `json:"team"`
}

// teams totals the points of each team, fed by its players' streams under
// RevisionMap; a player's points name no team and follow the team their
// stream's first event named (TieStreams).
func teams(r *projector.Registry) *projector.Projection[score] {
	p := projector.NewRouted[score]("teams", func(e projector.Event) (string, bool, error) {
		if j, ok := e.Payload.(Joined); ok {
			return j.Team, true, nil
		}
		return "", false, nil
	}).Idempotency(projector.RevisionMap()).TieStreams("player-")
	projector.On(p, func(s score, _ Joined) (score, error) { return s, nil })
	projector.On(p, func(s score, e Scored) (score, error) {
		s.Total += e.Points
		s.Goals++
		return s, nil
	})
	return p
}

// Prove reads its log's streams as the engine reads an event store's, so
// that a projection that ties streams is proven as it runs, and each team
// is compared with the fold of its players' events.
func TestProve_proves_a_projection_that_ties_streams(t *testing.T) {
	r := scoreRegistry(upScored)
	projector.Register[Joined](r, "player.joined")
	streams := map[string][]any{}
	for i := range 12 {
		streams[fmt.Sprintf("player-%d", i)] = []any{Joined{Team: fmt.Sprintf("team%d", i%3)}, Scored{Points: i}, v1(2), Scored{Points: 1}}
	}
	store := mongostore.New(mongotest.Database(t))
	rep, err := projectortest.Prove(context.Background(), store, r, teams(r), streams, projectortest.Delivery{Shuffle: true, Seed: 7})
	t.Log(rep)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Documents != 3 || rep.Events != 48 || rep.Failed != 0 {
		t.Fatalf("report %v, want 3 teams of 48 events, none failed", rep)
	}
	var team0 score
	if found, _, err := projector.ReadDocument(context.Background(), store, teams(r), "team0", &team0); err != nil || !found {
		t.Fatalf("team0: found %v, %v", found, err)
	}
	if want := (score{Total: 0 + 2 + 1 + 3 + 2 + 1 + 6 + 2 + 1 + 9 + 2 + 1, Goals: 12}); team0 != want {
		t.Fatalf("team0 %+v, want %+v", team0, want)
	}
}

// Documents routes a tied stream's declined events to the document of its
// first routed event, and leaves out a stream whose first events are
// declined before any is routed.
func TestDocuments_follows_the_ties_of_streams(t *testing.T) {
	r := scoreRegistry(upScored)
	projector.Register[Joined](r, "player.joined")
	log := projectortest.NewLog(r)
	a := log.MustAppend(t, "player-a", Joined{Team: "red"}, Scored{Points: 1})
	b := log.MustAppend(t, "player-b", Scored{Points: 5}, Joined{Team: "blue"}, Scored{Points: 2})
	docs := teams(r).Documents(append(a, b...))
	if len(docs["red"]) != 2 || len(docs["blue"]) != 2 || docs["blue"][1].StreamRevision != 2 || len(docs) != 2 {
		t.Fatalf("documents %v: want red with a's 2 events, blue with b's joined and its later points only", docs)
	}
}

// Transferred moves a player to another team.
type Transferred struct {
	Team string `json:"team"`
}

// transfers totals the points of each team by the team a player's stream
// names, under strategy, tying the players' streams.
func transfers(r *projector.Registry, s projector.Strategy) *projector.Projection[score] {
	p := projector.NewRouted[score]("transfers", func(e projector.Event) (string, bool, error) {
		switch pl := e.Payload.(type) {
		case Joined:
			return pl.Team, true, nil
		case Transferred:
			return pl.Team, true, nil
		}
		return "", false, nil
	}).Idempotency(s).TieStreams("player-")
	projector.On(p, func(s score, _ Joined) (score, error) { return s, nil })
	projector.On(p, func(s score, _ Transferred) (score, error) { return s, nil })
	projector.On(p, func(s score, e Scored) (score, error) {
		s.Total += e.Points
		s.Goals++
		return s, nil
	})
	return p
}

// A player transferred to another team: the points after the transfer,
// which name no team, go by the tie to the first team, which a user who
// ties the stream does not mean. Prove says so, naming the stream, both
// documents and the event, under a strategy that takes it (HandledIDs)
// and under one that refuses the transfer itself (RevisionMap). Without
// points after the transfer nothing goes astray: it proves, and the
// engine says in its log that the tie does not move.
func TestProve_fails_a_tied_stream_that_moves_to_another_document(t *testing.T) {
	r := scoreRegistry(upScored)
	projector.Register[Joined](r, "player.joined")
	projector.Register[Transferred](r, "player.transferred")
	moved := map[string][]any{
		"player-1": {Joined{Team: "red"}, Scored{Points: 1}, Transferred{Team: "blue"}, Scored{Points: 2}},
		"player-2": {Joined{Team: "blue"}, Scored{Points: 3}},
	}
	for _, s := range []projector.Strategy{projector.HandledIDs(100), projector.RevisionMap()} {
		store := mongostore.New(mongotest.Database(t))
		_, err := projectortest.Prove(context.Background(), store, r, transfers(r, s), moved, projectortest.Delivery{Seed: 3})
		for _, want := range []string{`stream "player-1" moves from document "red" to "blue" at revision 2`, "revision 3 (points.scored.v2)", "a tie does not move"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: Prove: %v; want it to say %q", s, err, want)
			}
		}
	}

	var log strings.Builder
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &log}, nil))
	stays := map[string][]any{"player-1": {Joined{Team: "red"}, Scored{Points: 1}, Transferred{Team: "blue"}}}
	store := mongostore.New(mongotest.Database(t))
	if _, err := projectortest.Prove(context.Background(), store, r, transfers(r, projector.HandledIDs(100)), stays,
		projectortest.Delivery{Seed: 3, Options: []projector.Option{projector.WithLogger(logger)}}); err != nil {
		t.Fatalf("no declined event after the transfer: %v", err)
	}
	if got := log.String(); !strings.Contains(got, "a tie does not move") || !strings.Contains(got, `"routed to"=blue`) && !strings.Contains(got, "routed to=blue") {
		t.Errorf("the engine's log does not say that the tie does not move:\n%s", got)
	}
}

// syncWriter serialises the writes of the engines' goroutines to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
