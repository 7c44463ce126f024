package app

import (
	"errors"
	"fmt"
	"strings"

	"github.com/revgate/projector/projector"
)

// blockedHint adds to err, when an event failed for good under the block
// policy (blocks: the projection's engine's), how to go on past it: the
// command (run, rebuild) again, or with another --on-failure, unless the
// projection blocks by its own OnFailure (flag, the one given, is not
// block then).
func blockedHint(err error, p Projection, blocks bool, command string, flag projector.FailurePolicy) error {
	var fe *projector.Error
	if !blocks || !errors.As(err, &fe) || fe.Retryable() {
		return err
	}
	if flag != projector.Block {
		return withHint(err, fmt.Sprintf("its own OnFailure(projector.Block) stops %s at an event that fails for good, whatever --on-failure says: fix the cause and start %s again, and it resumes there", p.Definition.Name(), command))
	}
	aside := "park"
	if projector.Check(p.Definition, projector.Hold, true) == nil {
		aside = "hold or park (hold: its document stops at it, its later events recorded behind it; park: the document moves past it)"
	}
	return withHint(err, fmt.Sprintf("%s stops at an event that fails for good under --on-failure block: fix the cause and start it again, and it resumes there; or start it with --on-failure %s to set such events aside, for replay-parked to apply once fixed, or skip to pass them over", command, aside))
}

// hinted is an error with what to do about it, said at the end of its
// first line (a panic's error holds its stack after it, and a command's
// last line shows the first).
type hinted struct {
	err  error
	hint string
}

func withHint(err error, hint string) error { return &hinted{err, hint} }

func (h *hinted) Error() string {
	first, rest, more := strings.Cut(h.err.Error(), "\n")
	if !more {
		return first + " (" + h.hint + ")"
	}
	return first + " (" + h.hint + ")\n" + rest
}

func (h *hinted) Unwrap() error { return h.err }

// blocks reports whether eng's failure policy for p is block.
func blocks(eng *projector.Engine, p Projection) bool {
	pol, _ := eng.FailurePolicy(p.Definition.Name())
	return pol == projector.Block
}
