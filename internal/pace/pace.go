// Package pace spaces out a run of failures that are not the attempts of
// one call, under a retry policy.
package pace

import (
	"context"
	"errors"
	"time"

	"github.com/revgate/projector/retry"
)

// ErrExhausted: a run of failures paced by a [Pacer] has lasted longer
// than its policy's MaxElapsed.
var ErrExhausted = errors.New("failures went on for longer than the policy allows")

// Pacer spaces out a run of failures that are not the attempts of one call,
// such as a subscription that keeps dropping before it delivers anything:
// after each failure ([Pacer.Failed]), [Pacer.Wait] sleeps the policy's
// nominal wait for that failure of the run (no jitter), and a success
// ([Pacer.Reset]) ends the run. Only MaxElapsed bounds a run, counted from
// its first failure; MaxRetries, ShouldRetry and OnRetry do not apply. It is
// for one goroutine.
type Pacer struct {
	p     retry.Policy
	n     int // failures in the run, at most maxPaced
	since time.Time
}

// maxPaced caps the failures a run counts: past it, the waits stay at the
// policy's longest.
const maxPaced = 30

// New returns a pacer on p.
func New(p retry.Policy) *Pacer { return &Pacer{p: p} }

// Failed records a failure; the first of a run starts its clock.
func (c *Pacer) Failed() {
	if c.n == 0 {
		c.since = time.Now()
	}
	c.n = min(c.n+1, maxPaced)
}

// Reset ends the run: the next Wait returns at once.
func (c *Pacer) Reset() { c.n = 0 }

// Delay is what [Pacer.Wait] would sleep: 0 outside a run, else the wait
// for its latest failure, or [ErrExhausted] when the run has lasted longer
// than MaxElapsed; for a caller that waits while it does other things.
func (c *Pacer) Delay() (time.Duration, error) {
	if c.n == 0 {
		return 0, nil
	}
	if c.p.MaxElapsed > 0 && time.Since(c.since) > c.p.MaxElapsed {
		return 0, ErrExhausted
	}
	return c.p.Schedule(c.n)[c.n-1], nil
}

// Wait returns at once outside a run; in one, it sleeps the wait for its
// latest failure. It returns [ErrExhausted] when the run has lasted
// longer than MaxElapsed, or ctx's error.
func (c *Pacer) Wait(ctx context.Context) error {
	d, err := c.Delay()
	if err != nil || d == 0 {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
