package projector_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/revgate/projector/projector"
)

type counted struct{ N int }

type bumped struct{ By int }

// bumpCarelessly is a handler that panics: it indexes past its slice.
func bumpCarelessly(s counted, e bumped) (counted, error) {
	steps := make([]int, e.By)
	s.N += steps[e.By]
	return s, nil
}

// The stack of a handler's panic names the handler's code, where it
// panicked, and leaves out the runtime's frames above it and the engine's
// below, which it counts.
func TestApply_a_panic_s_stack_is_the_handler_s(t *testing.T) {
	p := projector.New[counted]("counts", projector.StreamSuffix("c-"))
	projector.On(p, bumpCarelessly)
	_, err := p.Apply(counted{}, projector.Event{StreamID: "c-1", Payload: bumped{By: 1}})
	if !errors.Is(err, projector.ErrPanic) {
		t.Fatalf("Apply = %v, want ErrPanic", err)
	}
	first, stack, _ := strings.Cut(err.Error(), "\n")
	if !strings.Contains(first, "index out of range") {
		t.Errorf("first line %q, want the panic's value", first)
	}
	lines := strings.Split(strings.TrimSpace(stack), "\n")
	if !strings.HasPrefix(lines[0], "github.com/revgate/projector/projector_test.bumpCarelessly(") || !strings.Contains(lines[1], "panic_test.go:") {
		t.Errorf("the stack starts with %q, want the handler where it panicked:\n%s", lines[:2], stack)
	}
	if !strings.HasPrefix(lines[len(lines)-1], "(and ") || !strings.HasSuffix(lines[len(lines)-1], " frames of the engine below)") {
		t.Errorf("the stack ends with %q, want the count of the frames left out", lines[len(lines)-1])
	}
	for _, out := range []string{"runtime.gopanic", "runtime/debug", ").Apply(", "testing.tRunner"} {
		if strings.Contains(stack, out) {
			t.Errorf("the stack has %q:\n%s", out, stack)
		}
	}
}
