package projector_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

func gapEngine(t *testing.T, s *mongostore.Store, pol projector.FailurePolicy, h projector.StreamReader) *projector.Engine {
	t.Helper()
	impatient := retry.Policy{InitialDelay: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond, MaxRetries: 2, MaxElapsed: time.Second}
	opts := []projector.Option{projector.WithRetry(impatient), projector.WithFailurePolicy(pol), projector.WithParker(s)}
	if h != nil {
		opts = append(opts, projector.WithStreamReader(h))
	}
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

func loadCart(t *testing.T, s *mongostore.Store, id string) (cart.Details, uint64) {
	t.Helper()
	var d cart.Details
	head, found, err := s.Load(context.Background(), cart.DetailsName, id, 0, &d)
	if err != nil || !found {
		t.Fatalf("load %s: found %v, %v", id, found, err)
	}
	return d, head.Revision
}

// A second creation (ShoppingCartOpened, a Create handler) of a stream that
// was not deleted is refused by the gate (ErrAlreadyCreated, under the
// failure policy). A gap's fill does not fold past it: folded as a fresh
// creation, it threw the document's state away. Found by a review.
func TestGapFill_does_not_fold_a_second_creation_the_gate_refuses(t *testing.T) {
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("dc"),
		cart.ShoppingCartOpened{ShoppingCartID: "dc", ClientID: "first", OpenedAt: t0},
		add("dc", "p", 1),
		cart.ShoppingCartOpened{ShoppingCartID: "dc", ClientID: "second", OpenedAt: t0},
		add("dc", "q", 2))
	for _, pol := range []projector.FailurePolicy{projector.Skip, projector.Block} {
		t.Run(pol.String(), func(t *testing.T) {
			// The gate, in order, without the streams.
			ref := newStore(t)
			er := gapEngine(t, ref, pol, nil)
			var refOut []projector.Outcome
			for _, ev := range evs {
				refOut = append(refOut, handle(t, er, ev)[0].Outcome)
			}
			// Revision 3 before 1 and 2, with the streams.
			s := newStore(t)
			e := gapEngine(t, s, pol, newStreams(evs...))
			handle(t, e, evs[0])
			r3 := handle(t, e, evs[3])[0]
			var out []projector.Outcome
			for _, at := range []int{1, 2, 3} { // 3 again: delivered again after a failure
				out = append(out, handle(t, e, evs[at])[0].Outcome)
			}
			t.Logf("gate in order: %v; with a fill: rev3 %v (%v), then 1, 2, 3: %v", refOut, r3.Outcome, r3.Err, out)
			if pol == projector.Block {
				if r3.Outcome == projector.Applied {
					t.Errorf("under block, revision 3 after a second creation at 2 was applied (the gate fails 2 with ErrAlreadyCreated and 3 never applies)")
				}
				return
			}
			want, _ := loadCart(t, ref, "dc")
			got, _ := loadCart(t, s, "dc")
			if !reflect.DeepEqual(want, got) {
				t.Errorf("document differs from the gate's:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

type driverHead = driver.Head

// pausing is a store whose update to revision at, from revision from,
// stops until released: another engine writes meanwhile.
type pausing struct {
	*mongostore.Store
	from, at uint64
	entered  chan struct{}
	release  chan struct{}
}

func (p *pausing) Update(ctx context.Context, collection, id string, from uint64, head driverHead, state any) (bool, error) {
	if from == p.from && head.Revision == p.at && p.entered != nil {
		close(p.entered)
		p.entered = nil
		<-p.release
	}
	return p.Store.Update(ctx, collection, id, from, head, state)
}

// A gap's fill notes its predecessors as applied ahead once its write is
// done. Noted before it (as at first), an ordered engine's Handle of one of
// them (knownResult, without the document's lock) returned Applied without
// a write, and when the fill's write then missed (another engine moved the
// document), that event was never applied and the one after it waited for
// it in vain. Found by a review.
func TestGapFill_a_predecessor_is_not_counted_applied_before_the_fills_write(t *testing.T) {
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("race"),
		cart.ShoppingCartOpened{ShoppingCartID: "race", ClientID: "x", OpenedAt: t0},
		add("race", "p", 1), add("race", "q", 2), add("race", "r", 3))
	s := newStore(t)
	ps := &pausing{Store: s, from: 0, at: 3, entered: make(chan struct{}), release: make(chan struct{})}
	entered := ps.entered
	impatient := retry.Policy{InitialDelay: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond, MaxRetries: 5, MaxElapsed: time.Second}
	a, err := projector.NewEngine(ps, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(impatient), projector.WithStreamReader(newStreams(evs...)))
	if err != nil {
		t.Fatal(err)
	}
	b := gapEngine(t, s, projector.Block, nil) // another engine (process) on the collection
	handle(t, a, evs[0])
	done := make(chan projector.Result, 1)
	go func() { rs, _ := a.Handle(context.Background(), evs[3]); done <- rs[0] }()
	<-entered // the fill of 1..3 writes from revision 0
	if r := handle(t, b, evs[1])[0]; r.Outcome != projector.Applied {
		t.Fatalf("engine B, revision 1: %v %v", r.Outcome, r.Err)
	}
	r2c := make(chan projector.Result, 1)
	go func() { rs, _ := a.Handle(context.Background(), evs[2]); r2c <- rs[0] }() // engine A's first delivery of revision 2
	time.Sleep(100 * time.Millisecond)
	close(ps.release)
	r3, r2 := <-done, <-r2c
	_, rev := loadCart(t, s, "race")
	t.Logf("revision 2 in A: %v; revision 3 in A: %v (%v); document at %d", r2.Outcome, r3.Outcome, r3.Err, rev)
	if r2.Outcome == projector.Applied && rev < 2 {
		t.Errorf("revision 2 reported applied, but the document is at revision %d: the event is lost", rev)
	}
}

// A batch's stream fold writes a document past the batch (revisions 3..5
// applied ahead: each is Applied on its first delivery). A gap's fill
// later (revision 8 before 6 and 7) keeps them so: each event counts as
// applied once. Found by a review.
func TestGapFill_after_a_stream_fold_keeps_the_folds_ahead_counts(t *testing.T) {
	log := projectortest.NewLog(cart.Registry())
	evs := log.MustAppend(t, cart.StreamID("sf"),
		cart.ShoppingCartOpened{ShoppingCartID: "sf", ClientID: "x", OpenedAt: t0},
		add("sf", "a", 1), add("sf", "b", 1), add("sf", "c", 1), add("sf", "d", 1), add("sf", "e", 1),
		add("sf", "f", 1), add("sf", "g", 1), add("sf", "h", 1))
	s := newStore(t)
	h := newStreams(evs[:6]...) // the stream holds 0..5 when the batch folds it
	e := foldEngine(t, s, h)
	var counts tally
	for _, rs := range e.HandleBatch(context.Background(), evs[:3]) {
		counts.add(rs)
	}
	if _, rev := loadCart(t, s, "sf"); rev != 5 {
		t.Fatalf("the stream fold wrote revision %d, want 5", rev)
	}
	h.add(evs[6:]...) // 6..8 appended since
	counts.add(handle(t, e, evs[8]))
	for _, at := range []int{3, 4, 5, 6, 7} {
		counts.add(handle(t, e, evs[at]))
	}
	assertDocument(t, s, "sf", evs)
	if counts.counts[projector.Applied] != len(evs) {
		t.Errorf("every event delivered once: %v, want %d applied", counts.counts, len(evs))
	}
}
