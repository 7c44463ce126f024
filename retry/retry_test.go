package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/retry"
)

// virtualTime is a Timer and a Clock in one: every wait ends at once and moves
// the clock forward by its length, so tests see the delays without sleeping.
type virtualTime struct {
	now   time.Time
	waits []time.Duration
	c     chan time.Time
}

func newVirtualTime() *virtualTime {
	return &virtualTime{now: time.Unix(0, 0), c: make(chan time.Time, 1)}
}

func (v *virtualTime) Start(d time.Duration) {
	v.now = v.now.Add(d)
	v.waits = append(v.waits, d)
	v.c <- v.now
}
func (v *virtualTime) Stop()               {}
func (v *virtualTime) C() <-chan time.Time { return v.c }
func (v *virtualTime) Now() time.Time      { return v.now }

func (v *virtualTime) opts() []retry.Option {
	return []retry.Option{retry.WithTimer(v), retry.WithClock(v)}
}

var errFlaky = errors.New("flaky")

// failing returns an operation that fails n times, then succeeds.
func failing(n int, calls *int) func(context.Context) error {
	return func(context.Context) error {
		*calls++
		if *calls <= n {
			return errFlaky
		}
		return nil
	}
}

func TestDo_succeeds_after_transient_failures_with_growing_waits(t *testing.T) {
	vt := newVirtualTime()
	p := retry.Default()
	var calls int
	if err := retry.Do(context.Background(), p, failing(3, &calls), vt.opts()...); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if calls != 4 {
		t.Fatalf("calls = %d, want 4", calls)
	}
	if len(vt.waits) != 3 {
		t.Fatalf("waits = %v, want 3", vt.waits)
	}
	for i, w := range vt.waits {
		if lo, hi := retry.Band(p, i); w < lo || w > hi {
			t.Errorf("wait %d = %v, outside [%v, %v]", i, w, lo, hi)
		}
	}
}

func TestDo_gives_up_after_max_retries_with_exhausted_error(t *testing.T) {
	vt := newVirtualTime()
	p := retry.Default()
	p.Jitter = 0
	var calls int
	err := retry.Do(context.Background(), p, failing(100, &calls), vt.opts()...)
	var ex *retry.ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("err = %v, want *ExhaustedError", err)
	}
	if calls != p.MaxRetries+1 || ex.Attempts != calls {
		t.Fatalf("calls = %d, attempts = %d, want %d", calls, ex.Attempts, p.MaxRetries+1)
	}
	if !errors.Is(err, errFlaky) {
		t.Fatalf("exhausted error does not wrap the last error: %v", err)
	}
	want := []time.Duration{100, 200, 400, 800, 1600}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if len(vt.waits) != len(want) {
		t.Fatalf("waits = %v, want %v", vt.waits, want)
	}
	for i := range want {
		if vt.waits[i] != want[i] {
			t.Fatalf("waits = %v, want %v", vt.waits, want)
		}
	}
	if ex.Elapsed != p.MaxWait() {
		t.Fatalf("elapsed %v, want the policy's max wait %v", ex.Elapsed, p.MaxWait())
	}
}

func TestDo_does_not_retry_permanent_errors(t *testing.T) {
	domain := errors.New("cannot remove 3 items, cart holds 1")
	var calls int
	err := retry.Do(context.Background(), retry.Default(), func(context.Context) error {
		calls++
		return retry.Permanent(domain)
	})
	if calls != 1 {
		t.Fatalf("calls = %d, want 1", calls)
	}
	if !errors.Is(err, domain) || !retry.IsPermanent(err) {
		t.Fatalf("err = %v: want the domain error, marked permanent", err)
	}
	var ex *retry.ExhaustedError
	if errors.As(err, &ex) {
		t.Fatalf("a permanent error is not an exhaustion: %v", err)
	}
}

func TestDo_stops_when_should_retry_says_no(t *testing.T) {
	var calls, asked int
	p := retry.Default()
	p.ShouldRetry = func(err error) bool { asked++; return !errors.Is(err, errFlaky) }
	err := retry.Do(context.Background(), p, failing(5, &calls))
	if calls != 1 || asked != 1 || !errors.Is(err, errFlaky) {
		t.Fatalf("calls=%d asked=%d err=%v", calls, asked, err)
	}
}

