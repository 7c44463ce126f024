package neutral

import (
	"fmt"

	"github.com/revgate/projector/projector"
)

// CheckAnchor is the verdict of a source's [projector.AnchoredSource.Check]:
// head is the commit position of the last event of $all (0: none), and found
// the id of the event read at cp's position ("" for none, or when it was not
// read because cp names no event or is past the head). A checkpoint past
// the head, or with another event at its position, is foreign.
func CheckAnchor(cp projector.Checkpoint, head uint64, found string) error {
	switch {
	case cp.Position > head:
		return fmt.Errorf("%w: it is past the head of $all, %d", projector.ErrForeignCheckpoint, head)
	case cp.EventID != "" && found != cp.EventID:
		return fmt.Errorf("%w: the event at position %d is %s, not %s (head %d)", projector.ErrForeignCheckpoint, cp.Position, orNone(found), cp.EventID, head)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
