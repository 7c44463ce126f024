package projector_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
)

// A runner catching up in small batches writes the summaries its events
// feed (five, under RevisionMap, each fed by many carts) once per flush
// (each checkpoint it stores, and once as it catches up), not once per
// batch that meets them: the store holds the writes back. Here it stores
// no checkpoint before it catches up: each summary is written once, and
// once more for each event handled alone (a worker's batch of one goes
// through the per-event path, which writes the document first). The
// documents are the per-event path's, and each event counts as applied
// once.
func TestWriteBehind_a_runner_writes_each_summary_once_per_checkpoint_not_once_per_batch(t *testing.T) {
	l := newESDBLog(t, 47, 25, 12, 12)
	m := multiStreams[0]
	db, writes := mongotest.CountedDatabase(t)
	fastStore, slowStore := mongostore.New(db), newStore(t)
	slow := m.engine(t, slowStore)
	for _, ev := range l.events(t) {
		if _, err := slow.Handle(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	r := sourcetest.NewRunner(t, "summaries", m.engine(t, fastStore), l.source(t), fastStore,
		projector.WithBatch(2, 5*time.Millisecond), projector.WithCheckpointEvery(1_000_000, time.Hour), projector.WithWorkers(m.workers))
	x := sourcetest.Start(t, r)
	x.WaitFor(t, "caught up", func(st projector.RunnerStats) bool { return st.CaughtUp })
	st := r.Stats()
	written := writes.Of(m.projection().Collection())
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
	const documents = 5
	t.Logf("%d events in %d batches, %d checkpoints stored, %d drops: %d writes of the %d summaries", st.Batched, st.Batches, st.Saved, st.Drops, written, documents)
	if st.Batches < 20 {
		t.Fatalf("%d batches: the catch-up was not batched", st.Batches)
	}
	if alone := int(st.Events - st.Batched); written > documents+2*alone {
		t.Errorf("%d writes of %d summaries over %d batches and %d events handled alone: want one a summary, "+
			"at the flush as the runner caught up, and two for each event handled alone", written, documents, st.Batches, alone)
	}
	if got := r.Stats().Applied; got != uint64(l.carts.Total) {
		t.Errorf("applied %d, want each of the %d events once", got, l.carts.Total)
	}
	m.check(t, l, fastStore, slowStore)
}

// foreignWrite is a store that, once a batch has held back a write of
// document id, writes that document itself through another store, as a
// second writer of the projection would.
type foreignWrite struct {
	*mongostore.Store
	other *mongostore.Store
	id    string
	once  sync.Once
	err   error
}

func (f *foreignWrite) PutGuardedMany(ctx context.Context, collection string, puts []driver.Put) ([]bool, error) {
	ok, err := f.Store.PutGuardedMany(ctx, collection, puts)
	for i, p := range puts {
		if p.ID == f.id && driver.HeldBack(ctx) && err == nil && ok[i] {
			f.once.Do(func() {
				var l streamsLedger
				meta, _, lerr := f.other.LoadGuarded(context.Background(), collection, p.ID, &l)
				if lerr != nil {
					f.err = lerr
					return
				}
				meta.Version++
				_, f.err = f.other.PutGuarded(context.Background(), collection, p.ID, meta.Version-1, meta, &l)
			})
		}
	}
	return ok, err
}

// A summary another writer changes while the runner holds its writes
// back: the runner stops with one line that says so, and stores no
// checkpoint past the events of the write it lost (here none at all: the
// loss is found at the first flush, and the final one does not move the
// checkpoint either), so that its next run applies them again.
func TestWriteBehind_a_summary_changed_by_another_writer_stops_the_run_before_its_checkpoint(t *testing.T) {
	l := newESDBLog(t, 48, 25, 12, 12)
	m := multiStreams[0]
	base := newStore(t)
	// group-0 exists on the server before the run: the other writer moves it.
	first := l.events(t)[0]
	e0 := m.engine(t, base)
	if _, err := e0.Handle(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	id, _ := strings.CutPrefix(first.StreamID, cart.StreamPrefix)
	s := &foreignWrite{Store: base, other: mongostore.New(base.Database()), id: m.doc(id)}
	// The runner's engine writes through the store that lets the other writer in.
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{m.projection()}, projector.WithRetry(patient()))
	if err != nil {
		t.Fatal(err)
	}
	r := sourcetest.NewRunner(t, "summaries", e, l.source(t), base,
		projector.WithBatch(2, 5*time.Millisecond), projector.WithCheckpointEvery(1_000_000, time.Hour), projector.WithWorkers(m.workers))
	x := sourcetest.Start(t, r)
	err = x.Wait(t)
	if s.err != nil {
		t.Fatalf("the other writer: %v", s.err)
	}
	if err == nil || !strings.Contains(err.Error(), "another writer") || !strings.Contains(err.Error(), s.id) {
		t.Fatalf("Run = %v, want it stopped by the write another writer made impossible (%s)", err, s.id)
	}
	if n := strings.Count(err.Error(), "another writer"); n != 1 {
		t.Errorf("Run = %v: the loss said %d times, want once (every flush of its collection reports it)", err, n)
	}
	if cp, err := base.LoadCheckpoint(context.Background(), "summaries"); err != nil || cp != nil {
		t.Errorf("checkpoint %v (%v), want none stored past the lost write", cp, err)
	}
}

// Under HandledIDs, a summary written with events past the stored
// checkpoint (a flush at the store's limit, an event handled alone) gets
// them again after a crash, and its window must still hold them: a runner
// stores its checkpoint once it has passed half the smallest window,
// whatever WithCheckpointEvery says, and holds none back past that while
// catching up (it would otherwise wait 10 s between checkpoints, with
// writes held back).
func TestWriteBehind_a_runner_under_a_handled_ids_window_stores_its_checkpoint_within_half_the_window(t *testing.T) {
	l := newESDBLog(t, 47, 25, 12, 12)
	const window = 40
	m := multiStream{"handled ids small", projector.HandledIDs(window), oneDocument, 1}
	store := newStore(t)
	saves := &savedPositions{Store: store}
	r := sourcetest.NewRunner(t, "summary", m.engine(t, store), l.source(t), saves,
		projector.WithBatch(2, 5*time.Millisecond), projector.WithCheckpointEvery(1_000_000, time.Hour), projector.WithWorkers(1))
	x := sourcetest.Start(t, r)
	x.WaitFor(t, "caught up", func(st projector.RunnerStats) bool { return st.CaughtUp })
	st := r.Stats()
	if err := x.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events, %d checkpoints stored before the stop", st.Events, st.Saved)
	if want := st.Events / (4 * window / 2); st.Saved < want {
		t.Errorf("%d checkpoints stored over %d events under a window of %d: want one at least every %d events or so (%d or more)",
			st.Saved, st.Events, window, window/2, want)
	}
	// What a crash at any moment would deliver again of the summary's
	// events: those after the checkpoint stored last, up to the next.
	var at []uint64
	for _, ev := range l.events(t) {
		at = append(at, ev.Position)
	}
	prev := uint64(0)
	for _, cp := range saves.positions() {
		n := 0
		for _, p := range at {
			if p > prev && p <= cp {
				n++
			}
		}
		if n > window {
			t.Errorf("%d of the summary's events between the checkpoints at %d and %d: more than its window of %d", n, prev, cp, window)
		}
		prev = cp
	}
	if got := r.Stats().Applied; got != uint64(l.carts.Total) {
		t.Errorf("applied %d, want each of the %d events once", got, l.carts.Total)
	}
}

// savedPositions is a store that notes the position of each checkpoint
// it stores.
type savedPositions struct {
	*mongostore.Store
	mu    sync.Mutex
	saved []uint64
}

func (s *savedPositions) SaveCheckpoint(ctx context.Context, name string, cp projector.Checkpoint) error {
	if err := s.Store.SaveCheckpoint(ctx, name, cp); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saved = append(s.saved, cp.Position)
	return nil
}

func (s *savedPositions) positions() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.saved)
}
