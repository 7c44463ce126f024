package projector_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// TicketQueued opens a ticket in a queue: a queue's document is fed by the
// streams of its tickets, tied to it by their first event.
type TicketQueued struct{ ID, Queue string }

// queue is who each of a queue's tickets is with, how many assignments and
// handovers it saw, and the comments: who a ticket is with depends on the
// order of its stream's events.
type queue struct {
	Agents      map[string]string
	Assignments int
	Handovers   int
	Comments    []string
}

func queueRegistry() *projector.Registry {
	r := ticketRegistry()
	projector.Register[TicketQueued](r, "TicketQueued")
	return r
}

// queues parks what fails: an assignment while assigning is broken, and a
// comment "boom" always.
func queues(broken *atomic.Bool) *projector.Projection[queue] {
	p := projector.New[queue]("queues", func(ev projector.Event) (string, bool) {
		if q, ok := ev.Payload.(TicketQueued); ok {
			return q.Queue, true
		}
		return "", false
	}).Idempotency(projector.RevisionMap()).TieStreams("ticket-").OnFailure(projector.Park)
	agent := func(s queue, id, who string) queue {
		s.Agents = maps.Clone(s.Agents)
		if s.Agents == nil {
			s.Agents = map[string]string{}
		}
		s.Agents[id] = who
		return s
	}
	projector.On(p, func(s queue, e TicketQueued) (queue, error) {
		if broken.Load() && e.ID == "4" {
			return s, errors.New("ticket 4 cannot be queued yet")
		}
		return agent(s, e.ID, ""), nil
	})
	projector.On(p, func(s queue, e TicketAssigned) (queue, error) {
		if broken.Load() {
			return s, errors.New("assignments are broken")
		}
		s = agent(s, e.ID, e.Agent)
		s.Assignments++
		return s, nil
	})
	projector.On(p, func(s queue, e TicketReassigned) (queue, error) {
		s = agent(s, e.ID, e.To)
		s.Handovers++
		return s, nil
	})
	projector.On(p, func(s queue, e TicketCommented) (queue, error) {
		if e.Text == "boom" {
			return s, errors.New("boom")
		}
		s.Comments = append(s.Comments, e.ID+":"+e.Text)
		return s, nil
	})
	return p
}