func TestDo_max_elapsed_cuts_the_loop_before_a_wait_that_would_pass_it(t *testing.T) {
	vt := newVirtualTime()
	p := retry.Default()
	p.Jitter = 0
	p.MaxRetries = -1
	p.MaxElapsed = 350 * time.Millisecond
	var calls int
	err := retry.Do(context.Background(), p, failing(100, &calls), vt.opts()...)
	var ex *retry.ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("err = %v", err)
	}
	// Waits 100 ms and 200 ms fit in 350 ms; a third of 400 ms would not.
	if calls != 3 || len(vt.waits) != 2 {
		t.Fatalf("calls = %d, waits = %v", calls, vt.waits)
	}
	if p.MaxWait() != p.MaxElapsed {
		t.Fatalf("MaxWait = %v, want MaxElapsed", p.MaxWait())
	}
}

func TestDo_on_retry_hook_sees_each_failed_attempt_and_its_delay(t *testing.T) {
	vt := newVirtualTime()
	p := retry.Default()
	var seen []retry.Attempt
	p.OnRetry = func(a retry.Attempt) { seen = append(seen, a) }
	var calls int
	if err := retry.Do(context.Background(), p, failing(2, &calls), vt.opts()...); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("hook calls = %d, want 2", len(seen))
	}
	for i, a := range seen {
		if a.Number != i+1 || a.Delay != vt.waits[i] || !errors.Is(a.Err, errFlaky) {
			t.Errorf("attempt %d = %+v, waits %v", i, a, vt.waits)
		}
	}
}

func TestDo_context_cancel_stops_a_wait_at_once(t *testing.T) {
	p := retry.Default()
	p.InitialDelay = time.Hour
	p.MaxDelay = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	var calls int
	err := retry.Do(ctx, p, failing(100, &calls))
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("cancel took %v to stop the wait", took)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errFlaky) {
		t.Fatalf("err = %v: want both the cancellation and the last error", err)
	}
	if calls != 1 {
		t.Fatalf("calls = %d, want 1", calls)
	}
}

// A context that ends during an attempt, whose error does not say so (a
// driver's "server selection error"), still gives an error that matches
// ctx.Err(), with the attempt's.
func TestDo_context_ended_during_an_attempt_matches_ctx_err_and_keeps_the_attempts_error(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	attempts := 0
	err := retry.Do(ctx, retry.Default(), func(context.Context) error {
		attempts++
		cancel()
		return errFlaky
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errFlaky) {
		t.Fatalf("err = %v: want both the cancellation and the attempt's error", err)
	}
	if want := "context canceled during an attempt: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %q, want it to begin %q", err, want)
	}
	if attempts != 1 {
		t.Errorf("attempts = %d, want 1", attempts)
	}
	// An attempt's error that says so already is returned as it is.
	ctx2, cancel2 := context.WithCancel(context.Background())
	own := fmt.Errorf("read: %w", context.Canceled)
	err = retry.Do(ctx2, retry.Default(), func(context.Context) error { cancel2(); return own })
	if err != own {
		t.Errorf("err = %v, want the attempt's own %v", err, own)
	}
}

func TestDo_returns_the_value_of_the_successful_attempt(t *testing.T) {
	vt := newVirtualTime()
	n := 0
	v, err := retry.DoValue(context.Background(), retry.Default(), func(context.Context) (int, error) {
		n++
		if n < 3 {
			return 0, errFlaky
		}
		return 42, nil
	}, vt.opts()...)
	if err != nil || v != 42 {
		t.Fatalf("v, err = %v, %v", v, err)
	}
}

