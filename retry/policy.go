package retry

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Policy says how often and how long to retry. It is plain data so that flags,
// environment variables and files can fill it; start from [Default] and change
// what you need, then call [Policy.Validate].
//
// The wait before retry k (counting from 0) is
//
//	min(InitialDelay * Multiplier^k, MaxDelay) * (1 ± Jitter)
//
// drawn uniformly at random within the ± band, so that many waiters started
// together do not retry in lockstep.
type Policy struct {
	// InitialDelay is the wait before the first retry. Must be > 0.
	InitialDelay time.Duration
	// Multiplier grows the delay after each retry. Must be >= 1.
	Multiplier float64
	// Jitter is the randomization factor in [0, 1): 0.5 draws each wait from
	// 50% to 150% of its nominal value. 0 disables jitter.
	Jitter float64
	// MaxDelay caps the nominal delay (before jitter is applied). Must be >= InitialDelay.
	MaxDelay time.Duration
	// MaxRetries is how many times the operation is retried after its first
	// attempt fails: 0 means it runs once. A negative value means no limit on
	// the count; MaxElapsed must then be set.
	MaxRetries int
	// MaxElapsed bounds the whole retry loop: no wait starts that would end
	// past it. 0 means no bound on time (MaxRetries bounds the loop).
	MaxElapsed time.Duration

	// ShouldRetry, if set, is asked about every failure that is not already
	// permanent: returning false stops the loop and returns that error.
	ShouldRetry func(error) bool `json:"-"`
	// OnRetry, if set, is called before each wait: for logs and metrics.
	// It runs on the retrying goroutine and must not block.
	OnRetry func(Attempt) `json:"-"`
}

// Attempt describes a failed attempt that is about to be retried.
type Attempt struct {
	// Number of the attempt that failed, from 1.
	Number int
	// Delay before the next attempt.
	Delay time.Duration
	// Err is what the attempt returned.
	Err error
}

// Default returns the policy of the seed article, which its users expect: 100 ms
// doubling to at most 5 s, half of it jitter, 5 retries, no time bound beyond that.
func Default() Policy {
	return Policy{
		InitialDelay: 100 * time.Millisecond,
		Multiplier:   2,
		Jitter:       0.5,
		MaxDelay:     5 * time.Second,
		MaxRetries:   5,
	}
}

// Validate reports the first setting that makes no sense.
func (p Policy) Validate() error {
	switch {
	case p.InitialDelay <= 0:
		return fmt.Errorf("retry: initial delay must be > 0, got %v (start from retry.Default())", p.InitialDelay)
	case !(p.Multiplier >= 1) || math.IsInf(p.Multiplier, 1): // NaN compares false
		return fmt.Errorf("retry: multiplier must be >= 1 and finite, got %v", p.Multiplier)
	case !(p.Jitter >= 0 && p.Jitter < 1):
		return fmt.Errorf("retry: jitter must be in [0, 1), got %v", p.Jitter)
	case p.MaxDelay < p.InitialDelay:
		return fmt.Errorf("retry: max delay %v is below the initial delay %v", p.MaxDelay, p.InitialDelay)
	case p.MaxElapsed < 0:
		return fmt.Errorf("retry: max elapsed must be >= 0, got %v", p.MaxElapsed)
	case p.MaxRetries < 0 && p.MaxElapsed == 0:
		return errors.New("retry: unlimited retries need a max elapsed time")
	}
	return nil
}

// Schedule lists the nominal waits before each retry as the policy sets them,
// up to n retries (n <= 0: MaxRetries, or 20 when the count is unlimited).
// Each wait is drawn within Jitter of its nominal value (0.5: from half to
// one and a half times it). It ignores MaxElapsed, which can only cut the
// list short.
func (p Policy) Schedule(n int) []time.Duration {
	ws := p.windows(n)
	out := make([]time.Duration, len(ws))
	for i, w := range ws {
		out[i] = w.nominal
	}
	return out
}

// window is the range one wait is drawn from.
type window struct{ nominal, min, max time.Duration }

// windows is [Policy.Schedule] with the range of each wait.
func (p Policy) windows(n int) []window {
	if n <= 0 {
		n = p.MaxRetries
		if n < 0 {
			n = 20
		}
	}
	out := make([]window, 0, n)
	cur := p.InitialDelay
	for range n {
		w := window{nominal: cur, min: cur, max: cur}
		if p.Jitter > 0 {
			// The same arithmetic as backoff/v4, whose draw can land one
			// nanosecond past the band.
			delta := p.Jitter * float64(cur)
			w.min = time.Duration(float64(cur) - delta)
			w.max = time.Duration(float64(cur)+delta) + 1
		}
		out = append(out, w)
		if float64(cur) >= float64(p.MaxDelay)/p.Multiplier {
			cur = p.MaxDelay
		} else {
			cur = time.Duration(float64(cur) * p.Multiplier)
		}
	}
	return out
}

// MaxWait is the longest the policy can spend waiting between attempts: the
// sum of the largest possible waits, capped by MaxElapsed when that is set. It
// is what a caller can promise about how long a doomed operation takes to fail,
// apart from the time the attempts themselves take.
func (p Policy) MaxWait() time.Duration {
	var total time.Duration
	if p.MaxRetries >= 0 {
		for _, w := range p.windows(p.MaxRetries) {
			total += w.max
		}
	}
	if p.MaxElapsed > 0 && (p.MaxRetries < 0 || total > p.MaxElapsed) {
		return p.MaxElapsed
	}
	return total
}
