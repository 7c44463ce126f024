package projector_test

import (
	"context"
	"testing"
	"time"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
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
	t.Logf("%d events in %d batches, %d checkpoints stored: %d writes of the %d summaries", st.Batched, st.Batches, st.Saved, written, documents)
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
