package projector

import "github.com/revgate/projector/projector/driver"

// StreamRevision is the revision gate: one document per stream, holding the
// revision of the last event applied. The default, and the right one whenever
// a document is fed by exactly one stream (cart details).
func StreamRevision() Strategy { return Strategy{streamRevision{}} }

// streamRevision keeps gated documents: the rule is [decide].
type streamRevision struct{ gated }

func (streamRevision) String() string { return "stream revision" }

func (streamRevision) check(d stored, ev Event, creates bool) (verdict, error) {
	return decide(ev.StreamRevision, creates, d.found, d.rev), nil
}

func (streamRevision) record(_ stored, ev Event) stored {
	return stored{found: true, rev: ev.StreamRevision}
}

// needs: every store keeps revisions.
func (streamRevision) needs(driver.Store) error { return nil }

func (streamRevision) everyRevision() bool { return true }
func (streamRevision) orderedSource() bool { return false }
