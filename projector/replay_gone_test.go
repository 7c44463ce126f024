package projector_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// A declined event of a tied stream is parked with no document (its stream could
// not be read to tie it). The stream is deleted since. replay-parked (a fresh
// engine, which saw none of the stream's routed events) must not settle it as a
// duplicate ("the projection no longer wants it"): the board needs it, and a
// rebuild folds it there (it sees the routed event first).
func TestReplay_of_a_declined_tied_event_whose_stream_is_deleted_is_not_settled(t *testing.T) {
	ctx := context.Background()
	log := projectortest.NewLog(kanbanRegistry())
	var evs []projector.Event
	evs = append(evs, log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})...)
	evs = append(evs, log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", BoardID: "b1", Title: "t"},
		CardMoved{CardID: "z", Column: "done"})...)
	s := newStore(t)
	soon := patient()
	soon.MaxElapsed = time.Second
	var broken atomic.Bool
	broken.Store(true)
	live, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boardsRoutingWith(func(ev projector.Event) {
		if _, ok := ev.Payload.(CardMoved); ok && broken.Load() {
			panic("router bug")
		}
	})}, projector.WithRetry(soon),
		projector.WithFailurePolicy(projector.Park), projector.WithParker(s),
		projector.WithStreamReader(newStreams(evs...)))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		rs, err := live.Handle(ctx, ev)
		t.Logf("%s@%d: %+v %v", ev.StreamID, ev.StreamRevision, rs, err)
	}
	parked, err := s.Parked(ctx, "kanban_boards")
	if err != nil || len(parked) != 1 {
		t.Fatalf("parked %+v %v", parked, err)
	}
	t.Logf("record doc=%q: %s", parked[0].Document, parked[0].Error)
	broken.Store(false)
	replayer, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(soon),
		projector.WithParker(s), projector.WithStreamReader(deletedStreams{newStreams(evs...), map[string]bool{cardStreams + "z": true}}))
	if err != nil {
		t.Fatal(err)
	}
	res := replayer.Replay(ctx, parked[0])
	t.Logf("replay: %v %v", res.Outcome, res.Err)
	want := boards().Documents(evs)["b1"]
	if res.Outcome == projector.Duplicate {
		if err := projectortest.CheckDocument(ctx, s, boards(), "b1", want); err != nil {
			t.Errorf("replay settled the event as a duplicate (nothing to apply), and it is lost: %v", err)
		}
	}
}

// boardsRoutingWith is boards() whose router calls hook first.
func boardsRoutingWith(hook func(projector.Event)) *projector.Projection[board] {
	p := projector.New[board]("kanban_boards", func(ev projector.Event) (string, bool) {
		hook(ev)
		switch pl := ev.Payload.(type) {
		case BoardOpened:
			return pl.BoardID, true
		case CardAdded:
			return pl.BoardID, true
		}
		return "", false
	}).Idempotency(projector.RevisionMap()).TieStreams(cardStreams)
	card := func(s board, id string, f func(*boardCard)) board {
		if s.Cards == nil {
			s.Cards = map[string]boardCard{}
		}
		c := s.Cards[id]
		f(&c)
		s.Cards[id] = c
		return s
	}
	projector.On(p, func(s board, e BoardOpened) (board, error) { s.Name = e.Name; return s, nil })
	projector.On(p, func(s board, e CardAdded) (board, error) {
		return card(s, e.CardID, func(c *boardCard) { c.Title, c.Column = e.Title, "todo" }), nil
	})
	projector.On(p, func(s board, e CardMoved) (board, error) {
		return card(s, e.CardID, func(c *boardCard) { c.Column = e.Column; c.Moves++ }), nil
	})
	return p
}

// A tied stream's declined event delivered to a process that did not see
// the stream's routed event (routed before a restart), once the stream is
// deleted: which board it feeds cannot be read, and it fails under the
// policy (parked here, saying why) instead of being left alone, lost from
// the board without a word.
func TestTie_a_declined_event_of_a_tied_stream_deleted_before_a_restart_fails(t *testing.T) {
	ctx := context.Background()
	log := projectortest.NewLog(kanbanRegistry())
	var evs []projector.Event
	evs = append(evs, log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})...)
	evs = append(evs, log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", BoardID: "b1", Title: "t"},
		CardMoved{CardID: "z", Column: "done"})...)
	s := newStore(t)
	soon := patient()
	soon.MaxElapsed = time.Second
	engine := func(streams projector.StreamHistory) *projector.Engine {
		e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(soon),
			projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(streams))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	before := engine(newStreams(evs...))
	for _, ev := range evs[:2] {
		if rs, err := before.Handle(ctx, ev); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Applied {
			t.Fatalf("%s@%d: %+v %v", ev.StreamID, ev.StreamRevision, rs, err)
		}
	}
	// Restarted; the card's stream deleted meanwhile.
	after := engine(deletedStreams{newStreams(evs...), map[string]bool{cardStreams + "z": true}})
	rs, _ := after.Handle(ctx, evs[2])
	if len(rs) != 1 || rs[0].Outcome != projector.Parked || !strings.Contains(rs[0].Err.Error(), "is deleted: the document its earlier events feed cannot be told") {
		t.Fatalf("the card's move after the restart: %+v, want it parked, saying why", rs)
	}
	if parked, err := s.Parked(ctx, "kanban_boards"); err != nil || len(parked) != 1 {
		t.Fatalf("parked %+v %v, want the move", parked, err)
	}
}
