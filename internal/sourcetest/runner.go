package sourcetest

import (
	"context"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// Patient is a gate policy for tests where many events wait at once on a
// slow embedded server: short waits, bounded by time rather than by count.
func Patient() retry.Policy {
	p := retry.Default()
	p.InitialDelay = 10 * time.Millisecond
	p.MaxDelay = 500 * time.Millisecond
	p.MaxRetries = -1
	p.MaxElapsed = 2 * time.Minute
	return p
}

// FastReconnect is a reconnect policy that subscribes again soon after a
// drop, for up to two minutes.
func FastReconnect() retry.Policy {
	p := projector.DefaultReconnect()
	p.InitialDelay, p.MaxDelay, p.MaxElapsed = 20*time.Millisecond, 200*time.Millisecond, 2*time.Minute
	return p
}

// Engine returns a prepared engine of the cart details projection on store,
// with the [Patient] gate policy and then opts.
func Engine(tb testing.TB, store driver.Store, opts ...projector.Option) *projector.Engine {
	tb.Helper()
	e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		append([]projector.Option{projector.WithRetry(Patient())}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return e
}

// NewRunner returns a runner with the [FastReconnect] policy and then opts.
func NewRunner(tb testing.TB, name string, e *projector.Engine, src projector.Source, cps projector.CheckpointStore, opts ...projector.RunnerOption) *projector.Runner {
	tb.Helper()
	opts = append([]projector.RunnerOption{projector.WithReconnect(FastReconnect())}, opts...)
	r, err := projector.NewRunner(name, e, src, cps, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// Running is a runner started in the background.
type Running struct {
	r      *projector.Runner
	cancel context.CancelFunc
	done   chan error
}

// Start runs r in the background until [Running.Stop] or the end of the
// test.
func Start(tb testing.TB, r *projector.Runner) *Running {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	x := &Running{r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { x.done <- r.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		<-x.done
	})
	return x
}

// WaitBound is how long [Running.WaitFor] waits for a condition.
const WaitBound = 3 * time.Minute

// WaitFor polls cond until it holds, failing the test after [WaitBound] or
// when the runner ends early.
func (x *Running) WaitFor(tb testing.TB, what string, cond func(projector.RunnerStats) bool) {
	tb.Helper()
	deadline := time.Now().Add(WaitBound)
	for !cond(x.r.Stats()) {
		select {
		case err := <-x.done:
			x.done <- err
			tb.Fatalf("runner ended before %s: %v (stats %+v)", what, err, x.r.Stats())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no %s within %v: stats %+v", what, WaitBound, x.r.Stats())
		}
	}
}

// Wait waits, up to [WaitBound], for the runner to end by itself, and
// returns what Run returned.
func (x *Running) Wait(tb testing.TB) error {
	tb.Helper()
	select {
	case err := <-x.done:
		x.done <- err
		return err
	case <-time.After(WaitBound):
		tb.Fatalf("the runner did not end within %v: stats %+v", WaitBound, x.r.Stats())
		return nil
	}
}

// Stop cancels the runner and returns what Run returned.
func (x *Running) Stop() error {
	x.cancel()
	err := <-x.done
	x.done <- err
	return err
}