// A parked event of a document fed by many streams (RevisionMap), replayed
// after later events of its own stream, gets its effect in its stream's
// order, not last: the document is folded anew from its streams. Applied
// last, the assignments to agent-7 and bob would win over the handovers
// to carol and dave that came after them. A parked event with nothing of
// its stream after it applies as it is; the events parked against the
// document and not replayed yet are each applied once, in their own
// replay; one that still fails is left out, and stays parked.
func TestReplay_under_a_revision_map_folds_the_document_anew_from_its_streams(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var broken atomic.Bool
	broken.Store(true)
	p := queues(&broken)
	log := projectortest.NewLog(queueRegistry())
	var evs []projector.Event
	evs = append(evs, log.MustAppend(t, "ticket-1", TicketQueued{ID: "1", Queue: "A"}, TicketAssigned{ID: "1", Agent: "agent-7"})...)
	evs = append(evs, log.MustAppend(t, "ticket-2", TicketQueued{ID: "2", Queue: "A"}, TicketAssigned{ID: "2", Agent: "bob"})...)
	evs = append(evs, log.MustAppend(t, "ticket-1", TicketReassigned{ID: "1", From: "agent-7", To: "carol"}, TicketCommented{ID: "1", Text: "boom"})...)
	evs = append(evs, log.MustAppend(t, "ticket-3", TicketQueued{ID: "3", Queue: "A"}, TicketAssigned{ID: "3", Agent: "eve"})...)
	evs = append(evs, log.MustAppend(t, "ticket-2", TicketReassigned{ID: "2", From: "bob", To: "dave"}, TicketCommented{ID: "2", Text: "on it"})...)
	// Ticket 4's first event, the one its stream is tied by, is parked; the
	// handover after it applies.
	evs = append(evs, log.MustAppend(t, "ticket-4", TicketQueued{ID: "4", Queue: "A"}, TicketReassigned{ID: "4", From: "", To: "zed"})...)
	e, err := projector.NewEngine(s, queueRegistry(), []projector.Definition{p},
		projector.WithRetry(retry.Default()), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	broken.Store(false)
	parked, err := s.Parked(ctx, "queues")
	if err != nil || len(parked) != 5 {
		t.Fatalf("%d parked (%v), want the 3 assignments, the boom and ticket 4's queueing", len(parked), err)
	}
	for _, pe := range parked {
		r := e.Replay(ctx, pe)
		switch pe.Type {
		case "TicketCommented":
			if r.Outcome != projector.Failed || !strings.Contains(r.Err.Error(), "boom") {
				t.Errorf("replay of the boom: %v %v, want it failing again", r.Outcome, r.Err)
			}
			continue
		default:
			if r.Outcome != projector.Applied {
				t.Fatalf("replay of %s@%d: %v %v", pe.StreamID, pe.StreamRevision, r.Outcome, r.Err)
			}
		}
		if err := s.Replayed(ctx, pe, nil); err != nil {
			t.Fatal(err)
		}
	}
	var got queue
	if _, _, err := projector.ReadDocument(ctx, s, p, "A", &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"1": "carol", "2": "dave", "3": "eve", "4": "zed"}
	if !maps.Equal(got.Agents, want) || got.Assignments != 3 || got.Handovers != 3 || strings.Join(got.Comments, ",") != "2:on it" {
		t.Fatalf("queue A after the replays: %+v; want agents %v, 3 assignments (each once), 3 handovers, the comment on 2 only", got, want)
	}
	left, err := s.Parked(ctx, "queues")
	if err != nil || len(left) != 1 || left[0].Type != "TicketCommented" {
		t.Fatalf("parked after the replays: %+v (%v); want the boom only", left, err)
	}
}

// A tied stream whose router sends a later event to another document (a
// ticket queued again elsewhere) cannot feed that document under a
// revision map: the event fails, and its error says that a tie does not
// move, and what to do instead, rather than suggest another strategy,
// under which the declined events would go to the first document all the
// same.
func TestTieStreams_a_stream_that_moves_is_told_that_a_tie_does_not_move(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var broken atomic.Bool
	p := queues(&broken)
	log := projectortest.NewLog(queueRegistry())
	evs := log.MustAppend(t, "ticket-5", TicketQueued{ID: "5", Queue: "A"}, TicketReassigned{ID: "5", To: "amy"},
		TicketQueued{ID: "5", Queue: "B"}, TicketReassigned{ID: "5", From: "amy", To: "ben"})
	e, err := projector.NewEngine(s, queueRegistry(), []projector.Definition{p},
		projector.WithRetry(retry.Default()), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
	if err != nil {
		t.Fatal(err)
	}
	var moved *projector.Result
	for _, ev := range evs {
		rs, _ := e.Handle(ctx, ev)
		for i := range rs {
			if rs[i].Document == "B" && rs[i].Err != nil {
				moved = &rs[i]
			}
		}
	}
	if moved == nil {
		t.Fatal("the ticket queued again in B: no failure in B")
	}
	msg := moved.Err.Error()
	if !strings.Contains(msg, "a tie does not move") || !strings.Contains(msg, "RoutesByEnvelope") || strings.Contains(msg, "such as HandledIDs") {
		t.Fatalf("the error of the ticket queued again in B: %v; want it to say that a tie does not move, and not to suggest HandledIDs", msg)
	}
}

// A parked event of a document under a revision map, replayed after later
// events of its stream, where the document cannot be folded anew (its
// stream no longer starts at revision 0): applied as the document is, and
// the log says so, and why, so that a replay that may leave an
// order-dependent field off the fold does not pass for an exact one.
func TestReplay_under_a_revision_map_says_when_it_applies_the_event_as_the_document_is(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var broken atomic.Bool
	broken.Store(true)
	p := queues(&broken)
	log := projectortest.NewLog(queueRegistry())
	var evs []projector.Event
	evs = append(evs, log.MustAppend(t, "ticket-1", TicketQueued{ID: "1", Queue: "A"}, TicketAssigned{ID: "1", Agent: "agent-7"},
		TicketReassigned{ID: "1", From: "agent-7", To: "carol"})...)
	e, err := projector.NewEngine(s, queueRegistry(), []projector.Definition{p},
		projector.WithRetry(retry.Default()), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	broken.Store(false)
	parked, err := s.Parked(ctx, "queues")
	if err != nil || len(parked) != 1 {
		t.Fatalf("%d parked (%v), want the assignment", len(parked), err)
	}
	var logs strings.Builder
	truncated := truncatedStreams{newStreams(evs[1:]...), map[string]uint64{"ticket-1": 1}}
	// Its first write misses (another writer moved the document), and the
	// replay tries again: the warning is said once, of the write that took.
	missing := &missingFirstPut{Store: s}
	replayer, err := projector.NewEngine(missing, queueRegistry(), []projector.Definition{p}, projector.WithRetry(retry.Default()),
		projector.WithParker(s), projector.WithStreamReader(truncated), projector.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if r := replayer.Replay(ctx, parked[0]); r.Outcome != projector.Applied {
		t.Fatalf("replay: %v %v", r.Outcome, r.Err)
	}
	for _, want := range []string{"replayed event applied to the document as it is", "document=A", "stream=ticket-1", "revision=1", "does not start at revision 0"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
	if !missing.missed.Load() {
		t.Fatal("the replay's first write did not miss: the test shows nothing")
	}
	if n := strings.Count(logs.String(), "replayed event applied to the document as it is"); n != 1 {
		t.Errorf("the log says it %d times, want once, when written:\n%s", n, logs.String())
	}
}

// missingFirstPut is a store whose first versioned write misses, as when
// another writer moved the document between its read and its write.
type missingFirstPut struct {
	*mongostore.Store
	missed atomic.Bool
}

func (s *missingFirstPut) PutGuarded(ctx context.Context, collection, id string, expected int64, meta driver.Meta, state any) (bool, error) {
	if s.missed.CompareAndSwap(false, true) {
		return false, nil
	}
	return s.Store.PutGuarded(ctx, collection, id, expected, meta, state)
}
