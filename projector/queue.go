package projector

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/revgate/projector/retry"
)

// queue orders the events of one document that are in flight in one engine:
// an event waits, without touching the store, until every event of the same
// document with a lower revision (or the same revision, arrived earlier) has
// finished. Only the lowest revision in flight polls the store for its
// predecessor, and when it fails, those queued behind it fail at once.
//
// It holds only what is in flight; entries go when their last event finishes.
type queue struct {
	mu   sync.Mutex
	seq  uint64
	docs map[docKey][]*ticket
	// blocked counts the times a wait has blocked on a predecessor (for
	// tests).
	blocked atomic.Int64
}

type docKey struct{ collection, id string }

type ticket struct {
	key  docKey
	rev  uint64
	seq  uint64
	done chan struct{}
	// Set before done is closed.
	advanced bool // the document reached rev (applied, or found applied)
	err      error
}

func newQueue() *queue { return &queue{docs: map[docKey][]*ticket{}} }

func (t *ticket) before(u *ticket) bool {
	return t.rev < u.rev || (t.rev == u.rev && t.seq < u.seq)
}

// enter registers an event of document key at revision rev.
func (q *queue) enter(key docKey, rev uint64) *ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	t := &ticket{key: key, rev: rev, seq: q.seq, done: make(chan struct{})}
	q.docs[key] = append(q.docs[key], t)
	return t
}

// predecessor returns the latest ticket of t's document that comes before t.
func (q *queue) predecessor(t *ticket) *ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	var pred *ticket
	for _, u := range q.docs[t.key] {
		if u.before(t) && (pred == nil || pred.before(u)) {
			pred = u
		}
	}
	return pred
}

// wait blocks until no event before t is in flight. It returns an error
// wrapping ErrPredecessorFailed when one with a lower revision failed and none
// reached that revision after it, the context's error, or, once stop (when
// not nil) is done, an error wrapping [retry.ErrStopped] (a stopping
// runner's: see [Engine.waitsEndAt]).
func (q *queue) wait(ctx, stop context.Context, t *ticket) error {
	var stopped <-chan struct{}
	if stop != nil {
		stopped = stop.Done()
	}
	var failed *ticket
	var reached uint64
	anyReached := false
	for {
		pred := q.predecessor(t)
		if pred == nil {
			break
		}
		q.blocked.Add(1)
		select {
		case <-pred.done:
		case <-ctx.Done():
			return ctx.Err()
		case <-stopped:
			return fmt.Errorf("waiting for an earlier event of the document: %w", retry.ErrStopped)
		}
		switch {
		case errors.Is(pred.err, retry.ErrStopped), errors.Is(pred.err, errPassedOn):
			// Its runner stopped its wait, or its events went on through
			// the gate: neither reached nor failed. The document is where
			// it was; t waits for it itself, under its own runner's stop.
		case pred.advanced:
			if !anyReached || pred.rev > reached {
				reached, anyReached = pred.rev, true
			}
		case pred.rev < t.rev && (failed == nil || pred.rev > failed.rev):
			failed = pred
		}
	}
	if failed != nil && (!anyReached || reached < failed.rev) {
		var root *predecessorError
		if errors.As(failed.err, &root) {
			// It failed behind an earlier one: named is the one that failed
			// first, not each in between (a message that grew with each).
			return root
		}
		return &predecessorError{rev: failed.rev, err: failed.err}
	}
	return nil
}

// errPassedOn is how a batch leaves a document's queue when it passes the
// document's events on to the gate, each to be queued on its own.
var errPassedOn = errors.New("events passed on to the gate")

// leave finishes t and wakes those queued behind it: advanced when the
// document reached t's revision; err when t failed (an event behind it then
// fails too, unless another reached that revision).
func (q *queue) leave(t *ticket, advanced bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ts := q.docs[t.key]
	for i, u := range ts {
		if u == t {
			ts = append(ts[:i], ts[i+1:]...)
			break
		}
	}
	if len(ts) == 0 {
		delete(q.docs, t.key)
	} else {
		q.docs[t.key] = ts
	}
	t.advanced, t.err = advanced, err
	close(t.done)
}

// inFlight returns how many events are in flight.
func (q *queue) inFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, ts := range q.docs {
		n += len(ts)
	}
	return n
}

type predecessorError struct {
	rev uint64
	err error
}

func (e *predecessorError) Error() string {
	return "event at revision " + strconv.FormatUint(e.rev, 10) + " of this document failed: " + e.err.Error()
}

func (e *predecessorError) Unwrap() []error { return []error{ErrPredecessorFailed, e.err} }
