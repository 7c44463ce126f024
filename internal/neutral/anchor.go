package neutral

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/revgate/projector/projector"
)

// LogOf is what identifies a log of $all ([projector.AnchoredSource.Log]):
// the id of its first event and that event's commit position, as
// "<id>@<position>" ("" while $all is empty).
func LogOf(firstID string, firstCommit uint64) string {
	if firstID == "" {
		return ""
	}
	return firstID + "@" + strconv.FormatUint(firstCommit, 10)
}

// Anchor is what a source read of $all to check a checkpoint.
type Anchor struct {
	// Log is the log as it is now ([LogOf]).
	Log string
	// Head is the commit position of the last event of $all (0: none).
	Head uint64
	// Found is the id of the event read at the checkpoint's position (""
	// for none, or when it was not read because the checkpoint names no
	// event or is past the head).
	Found string
}

// CheckAnchor is the verdict of a source's [projector.AnchoredSource.Check]
// on cp, the log as a runs stored it, given what the source read now.
//
// A checkpoint past the head is foreign, and so is one with another event
// at its position. A log whose first event differs is another log when its
// first event is not past the stored one's: a node that was reset, or
// another node, starts again at the bottom of $all. A first event further
// up is the same log after a scavenge removed the records at its start
// (events of streams truncated by $maxCount, $maxAge or $tb, or deleted).
// For the same reason an event missing at the checkpoint's position is not
// a sign of another log: a scavenge removes it too.
func CheckAnchor(cp projector.Checkpoint, now Anchor) error {
	switch {
	case cp.Position > now.Head:
		return fmt.Errorf("%w: it is past the head of $all, %d", projector.ErrForeignCheckpoint, now.Head)
	case cp.EventID != "" && now.Found != "" && now.Found != cp.EventID:
		return fmt.Errorf("%w: the event at position %d is %s, not %s (head %d)", projector.ErrForeignCheckpoint, cp.Position, now.Found, cp.EventID, now.Head)
	case cp.Log == "" || cp.Log == now.Log:
		return nil
	}
	storedID, storedAt, storedOK := splitLog(cp.Log)
	nowID, nowAt, nowOK := splitLog(now.Log)
	switch {
	case storedOK && nowOK && nowAt > storedAt:
		return nil // the start of the same log was scavenged
	case !storedOK && storedID == nowID:
		return nil // stored before logs carried their position
	case nowID == "":
		return fmt.Errorf("%w: it was taken in a log whose first event is %s; this $all is empty", projector.ErrForeignCheckpoint, storedID)
	}
	return fmt.Errorf("%w: it was taken in a log whose first event is %s; this one starts with %s", projector.ErrForeignCheckpoint,
		showLog(storedID, storedAt, storedOK), showLog(nowID, nowAt, nowOK))
}

// splitLog parses a log of [LogOf]; ok is false for a bare id (as stored
// before logs carried their position) or "".
func splitLog(log string) (id string, at uint64, ok bool) {
	id, pos, found := strings.Cut(log, "@")
	if !found {
		return log, 0, false
	}
	at, err := strconv.ParseUint(pos, 10, 64)
	return id, at, err == nil
}

func showLog(id string, at uint64, ok bool) string {
	if !ok {
		return id
	}
	return fmt.Sprintf("%s (at position %d)", id, at)
}
