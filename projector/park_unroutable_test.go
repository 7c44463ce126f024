package projector_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/projector"
)

type loanOpened struct{ Loan, Member string }

type loanRenewed struct {
	Loan, Member string
	Due          time.Time
}

type memberSummary struct{ Loans, Renewals int }

// A member's summary, fed by its loans' streams, routed by the payload's
// member.
func memberLoans() (*projector.Registry, *projector.Projection[memberSummary]) {
	r := projector.NewRegistry()
	projector.Register[loanOpened](r, "LoanOpened")
	projector.Register[loanRenewed](r, "LoanRenewed")
	p := projector.New[memberSummary]("member_loans", func(ev projector.Event) (string, bool) {
		switch e := ev.Payload.(type) {
		case loanOpened:
			return e.Member, true
		case loanRenewed:
			return e.Member, true
		}
		return "", false
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(s memberSummary, _ loanOpened) (memberSummary, error) { s.Loans++; return s, nil })
	projector.On(p, func(s memberSummary, _ loanRenewed) (memberSummary, error) { s.Renewals++; return s, nil })
	return r, p
}

// An event whose payload does not decode, parked with no document (its
// router reads the payload), then passed over by the next event of its
// stream, which names the member: the record then names the document, and
// keeps the payload's error and the event's position in $all. Before, it
// said only that the router named no document (an operator would have
// debugged the router), and took the position of the event read again
// from its stream, which a node gives as 2^64-1.
func TestPark_a_record_named_by_a_later_event_keeps_its_cause_and_position(t *testing.T) {
	ctx := context.Background()
	r, p := memberLoans()
	raw := rawLog(t, r, func(add func(string, ...any)) {
		add("loan-l1", loanOpened{Loan: "l1", Member: "m1"},
			projector.Event{Type: "LoanRenewed", Data: []byte(`{"Loan":"l1","Member":"m1","Due":"soon"}`)},
			loanRenewed{Loan: "l1", Member: "m1", Due: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
	})
	s := newStore(t)
	e := faultEngine(t, s, r, projector.Park, raw, p)
	for i, want := range []projector.Outcome{projector.Applied, projector.Parked, projector.Applied} {
		if rs, _ := e.Handle(ctx, raw[i]); len(rs) != 1 || rs[0].Outcome != want {
			t.Fatalf("event %d: %+v, want %v", i, rs, want)
		}
	}
	all, _, _ := parkedRecords(t, s, "member_loans")
	if len(all) != 1 {
		t.Fatalf("%d records, want the undecodable event's", len(all))
	}
	pe := all[0]
	if pe.Document != "m1" || pe.StreamRevision != 1 {
		t.Errorf("record %s@%d against %q, want loan-l1@1 against m1", pe.StreamID, pe.StreamRevision, pe.Document)
	}
	if !strings.Contains(pe.Error, "does not decode") || !strings.Contains(pe.Error, `parsing time "soon"`) || !strings.Contains(pe.Error, `document "m1", fed by its stream, moved past it`) {
		t.Errorf("record's error %q, want the payload's error, and the document that moved past it", pe.Error)
	}
	if pe.Position != raw[1].Position {
		t.Errorf("record's position %d, want the event's in $all, %d", pe.Position, raw[1].Position)
	}
}

type loanDrafted struct{ Loan string }
type loanNoted struct{ Text string }

// A hole of a stream's events its router declines, under park, in a
// projection that fails unknown types: the event of a type nobody
// registered is parked against the document that moves past it, and the
// one its upcaster dropped beside it is passed over, as it is where the
// hole holds only such events. It was parked too, with the advice to route
// it or change strategies, which is not the fix of a drop.
func TestPark_a_hole_parks_the_events_that_matter_and_passes_over_a_dropped_one(t *testing.T) {
	ctx := context.Background()
	r, p := memberLoans()
	p.FailUnknownTypes()
	projector.Register[loanDrafted](r, "LoanDrafted",
		projector.Upcast("LoanDrafted", func(json.RawMessage) (loanDrafted, error) { return loanDrafted{}, projector.DropEvent }))
	writer, _ := memberLoans()
	projector.Register[loanDrafted](writer, "LoanDrafted")
	projector.Register[loanNoted](writer, "LoanNoted")
	raw := rawLog(t, writer, func(add func(string, ...any)) {
		add("loan-l1", loanOpened{Loan: "l1", Member: "m1"}, loanDrafted{Loan: "l1"}, loanNoted{Text: "called"},
			loanRenewed{Loan: "l1", Member: "m1", Due: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
	})
	s := newStore(t)
	e := faultEngine(t, s, r, projector.Park, raw, p)
	for _, ev := range raw {
		rs, _ := e.Handle(ctx, ev)
		t.Logf("%s@%d: %+v", ev.Type, ev.StreamRevision, rs)
	}
	all, _, _ := parkedRecords(t, s, "member_loans")
	if len(all) != 1 || all[0].Type != "LoanNoted" || all[0].Document != "m1" {
		t.Fatalf("%d records: want the unknown event's alone, against m1", len(all))
	}
}
