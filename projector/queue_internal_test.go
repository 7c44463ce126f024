package projector

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/revgate/projector/retry"
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
	go func() { waited <- e.queue.wait(ctx, nil, later) }()
	waitFor(t, "the batch and the later event waiting", func() bool { return e.queue.blocked.Load() == 2 })
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

// A batch that passes a document's events on to the gate leaves the queue
// saying neither that the document reached its revision nor that it
// failed: an event behind it still learns of a failure before the batch's
// place (a), and waits on with none (b).
func TestQueue_a_ticket_passed_on_says_neither_reached_nor_failed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := docKey{"docs", "x"}
	t.Run("behind a failure", func(t *testing.T) {
		q := newQueue()
		batch := q.enter(key, 4) // held by a batch
		failing := q.enter(key, 3)
		later := q.enter(key, 7)
		waited := make(chan error, 1)
		go func() { waited <- q.wait(ctx, nil, later) }()
		waitFor(t, "the later event waiting", func() bool { return q.blocked.Load() == 1 })
		q.leave(batch, false, errPassedOn)
		waitFor(t, "the later event waiting for the next before it", func() bool { return q.blocked.Load() == 2 })
		q.leave(failing, false, errors.New("boom"))
		if err := <-waited; !errors.Is(err, ErrPredecessorFailed) {
			t.Fatalf("waited with %v, want ErrPredecessorFailed (a passed-on ticket does not count as reached)", err)
		}
	})
	t.Run("alone", func(t *testing.T) {
		q := newQueue()
		batch := q.enter(key, 4)
		later := q.enter(key, 7)
		waited := make(chan error, 1)
		go func() { waited <- q.wait(ctx, nil, later) }()
		waitFor(t, "the later event waiting", func() bool { return q.blocked.Load() == 1 })
		q.leave(batch, false, errPassedOn)
		if err := <-waited; err != nil {
			t.Fatalf("waited with %v, want nil (a passed-on ticket is no failure)", err)
		}
	})
}

// A stopping runner's view ends its events' waits in the queue, even behind
// an event of another runner sharing the engine that still waits.
func TestQueue_a_stop_ends_a_wait_behind_another_runners_event(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := newQueue()
	key := docKey{"docs", "x"}
	other := q.enter(key, 3) // another runner's, waiting for its predecessor
	defer q.leave(other, false, nil)
	mine := q.enter(key, 4)
	stop, stopWaits := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- q.wait(ctx, stop, mine) }()
	waitFor(t, "the event waiting", func() bool { return q.blocked.Load() == 1 })
	stopWaits()
	select {
	case err := <-waited:
		if !errors.Is(err, retry.ErrStopped) {
			t.Fatalf("waited with %v, want retry.ErrStopped", err)
		}
	case <-ctx.Done():
		t.Fatal("the wait did not end at the stop")
	}
}

// A batch whose place in a document's queue comes after an event that
// failed fails the document's first event with that failure at once, and
// leaves the rest alone, instead of having the gate wait for a revision that
// cannot come.
func TestBatch_behind_a_failure_fails_its_first_event_at_once(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e := &Engine{core: &core{queue: newQueue(), logger: slog.New(slog.DiscardHandler)}}
	p := New[struct{}]("docs", func(Event) (string, bool) { return "x", true })
	b := &batchRun{Engine: e, events: []Event{{StreamID: "s", StreamRevision: 4}, {StreamID: "s", StreamRevision: 5}}}
	b.decoded, b.ready, b.out = make([]Event, 2), []bool{true, true}, make([][]Result, 2)
	copy(b.decoded, b.events)
	slow := []*docEvents{{id: "x", idx: []int{0, 1}, behind: &predecessorError{rev: 3, err: errors.New("boom")}}}
	for _, d := range slow {
		b.slowDoc(ctx, p, d)
	}
	if r := b.out[0]; len(r) != 1 || r[0].Outcome != Failed || !errors.Is(r[0].Err, ErrPredecessorFailed) {
		t.Fatalf("first event: %+v, want failed with ErrPredecessorFailed", r)
	}
	if r := b.out[1]; len(r) != 1 || !errors.Is(r[0].Err, ErrNotHandled) {
		t.Fatalf("second event: %+v, want left alone", r)
	}
}
