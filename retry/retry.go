// Package retry runs an operation again, with exponential backoff and jitter,
// until it succeeds, fails permanently, runs out of retries or its context ends.
//
// It is how the projector waits for a read model to catch up: a document that
// is not visible yet, an update that matched nothing because somebody else
// moved the document, a server that did not answer. The waiting itself is
// github.com/cenkalti/backoff/v4; this package adds a policy that flags and
// files can fill ([Policy]), a way to say an error will not go away
// ([Permanent]), a predicate and a hook, and a stop that ends the waiting
// more gently than the context ([WithStop]).
//
// A typical use:
//
//	p := retry.Default()
//	p.MaxRetries = 8
//	err := retry.Do(ctx, p, func(ctx context.Context) error {
//		return send(ctx, msg)
//	})
package retry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Option changes how one [Do] call waits.
type Option func(*loop)

// withTimer makes the loop wait on t instead of a real timer (tests pass one
// that fires at once).
func withTimer(t backoff.Timer) Option { return func(l *loop) { l.timer = t } }

// withClock makes MaxElapsed count on c instead of the wall clock.
func withClock(c backoff.Clock) Option { return func(l *loop) { l.clock = c } }

// WithStop ends the loop once stop is done, more gently than its context
// would: an attempt in progress runs to its end (under the loop's context),
// a wait in progress ends at once, and no further attempt starts. When the
// last attempt failed, [Do] returns an error that matches [ErrStopped] and
// carries that attempt's error. The first attempt runs even when stop is
// done before [Do] is called. It suits a worker that is asked to stop: what
// it has started finishes, what it waits for is left for later.
func WithStop(stop context.Context) Option { return func(l *loop) { l.stop = stop } }

// ErrStopped is what [Do] returns, wrapped with the last attempt's error,
// when the stop of [WithStop] ended it.
var ErrStopped = errors.New("retry: stopped before the next attempt")

type loop struct {
	timer backoff.Timer
	clock backoff.Clock
	stop  context.Context
}

// halted reports whether the loop's stop is done.
func (l *loop) halted() bool { return l.stop != nil && l.stop.Err() != nil }

// ExhaustedError is returned when the policy allows no further attempt.
type ExhaustedError struct {
	Attempts int           // attempts made, the first included
	Elapsed  time.Duration // from the first attempt to giving up
	Err      error         // what the last attempt returned
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("gave up after %d attempts in %v: %v", e.Attempts, e.Elapsed.Round(time.Millisecond), e.Err)
}

func (e *ExhaustedError) Unwrap() error { return e.Err }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that retrying cannot fix, such as a payload that
// does not decode or a domain rule that rejects the change. [Do] returns it at
// once. The mark survives wrapping with %w; Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// Do runs op until it returns nil, returns a permanent error or one that
// p.ShouldRetry rejects (returned as is), runs out of retries (an
// [*ExhaustedError] wrapping the last error), or ctx ends (an error that
// matches ctx.Err() with errors.Is and carries the last error too), or the
// stop of [WithStop] is done ([ErrStopped]). A cancelled context stops a wait
// at once.
func Do(ctx context.Context, p Policy, op func(ctx context.Context) error, opts ...Option) error {
	_, err := DoValue(ctx, p, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, op(ctx)
	}, opts...)
	return err
}

// DoValue is [Do] for an operation that returns a value with its error.
func DoValue[T any](ctx context.Context, p Policy, op func(ctx context.Context) (T, error), opts ...Option) (T, error) {
	var zero T
	if err := p.Validate(); err != nil {
		return zero, err
	}
	l := loop{clock: backoff.SystemClock}
	for _, o := range opts {
		o(&l)
	}
	eb := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.InitialDelay),
		backoff.WithMultiplier(p.Multiplier),
		backoff.WithRandomizationFactor(p.Jitter),
		backoff.WithMaxInterval(p.MaxDelay),
		backoff.WithMaxElapsedTime(p.MaxElapsed),
		backoff.WithClockProvider(l.clock),
	)
	var b backoff.BackOff = eb
	if p.MaxRetries >= 0 {
		b = backoff.WithMaxRetries(b, uint64(p.MaxRetries))
	}
	waits := ctx // what ends a wait between attempts
	if l.stop != nil {
		c, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(l.stop, cancel)()
		waits = c
	}
	b = backoff.WithContext(b, waits)

	start := l.clock.Now()
	attempts := 0
	var last error
	stopped := false // the attempt's own error ended the loop
	during := false  // ctx ended during an attempt, not a wait
	res, err := backoff.RetryNotifyWithTimerAndData(func() (T, error) {
		attempts++
		v, err := op(ctx)
		if err == nil {
			return v, nil
		}
		last = err
		if IsPermanent(err) || (p.ShouldRetry != nil && !p.ShouldRetry(err)) {
			stopped = true
			return v, backoff.Permanent(err)
		}
		if ctx.Err() != nil {
			during = true
			return v, backoff.Permanent(err)
		}
		if l.halted() {
			return v, backoff.Permanent(err)
		}
		return v, err
	}, b, func(err error, d time.Duration) {
		if p.OnRetry != nil {
			p.OnRetry(Attempt{Number: attempts, Delay: d, Err: err})
		}
	}, l.timer)
	switch {
	case err == nil || stopped:
		return res, err
	case ctx.Err() != nil:
		switch {
		case last == nil || errors.Is(last, ctx.Err()):
			return res, cmp.Or(last, ctx.Err())
		case during:
			return res, fmt.Errorf("%w during an attempt: %w", ctx.Err(), last)
		}
		return res, fmt.Errorf("%w while waiting to retry (last error: %w)", ctx.Err(), last)
	case l.halted():
		return res, fmt.Errorf("%w (last error: %w)", ErrStopped, last)
	default:
		return res, &ExhaustedError{Attempts: attempts, Elapsed: l.clock.Now().Sub(start), Err: err}
	}
}
