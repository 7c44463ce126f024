package projector_test

import (
	"context"
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
