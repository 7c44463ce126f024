package projector

import (
	"errors"
	"fmt"
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

// A failure said again as the run stops (a loss of writes held back,
// which every flush of its collection reports until the run ends) is
// named once; another one is named beside it.
func TestAlsoFailed_names_the_same_failure_once(t *testing.T) {
	x := &run{r: &Runner{name: "r"}, stopRead: func() {}, stopWaits: func() {}}
	lost := errors.New(`mongostore: document "a" of totals, held back for batched catch-up, was changed by another writer after this store read it`)
	x.fail(fmt.Errorf("projector: writing the documents held back: %w", lost))
	x.fail(fmt.Errorf("projector: writing the documents held back: %w", lost))
	x.fail(errors.New("bad c"))
	x.fail(errors.New("bad c"))
	x.nameAlsoFailed()
	msg := x.failure.Error()
	if n := strings.Count(msg, "another writer"); n != 1 || strings.Count(msg, "bad c") != 1 {
		t.Errorf("failure %q: want the loss and bad c each named once", msg)
	}
}
