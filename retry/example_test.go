package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/revgate/projector/retry"
)

// Tuning a policy: Schedule shows the waits it implies and MaxWait the longest
// a doomed operation can wait before it is given up.
func ExamplePolicy_Schedule() {
	p := retry.Default()
	p.InitialDelay = 50 * time.Millisecond
	p.Multiplier = 3
	p.MaxDelay = time.Second
	p.MaxRetries = 5
	p.Jitter = 0.2
	if err := p.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	for i, w := range p.Schedule(0) {
		fmt.Printf("retry %d: %v (±20%%)\n", i+1, w)
	}
	fmt.Println("longest total wait:", p.MaxWait().Round(time.Millisecond))
	// Output:
	// retry 1: 50ms (±20%)
	// retry 2: 150ms (±20%)
	// retry 3: 450ms (±20%)
	// retry 4: 1s (±20%)
	// retry 5: 1s (±20%)
	// longest total wait: 3.18s
}

// A domain error is marked permanent so that it is returned at once instead of
// being retried like a transient one.
func ExamplePermanent() {
	errNegative := errors.New("quantity would go negative")
	attempts := 0
	err := retry.Do(context.Background(), retry.Default(), func(context.Context) error {
		attempts++
		return retry.Permanent(errNegative)
	})
	fmt.Println(attempts, errors.Is(err, errNegative), retry.IsPermanent(err))
	// Output: 1 true true
}
