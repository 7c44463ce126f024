package projector

import (
	"fmt"
	"runtime"
	"strings"
)

// panicStack is the stack of a panic that Apply recovered, called from its
// deferred function: from where the panic was raised down to the handler
// Apply called, the frames of the projection's own code. The runtime's
// frames above them and the engine's below are left out: a log line or a
// parked record of a panic names the handler's code, not 70 frames of the
// engine's.
func panicStack() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs) // runtime.Callers, panicStack, Apply's deferred function
	frames := runtime.CallersFrames(pcs[:n])
	var b strings.Builder
	raised, below := false, 0
	for {
		f, more := frames.Next()
		switch {
		case !raised && strings.HasPrefix(f.Function, "runtime."):
			// gopanic, and sigpanic and panicmem for a fault
		case below > 0 || isApply(f.Function):
			below++
		default:
			raised = true
			fmt.Fprintf(&b, "%s(...)\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			break
		}
	}
	if below > 0 {
		fmt.Fprintf(&b, "(and %d frames of the engine below)\n", below)
	}
	return b.String()
}

// isApply reports whether function names Projection.Apply, of any state
// type.
func isApply(function string) bool {
	return strings.Contains(function, "projector.(*Projection[") && strings.HasSuffix(function, "]).Apply")
}