func TestPolicy_validate(t *testing.T) {
	mod := func(f func(*retry.Policy)) retry.Policy { p := retry.Default(); f(&p); return p }
	cases := []struct {
		name string
		p    retry.Policy
		want string // "" = valid
	}{
		{"default", retry.Default(), ""},
		{"zero value", retry.Policy{}, "initial delay"},
		{"shrinking", mod(func(p *retry.Policy) { p.Multiplier = 0.5 }), "multiplier"},
		{"jitter one", mod(func(p *retry.Policy) { p.Jitter = 1 }), "jitter"},
		// NaN compares false with every bound: a NaN multiplier made the
		// waits nothing, a NaN jitter no backoff at all.
		{"multiplier NaN", mod(func(p *retry.Policy) { p.Multiplier = math.NaN() }), "multiplier"},
		{"multiplier +Inf", mod(func(p *retry.Policy) { p.Multiplier = math.Inf(1) }), "multiplier"},
		{"jitter NaN", mod(func(p *retry.Policy) { p.Jitter = math.NaN() }), "jitter"},
		{"max below initial", mod(func(p *retry.Policy) { p.MaxDelay = time.Millisecond }), "max delay"},
		{"unbounded", mod(func(p *retry.Policy) { p.MaxRetries = -1 }), "unlimited"},
		{"unlimited count with time bound", mod(func(p *retry.Policy) { p.MaxRetries = -1; p.MaxElapsed = time.Minute }), ""},
		{"no retries", mod(func(p *retry.Policy) { p.MaxRetries = 0 }), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			if c.want == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
	var calls int
	if err := retry.Do(context.Background(), retry.Policy{}, failing(0, &calls)); err == nil || calls != 0 {
		t.Fatalf("Do ran an invalid policy: calls=%d err=%v", calls, err)
	}
}

func TestPolicy_jittered_waits_stay_in_their_windows(t *testing.T) {
	p := retry.Default()
	p.MaxRetries = 8
	sched := p.Schedule(0)
	for range 200 {
		vt := newVirtualTime()
		var calls int
		_ = retry.Do(context.Background(), p, failing(100, &calls), vt.opts()...)
		if len(vt.waits) != 8 {
			t.Fatalf("waits = %d, want 8", len(vt.waits))
		}
		for i, w := range vt.waits {
			if lo, hi := retry.Band(p, i); w < lo || w > hi {
				t.Fatalf("wait %d = %v outside [%v, %v]", i, w, lo, hi)
			}
		}
	}
	// The nominal delay doubles until MaxDelay, then stays there.
	if sched[6] != p.MaxDelay || sched[7] != p.MaxDelay || sched[5] != 3200*time.Millisecond {
		t.Fatalf("schedule = %+v", sched)
	}
}

// A stop ends the wait in progress at once and starts no further attempt;
// the error says it stopped and carries the last attempt's error, and is not
// a cancellation of the loop's context.
func TestDo_a_stop_ends_the_wait_and_makes_no_further_attempt(t *testing.T) {
	p := retry.Default()
	p.InitialDelay, p.MaxDelay, p.MaxRetries, p.MaxElapsed = time.Hour, time.Hour, -1, 10*time.Hour
	stop, halt := context.WithCancel(context.Background())
	p.OnRetry = func(retry.Attempt) { halt() } // the first wait has begun
	var calls int
	done := make(chan error, 1)
	go func() { done <- retry.Do(context.Background(), p, failing(100, &calls), retry.WithStop(stop)) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stop did not end an hour's wait")
	}
	if !errors.Is(err, retry.ErrStopped) || !errors.Is(err, errFlaky) || errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v: want ErrStopped with the last error, and no cancellation", err)
	}
	if calls != 1 {
		t.Fatalf("calls = %d, want 1", calls)
	}
}

// An attempt in progress when the stop comes runs to its end under a context
// that is not cancelled; when it succeeds, so does the loop, and when it
// fails, no attempt follows.
func TestDo_a_stop_lets_the_attempt_in_progress_finish(t *testing.T) {
	for _, succeeds := range []bool{true, false} {
		vt := newVirtualTime()
		stop, halt := context.WithCancel(context.Background())
		var calls int
		err := retry.Do(context.Background(), retry.Default(), func(ctx context.Context) error {
			calls++
			halt()
			select { // the stop's cancellation would reach ctx in a goroutine of its own
			case <-ctx.Done():
				t.Errorf("the attempt's context ended with the stop: %v", ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
			if succeeds {
				return nil
			}
			return errFlaky
		}, append(vt.opts(), retry.WithStop(stop))...)
		switch {
		case calls != 1:
			t.Fatalf("succeeds %v: calls = %d, want 1", succeeds, calls)
		case succeeds && err != nil:
			t.Fatalf("an attempt that succeeded after the stop: err = %v", err)
		case !succeeds && (!errors.Is(err, retry.ErrStopped) || !errors.Is(err, errFlaky)):
			t.Fatalf("an attempt that failed after the stop: err = %v, want ErrStopped with the last error", err)
		}
		if len(vt.waits) != 0 {
			t.Fatalf("succeeds %v: waited %v after the stop", succeeds, vt.waits)
		}
	}
}

// Without a stop, WithStop changes nothing: the loop waits and retries.
func TestDo_a_stop_that_never_comes_changes_nothing(t *testing.T) {
	vt := newVirtualTime()
	var calls int
	err := retry.Do(context.Background(), retry.Default(), failing(3, &calls), append(vt.opts(), retry.WithStop(context.Background()))...)
	if err != nil || calls != 4 || len(vt.waits) != 3 {
		t.Fatalf("err %v, calls %d, waits %v: want nil, 4 calls and 3 waits", err, calls, vt.waits)
	}
}
