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

// rawLog appends what fill adds to a fresh log and returns the events
// undecoded, as the event store delivers them.
func rawLog(tb testing.TB, r *projector.Registry, fill func(add func(stream string, payloads ...any))) []projector.Event {
	tb.Helper()
	log := projectortest.NewLog(r)
	var raw []projector.Event
	fill(func(stream string, payloads ...any) { raw = append(raw, log.MustAppend(tb, stream, payloads...)...) })
	for i := range raw {
		raw[i].Payload = nil
	}
	return raw
}

// faultEngine is a prepared engine of defs over s under pol, with s as its
// parker and raw as the event store's streams; its retries give up after
// two seconds.
func faultEngine(tb testing.TB, s *mongostore.Store, r *projector.Registry, pol projector.FailurePolicy, raw []projector.Event, defs ...projector.Definition) *projector.Engine {
	tb.Helper()
	soon := patient()
	soon.MaxElapsed = 2 * time.Second
	e, err := projector.NewEngine(s, r, defs, projector.WithRetry(soon),
		projector.WithFailurePolicy(pol), projector.WithParker(s), projector.WithStreamReader(newStreams(raw...)))
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return e
}

// deliver hands evs to e in one batch, or one event at a time.
func deliver(e *projector.Engine, evs []projector.Event, batched bool) [][]projector.Result {
	ctx := context.Background()
	if batched {
		return e.HandleBatch(ctx, evs)
	}
	var out [][]projector.Result
	for _, ev := range evs {
		rs, _ := e.Handle(ctx, ev)
		out = append(out, rs)
	}
	return out
}

// parkedRecords is the projection's parked and held records, held ones in
// held, each logged.
func parkedRecords(tb testing.TB, s *mongostore.Store, projection string) (all, held, plain []projector.ParkedEvent) {
	tb.Helper()
	all, err := s.Parked(context.Background(), projection)
	if err != nil {
		tb.Fatal(err)
	}
	for _, pe := range all {
		tb.Logf("record %s@%d held=%v doc=%q err=%s", pe.StreamID, pe.StreamRevision, pe.Held, pe.Document, pe.Error)
		if pe.Held {
			held = append(held, pe)
		} else {
			plain = append(plain, pe)
		}
	}
	return all, held, plain
}

// replayHeld replays the held records of the projection in one call, as
// replay-parked does, and deletes those it applied.
func replayHeld(tb testing.TB, e *projector.Engine, s *mongostore.Store, projection string, held []projector.ParkedEvent) {
	tb.Helper()
	if len(held) == 0 {
		return
	}
	ctx := context.Background()
	rep := e.ReplayHeld(ctx, projection, held)
	tb.Logf("ReplayHeld: %d applied, %d left: %v", len(rep.Applied), len(rep.Left), rep.Err)
	for _, pe := range rep.Applied {
		if err := s.Replayed(ctx, pe, nil); err != nil {
			tb.Fatal(err)
		}
	}
}

// replayPlain replays each plain record, logging what it said.
func replayPlain(tb testing.TB, e *projector.Engine, plain []projector.ParkedEvent) {
	tb.Helper()
	for _, pe := range plain {
		res := e.Replay(context.Background(), pe)
		tb.Logf("replay %s@%d doc=%q: %v %v", pe.StreamID, pe.StreamRevision, pe.Document, res.Outcome, res.Err)
	}
}
