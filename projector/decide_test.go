package projector

import "testing"

// The revision gate, as a table: for the event at revision n (a creation or
// not) and the document as read, what the engine does. This is its
// specification; the event-at-a-time path, the batch path and replay ask
// decide and nothing else.
func TestDecide_the_revision_gate(t *testing.T) {
	cases := []struct {
		name    string
		n       uint64
		creates bool
		found   bool
		rev     uint64
		want    verdict
	}{
		{"the first event of a stream, no document: insert it", 0, true, false, 0, create},
		{"a creation event later in its stream, no document: insert it at its revision", 3, true, false, 0, create},
		{"the first event again, the document there: a duplicate", 0, true, true, 0, duplicate},
		{"the first event again, the document moved on: a duplicate", 0, true, true, 7, duplicate},
		{"a creation at revision 3, the document at 3: a duplicate", 3, true, true, 3, duplicate},
		{"a creation at revision 3, the document at 1: a second creation, refused", 3, true, true, 1, refuse},
		{"an event, no document yet: wait for the predecessor", 5, false, false, 0, wait},
		{"an event, the document at its predecessor: apply", 5, false, true, 4, apply},
		{"an event, the document behind its predecessor: wait", 5, false, true, 3, wait},
		{"an event, the document at it: a duplicate", 5, false, true, 5, duplicate},
		{"an event, the document past it: a duplicate", 5, false, true, 9, duplicate},
		{"revision 1 after the creation at 0: apply", 1, false, true, 0, apply},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := decide(c.n, c.creates, c.found, c.rev); got != c.want {
				t.Fatalf("decide(n=%d, creates=%v, found=%v, rev=%d) = %v, want %v", c.n, c.creates, c.found, c.rev, got, c.want)
			}
		})
	}
}
