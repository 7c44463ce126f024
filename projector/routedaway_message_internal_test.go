package projector

import (
	"errors"
	"strings"
	"testing"
)

type enrolled struct{ Member string }
type redeemed struct{ Reward string }

// An event waits for earlier events of its stream that went elsewhere: the
// message names first the one that keeps it waiting (routed to another
// document), not the events before it that the router declined and that
// the projection has no handler for (those a document may pass over), which
// it counts.
func TestHole_message_names_first_the_events_that_keep_the_document_waiting(t *testing.T) {
	p := New[int]("rewards", func(ev Event) (string, bool) { return "", false })
	On(p, func(n int, _ redeemed) (int, error) { return n + 1, nil })
	var away []routedAway
	for rev := range uint64(5) {
		away = append(away, routedAway{ev: Event{ID: "e", StreamID: "member-1", StreamRevision: rev, Type: "MemberEnrolled", Payload: enrolled{"1"}}})
	}
	away = append(away, routedAway{ev: Event{ID: "bad", StreamID: "member-1", StreamRevision: 5, Type: "PointsRedeemed", Payload: redeemed{"R2"}}, to: "R2"})
	h := hole{gone: true, from: 0, to: 5, away: away}
	err := h.err(target{p: p, id: "R1"}, "member-1", 6)
	if !errors.Is(err, ErrRoutedAway) {
		t.Fatalf("err = %v, want ErrRoutedAway", err)
	}
	msg := err.Error()
	first := strings.Index(msg, "revision 5 (PointsRedeemed, id bad) is routed to document \"R2\"")
	if first < 0 {
		t.Fatalf("the message does not name the event routed to R2: %s", msg)
	}
	if strings.Contains(msg, "MemberEnrolled") || strings.Contains(msg, "revision 0") {
		t.Errorf("the message lists the declined events of types the projection does not handle: %s", msg)
	}
	if !strings.Contains(msg, "; 5 more of its events there the router declined, of types the projection has no handler for") {
		t.Errorf("the message does not count the declined events: %s", msg)
	}
}
