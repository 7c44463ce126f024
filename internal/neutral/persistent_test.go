package neutral

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/retry"
)

// Under the block policy a persistent group's consumer parks, after its
// deliveries, an event that kept failing, and its document stays behind
// it: each later event of that document fails waiting for it. Those are
// parked at once, not handed back up to MaxDeliveries times (each a wait
// of the gate's, each holding a place in the group's buffer, so that the
// other documents' events hardly got through). An event that waits on a
// document that is not behind a parked one, or that fails for good, is
// settled as before.
func TestConsumer_parks_at_once_an_event_of_a_document_behind_one_it_parked(t *testing.T) {
	o := &ConsumerOptions{Stream: "$all", Group: "g", OnPermanentFailure: ActionRetry}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	failed := func(doc string, err error) []projector.Result {
		return []projector.Result{{Projection: "accounts", Document: doc, Outcome: projector.Failed,
			Err: &projector.Error{Projection: "accounts", Document: doc, Err: err}}}
	}
	waited := fmt.Errorf("%w: gave up after 6 attempts", projector.ErrPredecessorMissing)
	domain := retry.Permanent(errors.New("insufficient funds"))
	var l Ledger
	// The failing event, on its last delivery: parked, its document behind it.
	s := o.Decide(failed("a-1", domain), o.MaxDeliveries)
	l.Note(failed("a-1", domain), s)
	if s.Action != ActionPark || len(l.Blocked()) != 1 {
		t.Fatalf("the failing event on its last delivery: %+v, blocked %v; want parked, a-1 behind it", s, l.Blocked())
	}
	if why, ok := l.behind(failed("a-1", waited)); !ok || !strings.Contains(why, "insufficient funds") {
		t.Errorf("a later event of a-1, waiting for it: behind %v (%q); want behind, saying why", ok, why)
	}
	// Parked at once in turn, it leaves why a-1 stays behind as it was:
	// the first event's failure, not a reason that grows with each.
	l.Note(failed("a-1", waited), Settlement{Action: ActionPark, Reason: "its document stays behind an event parked in the group: ..."})
	if why, _ := l.behind(failed("a-1", waited)); why != s.Reason {
		t.Errorf("after a later event parked at once, a-1 is behind %q, want %q", why, s.Reason)
	}
	for name, rs := range map[string][]projector.Result{
		"waiting on another document": failed("a-2", waited),
		"failing for good on a-1":     failed("a-1", domain),
		"applied":                     {{Projection: "accounts", Document: "a-1", Outcome: projector.Applied}},
		"on a-1 and another document": append(failed("a-1", waited), failed("a-2", waited)...),
	} {
		if _, ok := l.behind(rs); ok {
			t.Errorf("%s: behind; want it settled as before", name)
		}
	}
	// Once the document applies an event again (the parked ones replayed),
	// it is behind nothing.
	l.Note([]projector.Result{{Projection: "accounts", Document: "a-1", Outcome: projector.Applied}}, Settlement{Ack: true})
	if _, ok := l.behind(failed("a-1", waited)); ok || len(l.Blocked()) != 0 {
		t.Errorf("after a-1 applied an event: behind %v, blocked %v; want neither", ok, l.Blocked())
	}
}
