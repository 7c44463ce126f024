package projector_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// A helpdesk's tickets: who a ticket is with depends on the order of its
// events, which a replay of a parked event must keep.
type (
	TicketOpened     struct{ ID, Title string }
	TicketAssigned   struct{ ID, Agent string }
	TicketReassigned struct{ ID, From, To string }
	TicketCommented  struct{ ID, Text string }
)

type ticket struct {
	Title, Agent string
	Handovers    int
	Comments     []string
}

func ticketRegistry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[TicketOpened](r, "TicketOpened")
	projector.Register[TicketAssigned](r, "TicketAssigned")
	projector.Register[TicketReassigned](r, "TicketReassigned")
	projector.Register[TicketCommented](r, "TicketCommented")
	return r
}

// tickets parks what fails: an assignment while assigning is broken, and
// a comment "boom" always.
func tickets(broken *atomic.Bool) *projector.Projection[ticket] {
	p := projector.New[ticket]("tickets", projector.StreamSuffix("ticket-")).OnFailure(projector.Park)
	projector.Create(p, func(e TicketOpened) (ticket, error) {
		if broken.Load() && strings.HasPrefix(e.Title, "broken") {
			return ticket{}, errors.New("cannot open yet")
		}
		return ticket{Title: e.Title}, nil
	})
	projector.On(p, func(s ticket, e TicketAssigned) (ticket, error) {
		if broken.Load() {
			return s, errors.New("assignments are broken")
		}
		s.Agent = e.Agent
		return s, nil
	})
	projector.On(p, func(s ticket, e TicketReassigned) (ticket, error) {
		s.Agent, s.Handovers = e.To, s.Handovers+1
		return s, nil
	})
	projector.On(p, func(s ticket, e TicketCommented) (ticket, error) {
		s.Comments = append(s.Comments, e.Text) // changed in place before it fails
		if e.Text == "boom" {
			panic("boom")
		}
		return s, nil
	})
	return p
}

// A parked event replayed into a document that later events have moved on
// gets its effect in its place, not last: the document is folded anew from
// its stream. Applied last, the assignment to agent-7 would win over the
// handover to carol that came after it.
func TestReplay_under_the_revision_gate_folds_the_document_anew_from_its_stream(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var broken atomic.Bool
	broken.Store(true)
	p := tickets(&broken)
	log := projectortest.NewLog(ticketRegistry())
	evs := log.MustAppend(t, "ticket-1",
		TicketOpened{ID: "1", Title: "printer"},
		TicketAssigned{ID: "1", Agent: "agent-7"}, // parked
		TicketReassigned{ID: "1", From: "agent-7", To: "carol"},
		TicketCommented{ID: "1", Text: "on it"})
	history := newStreams(evs...)
	e, err := projector.NewEngine(s, ticketRegistry(), []projector.Definition{p},
		projector.WithRetry(retry.Default()), projector.WithParker(s), projector.WithStreamReader(history))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	broken.Store(false)
	rs := rvReplayAll(t, e, s, "tickets")
	if r := rs[1]; r.Outcome != projector.Applied {
		t.Fatalf("replay of the assignment: %v %v", r.Outcome, r.Err)
	}
	if err := projectortest.CheckDocument(ctx, s, p, "1", evs); err != nil {
		t.Fatalf("after the replay: %v", err)
	}
	var got ticket
	if _, _, err := projector.ReadDocument(ctx, s, p, "1", &got); err != nil || got.Agent != "carol" {
		t.Fatalf("the ticket is with %q (%v); want carol, who it was handed over to after its assignment", got.Agent, err)
	}
}

