package projector_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

func boardsFailingOnBoom(broken *atomic.Bool) *projector.Projection[board] {
	p := projector.New[board]("kanban_boards", func(ev projector.Event) (string, bool) {
		switch pl := ev.Payload.(type) {
		case BoardOpened:
			return pl.BoardID, true
		case CardAdded:
			return pl.BoardID, true
		}
		return "", false
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(s board, e BoardOpened) (board, error) { s.Name = e.Name; return s, nil })
	projector.On(p, func(s board, e CardAdded) (board, error) {
		if broken.Load() && e.Title == "boom" {
			return s, errors.New("boom")
		}
		if s.Cards == nil {
			s.Cards = map[string]boardCard{}
		}
		s.Cards[e.CardID+"/"+e.Title] = boardCard{Title: e.Title}
		return s, nil
	})
	return p
}

type deletedHistory struct{ *streams }

func (deletedHistory) FirstRevision(context.Context, string) (uint64, error) {
	return 0, projector.ErrStreamDeleted
}
func (deletedHistory) ReadStream(context.Context, string, uint64, func(projector.Event) error) error {
	return errors.New("stream not found")
}

// A document that had a stream, whose event failed and was parked, is no
// stray (see TestRevisionMap_a_replay_refuses_a_stray_as_the_run_did): its
// replay applies, also once the stream's first events are truncated
// ($maxCount), or once the stream is deleted.
func TestReplay_of_an_event_whose_document_had_its_stream_is_no_stray(t *testing.T) {
	for _, mode := range []string{"control", "truncated", "deleted"} {
		t.Run(mode, func(t *testing.T) {
			var broken atomic.Bool
			broken.Store(true)
			log := projectortest.NewLog(kanbanRegistry())
			evs := log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
			evs = append(evs, log.MustAppend(t, boardStreams+"b2", BoardOpened{BoardID: "b2", Name: "two"})...)
			evs = append(evs, log.MustAppend(t, cardStreams+"z",
				CardAdded{CardID: "z", BoardID: "b1", Title: "a"},
				CardAdded{CardID: "z", BoardID: "b2", Title: "b"},
				CardAdded{CardID: "z", BoardID: "b1", Title: "boom"})...)
			p := boardsFailingOnBoom(&broken)
			s := newStore(t)
			st := newStreams(evs...)
			e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{p}, projector.WithRetry(patient()),
				projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(st))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for _, ev := range evs {
				rs, err := e.Handle(ctx, ev)
				t.Logf("%s@%d: %+v %v", ev.StreamID, ev.StreamRevision, rs, err)
			}
			parked, _ := s.Parked(ctx, "kanban_boards")
			var boom *projector.ParkedEvent
			for i, pe := range parked {
				t.Logf("parked %s@%d against %q: %s", pe.StreamID, pe.StreamRevision, pe.Document, pe.Error)
				if pe.StreamRevision == 2 && pe.Document == "b1" {
					boom = &parked[i]
				}
			}
			if boom == nil {
				t.Fatal("rev 2 not parked against b1")
			}
			broken.Store(false)
			e2 := e
			switch mode {
			case "truncated":
				st.mu.Lock()
				st.events[cardStreams+"z"] = st.events[cardStreams+"z"][1:]
				st.mu.Unlock()
			case "deleted":
				e2, err = projector.NewEngine(s, kanbanRegistry(), []projector.Definition{p}, projector.WithRetry(patient()),
					projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(deletedHistory{st}))
				if err != nil {
					t.Fatal(err)
				}
			}
			r := e2.Replay(ctx, *boom)
			if r.Outcome != projector.Applied {
				t.Fatalf("replay of rev 2 against b1 (b1 has had card-z since rev 0): %+v", r)
			}
		})
	}
}
