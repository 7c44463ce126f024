package projector

import (
	"sync"
	"sync/atomic"
	"testing"
)

// An event a stream fold applied ahead, delivered at once to two handlers
// on one engine (a batch, and another consumer's redelivery handled alone),
// is reported applied by one of them only: reading what is known, passing
// the event and noting its delivery are one step.
func TestKnown_an_event_passed_at_once_by_many_is_applied_once(t *testing.T) {
	for round := range 200 {
		n := newKnown(16)
		k := docKey{"carts", "c1"}
		n.wrote(k, 10, 2) // the fold wrote revision 10; 0 to 2 delivered
		var applied atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Go(func() {
				<-start
				_, ok := n.pass(k, 1, func(int) uint64 { return 5 }, func(_ int, o Outcome) {
					if o == Applied {
						applied.Add(1)
					}
				})
				if !ok {
					t.Error("the document is not known")
				}
			})
		}
		close(start)
		wg.Wait()
		if got := applied.Load(); got != 1 {
			t.Fatalf("round %d: revision 5 reported applied %d times, want once", round, got)
		}
	}
}
