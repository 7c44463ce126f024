package retry

import "time"

// The virtual time of the tests.
var (
	WithTimer = withTimer
	WithClock = withClock
)

// Band is the range the n-th wait (from 0) of p's schedule is drawn from.
func Band(p Policy, i int) (lo, hi time.Duration) {
	w := p.windows(i + 1)[i]
	return w.min, w.max
}