// An event of the document that still fails is left out of the fold anew,
// as it was when it came, and stays parked; the state a failed step
// changed in place is not kept. A parked creation that later events built
// on replays too, in its place.
func TestReplay_folding_anew_leaves_out_what_still_fails(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var broken atomic.Bool
	broken.Store(true)
	p := tickets(&broken)
	log := projectortest.NewLog(ticketRegistry())
	one := log.MustAppend(t, "ticket-1",
		TicketOpened{ID: "1", Title: "printer"},
		TicketCommented{ID: "1", Text: "boom"},    // parked for good
		TicketAssigned{ID: "1", Agent: "agent-7"}, // parked, fixed
		TicketReassigned{ID: "1", From: "agent-7", To: "carol"})
	two := log.MustAppend(t, "ticket-2",
		TicketOpened{ID: "2", Title: "broken screen"}, // parked, fixed
		TicketReassigned{ID: "2", From: "nobody", To: "dave"},
		TicketCommented{ID: "2", Text: "replaced"})
	history := newStreams(append(one, two...)...)
	e, err := projector.NewEngine(s, ticketRegistry(), []projector.Definition{p},
		projector.WithRetry(retry.Default()), projector.WithParker(s), projector.WithStreamReader(history))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range append(one, two...) {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	broken.Store(false)
	rs := rvReplayAll(t, e, s, "tickets")
	if r := rs[1]; r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrPanic) {
		t.Errorf("replay of the comment that still panics: %v %v", r.Outcome, r.Err)
	}
	if r := rs[2]; r.Outcome != projector.Applied {
		t.Errorf("replay of the fixed assignment: %v %v", r.Outcome, r.Err)
	}
	if r := rs[0]; r.Outcome != projector.Applied {
		t.Errorf("replay of ticket 2's opening: %v %v", r.Outcome, r.Err)
	}
	// Ticket 1 is the fold without its bad comment.
	if err := projectortest.CheckDocument(ctx, s, p, "1", []projector.Event{one[0], one[2], one[3]}); err != nil {
		t.Errorf("ticket 1: %v", err)
	}
	var got ticket
	if _, _, err := projector.ReadDocument(ctx, s, p, "1", &got); err != nil || got.Agent != "carol" || len(got.Comments) != 0 {
		t.Errorf("ticket 1: %+v (%v); want it with carol, and no comment", got, err)
	}
	if err := projectortest.CheckDocument(ctx, s, p, "2", two); err != nil {
		t.Errorf("ticket 2: %v", err)
	}
	left, err := s.Parked(ctx, "tickets")
	if err != nil || len(left) != 1 || left[0].ID != one[1].ID {
		t.Fatalf("still parked: %+v (%v); want the bad comment alone", left, err)
	}
	if want := (ticket{Title: "broken screen", Agent: "dave", Handovers: 1, Comments: []string{"replaced"}}); !reflect.DeepEqual(readTicket(t, s, p, "2"), want) {
		t.Errorf("ticket 2: %+v, want %+v", readTicket(t, s, p, "2"), want)
	}
}

func readTicket(t *testing.T, s driver.Store, p projector.Definition, id string) ticket {
	t.Helper()
	var got ticket
	if _, _, err := projector.ReadDocument(context.Background(), s, p, id, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// A stream whose first events are gone cannot be folded anew: the replayed
// event applies to the document as it is, after the events since, as
// without a stream reader.
func TestReplay_of_a_truncated_stream_applies_the_event_to_the_document_as_it_is(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var broken atomic.Bool
	broken.Store(true)
	p := tickets(&broken)
	log := projectortest.NewLog(ticketRegistry())
	evs := log.MustAppend(t, "ticket-1",
		TicketOpened{ID: "1", Title: "printer"},
		TicketAssigned{ID: "1", Agent: "agent-7"}, // parked
		TicketReassigned{ID: "1", From: "agent-7", To: "carol"})
	e, err := projector.NewEngine(s, ticketRegistry(), []projector.Definition{p},
		projector.WithRetry(retry.Default()), projector.WithParker(s), projector.WithStreamReader(truncatedStreams{newStreams(evs[1:]...), map[string]uint64{"ticket-1": 1}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	broken.Store(false)
	if r := rvReplayAll(t, e, s, "tickets")[1]; r.Outcome != projector.Applied {
		t.Fatalf("replay: %v %v", r.Outcome, r.Err)
	}
	if got, want := readTicket(t, s, p, "1"), (ticket{Title: "printer", Agent: "agent-7", Handovers: 1, Comments: nil}); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the replay: %+v, want %+v (the assignment applied last)", got, want)
	}
}
