package projector

import (
	"errors"
	"strings"
	"testing"
)

// The others that failed as a run stopped are named on the first failure's
// first line, before its stack, and the first failure is still found.
func TestAlsoFailed_names_the_others_on_the_first_line(t *testing.T) {
	first := &Error{Projection: "p", Document: "a", Err: errors.New("projection panicked: boom\ngoroutine 7 [running]:\nmain.f()")}
	x := &run{failure: first, alsoFailed: []error{errors.New("bad b\nmore of b"), errors.New("bad c")}}
	x.nameAlsoFailed()
	line, rest, _ := strings.Cut(x.failure.Error(), "\n")
	if !strings.Contains(line, "boom (and, as it stopped, bad b; bad c)") || !strings.HasPrefix(rest, "goroutine 7") || strings.Contains(x.failure.Error(), "more of b") {
		t.Errorf("failure %q", x.failure.Error())
	}
	var fe *Error
	if !errors.As(x.failure, &fe) || fe != first {
		t.Errorf("errors.As found %v, want the first failure", fe)
	}
}
