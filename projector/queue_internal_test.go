package projector

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A batch that finds a failed event before its own in a document's queue
// does not write the document, and leaves the queue saying so: an event
// behind it learns of the failure at once, instead of reading the batch's
// place as the document reached and waiting for a revision that cannot
// come.
func TestBatchEnter_behind_a_failure_passes_the_failure_on(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e := &Engine{core: &core{queue: newQueue()}}
	key := docKey{"docs", "x"}
	failing := e.queue.enter(key, 3) // an event at revision 3, handled alone, about to fail
	b := &batchRun{Engine: e, events: []Event{{StreamRevision: 4}, {StreamRevision: 5}}}
	entered := make(chan []*docEvents, 1)
	go func() {
		_, slow := b.enter(ctx, New[struct{}]("docs", func(Event) (string, bool) { return "x", true }), []*docEvents{{id: "x", idx: []int{0, 1}}})
		entered <- slow
	}()
	later := e.queue.enter(key, 7) // an event at revision 7, behind both
	waited := make(chan error, 1)
	go func() { waited <- e.queue.wait(ctx, later) }()
	waitFor(t, "the batch and the later event waiting", func() bool { return e.queue.waiting.Load() == 2 })
	e.queue.leave(failing, false, errors.New("boom"))
	if slow := <-entered; len(slow) != 1 {
		t.Fatalf("the batch held the document behind the failure: slow %v", slow)
	}
	if err := <-waited; !errors.Is(err, ErrPredecessorFailed) {
		t.Fatalf("the event behind the batch waited with %v, want ErrPredecessorFailed", err)
	}
}

// waitFor waits until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
