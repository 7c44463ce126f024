package projector

// verdict is what the engine does with an event, given the document as
// read: the decision of the revision gate (and of the other strategies'
// checks).
type verdict int

const (
	// create: no document yet, and the event creates it: insert it.
	create verdict = iota + 1
	// apply: the document is at the event's predecessor: apply the event
	// to the state read and write it, conditional on what was read.
	apply
	// duplicate: the document has the event's effect already: write nothing.
	duplicate
	// wait: the event's predecessor is not there yet (not applied, or not
	// visible yet): read again later.
	wait
	// refuse: the event can never apply to this document: a second
	// creation of it ([ErrAlreadyCreated]), or, under HandledIDs, an event
	// older than the window. It fails permanently, and the failure policy
	// says whether the document moves past it.
	refuse
)

func (v verdict) String() string {
	switch v {
	case create:
		return "create"
	case apply:
		return "apply"
	case duplicate:
		return "duplicate"
	case wait:
		return "wait"
	case refuse:
		return "refuse"
	}
	return "verdict(?)"
}

// decide is the revision gate: for the event at stream revision n of a
// document fed by one stream (creates: the event starts the document: it is
// at revision 0 or of a type registered with [Create]), given the document
// as read (found, at revision rev), what to do. It is the one place this
// rule lives: the event-at-a-time path, the batch path and replay all ask
// it, and its table test is its specification.
func decide(n uint64, creates, found bool, rev uint64) verdict {
	switch {
	case !found && creates:
		return create
	case !found:
		return wait // the predecessor has not been applied, or is not visible yet
	case rev >= n:
		return duplicate // the document is at the event or past it
	case creates:
		return refuse // created already, at an earlier revision
	case rev == n-1:
		return apply
	}
	return wait // the document is behind the predecessor
}
