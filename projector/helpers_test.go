package projector_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// child, when set (by a test file's init), runs a process a test started
// instead of the tests: ok is false when this process is not one.
var child func() (code int, ok bool)

func TestMain(m *testing.M) {
	if child != nil {
		if code, ok := child(); ok {
			os.Exit(code)
		}
	}
	os.Exit(mongotest.Main(m))
}

var t0 = time.Date(2026, 11, 2, 9, 30, 15, 123456789, time.UTC)

// patient is a policy for tests where many events wait at once on a slow
// embedded server: short waits, bounded by time rather than by count.
func patient() retry.Policy {
	p := retry.Default()
	p.InitialDelay = 10 * time.Millisecond
	p.MaxDelay = time.Second
	p.MaxRetries = -1
	p.MaxElapsed = 2 * time.Minute
	return p
}

func newEngine(tb testing.TB, store driver.Store, p retry.Policy, defs ...projector.Definition) *projector.Engine {
	tb.Helper()
	if len(defs) == 0 {
		defs = []projector.Definition{cart.NewDetailsProjection()}
	}
	e, err := projector.NewEngine(store, cart.Registry(), defs, projector.WithRetry(p))
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return e
}

// tally counts outcomes.
type tally struct {
	mu     sync.Mutex
	counts map[projector.Outcome]int
	waits  int
	errs   []error
}

func (t *tally) add(rs []projector.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[projector.Outcome]int{}
	}
	for _, r := range rs {
		t.counts[r.Outcome]++
		t.waits += r.Waits
		if r.Err != nil {
			t.errs = append(t.errs, r.Err)
		}
	}
}

func handle(tb testing.TB, e *projector.Engine, ev projector.Event) []projector.Result {
	tb.Helper()
	rs, _ := e.Handle(context.Background(), ev)
	if len(rs) != 1 {
		tb.Fatalf("event %s of %s: %d results, want 1", ev.Type, ev.StreamID, len(rs))
	}
	return rs
}

// assertDocument checks that the cart's document holds exactly the fold of
// events, at the revision of the last one.
func assertDocument(tb testing.TB, s driver.Store, cartID string, events []projector.Event) {
	tb.Helper()
	if err := projectortest.CheckDocument(context.Background(), s, cart.NewDetailsProjection(), cartID, events); err != nil {
		tb.Error(err)
	}
}

func newStore(tb testing.TB) *mongostore.Store {
	tb.Helper()
	return mongostore.New(mongotest.Database(tb))
}
