package pace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/revgate/projector/internal/pace"
	"github.com/revgate/projector/retry"
)

func TestPacer_waits_the_schedule_of_a_run_and_ends_it_after_MaxElapsed(t *testing.T) {
	p := retry.Policy{InitialDelay: 10 * time.Millisecond, Multiplier: 2, MaxDelay: 40 * time.Millisecond, MaxRetries: -1, MaxElapsed: 150 * time.Millisecond}
	c := pace.New(p)
	ctx := context.Background()
	start := time.Now()
	if err := c.Wait(ctx); err != nil || time.Since(start) > 5*time.Millisecond {
		t.Fatalf("outside a run: %v after %v, want no wait", err, time.Since(start))
	}
	for i, want := range []time.Duration{10, 20, 40, 40} {
		c.Failed()
		began := time.Now()
		if err := c.Wait(ctx); err != nil {
			t.Fatalf("failure %d: %v", i+1, err)
		}
		if took := time.Since(began); took < want*time.Millisecond {
			t.Fatalf("failure %d: waited %v, want at least %v", i+1, took, want*time.Millisecond)
		}
	}
	time.Sleep(p.MaxElapsed)
	c.Failed()
	if err := c.Wait(ctx); !errors.Is(err, pace.ErrExhausted) {
		t.Fatalf("a run longer than MaxElapsed: %v, want ErrExhausted", err)
	}
	c.Reset()
	if err := c.Wait(ctx); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
	c.Failed()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Wait(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}
