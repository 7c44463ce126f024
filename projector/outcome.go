package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/revgate/projector/retry"
)

// Outcome is what handling an event did to one projection's document.
type Outcome int

const (
	// Applied: the event changed the document (or advanced its revision).
	Applied Outcome = iota + 1
	// Duplicate: the document had the event's effect already; nothing written.
	Duplicate
	// Failed: the event was not applied; Result.Err says why.
	Failed
	// Skipped: the event failed permanently (Result.Err says why) and, under
	// the [Skip] policy, the document's revision moved past it with its state
	// unchanged, so the stream's later events apply.
	Skipped
	// Parked: as Skipped, under the [Park] policy: the event was recorded
	// first.
	Parked
	// Held: under the [Hold] policy, the event was recorded and not
	// applied, and the document stays before it: it failed permanently, or
	// an earlier event of its document did and holds it.
	Held
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Failed:
		return "failed"
	case Skipped:
		return "skipped"
	case Parked:
		return "parked"
	case Held:
		return "held"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// FailurePolicy is what the gate does with an event that fails permanently:
// a payload that does not decode, a domain error, a projection that panics.
// Transient failures (a predecessor that does not arrive in time, a store that
// does not answer) are always [Failed]: nothing can be skipped safely then.
type FailurePolicy int

const (
	// Block leaves the document at the revision before the event and reports
	// the event [Failed]; the stream's later events for that document wait for
	// it, and fail in turn. Nothing is lost: someone must look.
	Block FailurePolicy = iota
	// Skip moves the document's revision past the event with its state
	// unchanged and reports it [Skipped], so the rest of the stream flows. The
	// document is then the fold of the stream without that event. A skipped
	// creation event creates the document with the zero state.
	Skip
	// Park is Skip that first records the event, the error and the attempts
	// with the engine's [Parker], so that it can be looked at and replayed
	// ([Engine.Replay]) once the projection is fixed. It reports [Parked].
	Park
	// Hold holds back only the failing document: the event is recorded
	// with the engine's [Parker] and not applied, the document stays
	// before it, and every later event of that document is recorded behind
	// it, in order, without being applied ([Held]). The other documents go
	// on, and the checkpoint moves. Once the projection is fixed,
	// [Engine.ReplayHeld] applies a held document's events in order
	// through the gate: all of them, or none past the first that still
	// fails. It needs a document that knows which events it has applied:
	// the [StreamRevision] or [RevisionMap] strategy (and a [Holder] as
	// the parker), and one consumer reading the log in order. Under
	// RevisionMap an event of another stream already in flight when the
	// hold begins may still apply. Events gone from the event store
	// ([ErrRevisionsGone]) do not hold a document, which no fix could
	// release: it moves past them, and the hole is recorded, as under Park.
	Hold
)

// known reports whether p is one of the policies above.
func (p FailurePolicy) known() bool { return p >= Block && p <= Hold }

func (p FailurePolicy) String() string {
	switch p {
	case Block:
		return "block"
	case Skip:
		return "skip"
	case Park:
		return "park"
	case Hold:
		return "hold"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(p))
}

// Result is the outcome of one event in one projection.
type Result struct {
	Projection string
	Document   string
	Outcome    Outcome
	// Waits is how many times the gate waited with backoff for the document
	// to reach the event's predecessor (or for a write that matched nothing).
	Waits int
	// Err is set when Outcome is Failed, Skipped, Parked or Held: an
	// [*Error] (errors.As), which says the event and why, except for an
	// event of a batch left alone ([ErrNotHandled]) and a replay of a
	// projection the engine does not run ([ErrUnknownProjection]).
	Err error
}

func joinFailures(results []Result) error {
	var errs []error
	for _, r := range results {
		if r.Outcome == Failed {
			errs = append(errs, r.Err)
		}
	}
	return errors.Join(errs...)
}

// stoppedWaiting reports whether results failed only because their waits
// were stopped ([Engine.waitsEndAt]): the event is not handled, and is no failure
// of its own. A failure of another kind beside one stopped is a failure.
func stoppedWaiting(results []Result) bool {
	stopped := false
	for _, r := range results {
		switch {
		case r.Outcome != Failed:
		case errors.Is(r.Err, retry.ErrStopped):
			stopped = true
		default:
			return false
		}
	}
	return stopped
}

// failure is why an event failed in a document, and where the gate was: what
// an [*Error] reports.
type failure struct {
	err error
	// wanted is the revision the gate waited for; seen the one it saw last
	// (-1 each: none).
	wanted, seen int64
	attempts     int
}

// permanent is the failure of an event that cannot apply, found before any
// wait.
func permanent(err error) failure {
	return failure{err: retry.Permanent(err), wanted: -1, seen: -1}
}

// fail builds the failed result of ev in document t, and logs it at Error
// (at Warn when it may succeed when tried again): under the block policy,
// its runner stops there.
func (e *Engine) fail(t target, ev Event, f failure) Result {
	return e.report(t, ev, f, Failed)
}

// report builds the result of ev in document t that failed with f, as
// outcome (Failed; Skipped or Parked: the document moved past it; Held:
// recorded behind the event that holds its document), and logs it: a failure
// for good at Error, the others at Warn.
func (e *Engine) report(t target, ev Event, f failure, outcome Outcome) Result {
	err := &Error{
		Projection: t.p.Name(), Document: t.id, Stream: ev.StreamID,
		EventID: ev.ID, EventType: ev.Type, Revision: ev.StreamRevision,
		Wanted: f.wanted, Seen: f.seen, Attempts: f.attempts, Err: f.err,
	}
	if !errors.Is(f.err, context.Canceled) && !errors.Is(f.err, retry.ErrStopped) {
		// A panic's error holds its stack after its first line: apart, the
		// error reads as one line.
		attrs := []any{"projection", t.p.Name(), "document", t.id, "stream", ev.StreamID,
			"revision", ev.StreamRevision, "type", ev.Type, "retryable", err.Retryable(), "err", f.err}
		if first, stack, ok := strings.Cut(f.err.Error(), "\n"); ok && errors.Is(f.err, ErrPanic) {
			attrs = append(attrs[:len(attrs)-1], first, "stack", stack)
		}
		level, msg := slog.LevelError, "event failed"
		switch {
		case outcome == Failed && errors.Is(f.err, ErrPredecessorFailed):
			level = slog.LevelWarn // the earlier event's failure is the one logged at Error
		case outcome == Failed && errors.Is(f.err, ErrHeld):
			// Held behind the event that holds its document, where it is
			// recorded and logged as held: no failure of its own.
			level = slog.LevelDebug
		case outcome == Failed && err.Retryable():
			// It is tried again (a group delivers it again, a runner
			// resumes from its checkpoint, which logs it stopped): not
			// an error yet.
			level = slog.LevelWarn
		case outcome == Failed && e.policyOf(t.p) == Hold:
			// Its document is held at it next ("document held", at Warn,
			// holdFailed): quarantined, as a parked event is, not an error
			// that stops anything.
			level = slog.LevelWarn
		}
		switch outcome {
		case Skipped:
			level, msg = slog.LevelWarn, "event skipped"
		case Parked:
			level, msg = slog.LevelWarn, "event parked"
		case Held:
			level, msg = slog.LevelWarn, "event held"
			if errors.Is(f.err, ErrHeld) {
				// Behind the event that holds its document, which was
				// logged: one line each would flood the log of a busy
				// document held for hours (projector_events_total and
				// status count them).
				level = slog.LevelDebug
			}
		}
		e.logger.Log(context.Background(), level, msg, attrs...)
	}
	return Result{Projection: t.p.Name(), Document: t.id, Outcome: outcome, Err: err}
}

// result is the outcome of a pass: skipped turns Applied into Skipped, or
// Parked under the [Park] policy (and under [Hold], which parks a stray).
func (e *Engine) result(t target, ev Event, outcome Outcome, waits int, skipped error) Result {
	if outcome == Applied && skipped != nil {
		outcome = Skipped
		if pol := e.policyOf(t.p); pol == Park || pol == Hold {
			// Recorded (park): under hold, a stray, which holds no
			// document (refuseStray).
			outcome = Parked
		}
		r := e.report(t, ev, permanent(skipped), outcome)
		r.Waits = waits
		return r
	}
	return Result{Projection: t.p.Name(), Document: t.id, Outcome: outcome, Waits: waits}
}
