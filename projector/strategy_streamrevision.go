package projector

import (
	"fmt"

	"github.com/revgate/projector/projector/driver"
)

// StreamRevision is the revision gate: one document per stream, holding the
// revision of the last event applied. The default, and the right one whenever
// a document is fed by exactly one stream (cart details).
func StreamRevision() Strategy { return Strategy{streamRevision{}} }

// streamRevision keeps gated documents: the rule is [decide], for the events
// of the one stream that feeds the document.
type streamRevision struct{ gated }

func (streamRevision) String() string { return "stream revision" }

// check refuses an event of another stream than the document's own: its
// revision says nothing of this document, and counting it a duplicate (or
// applying it) would lose updates without an error.
func (streamRevision) check(d stored, ev Event, creates bool) (verdict, error) {
	if d.found && d.stream != "" && d.stream != ev.StreamID {
		return refuse, fmt.Errorf("%w: the document is fed by stream %q, and this event is of stream %q; "+
			"a document fed by several streams needs the RevisionMap, HandledIDs or Inbox strategy",
			ErrOtherStream, d.stream, ev.StreamID)
	}
	return decide(ev.StreamRevision, creates, d.found, d.rev), nil
}

func (streamRevision) record(_ stored, ev Event) stored {
	return stored{found: true, rev: ev.StreamRevision, stream: ev.StreamID}
}

// needs: every store keeps revisions.
func (streamRevision) needs(driver.Store) error { return nil }

func (streamRevision) everyRevision() bool { return true }
func (streamRevision) orderedSource() bool { return false }
