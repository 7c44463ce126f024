package projector_test

// Equivalence of batched catch-up and the per-event path for documents fed
// by many streams, under every strategy that batches them: the same events
// of a real log (esdbtest, read through the production client), the same
// FerretDB documents. Each document is a ledger of the events applied to
// it, by stream, so that an event applied twice or lost shows whatever the
// engine reports.

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// streamsLedger records, in a document fed by many carts, the revisions of
// each cart's events applied to it, once per application.
type streamsLedger struct {
	Applied map[string][]uint64 `bson:"applied"`
}

// multiStream is a strategy under test, with the documents its ledger
// projection gathers the carts into, and how many workers may feed it.
type multiStream struct {
	name     string
	strategy projector.Strategy
	doc      func(cartID string) string
	workers  int
}

// inGroups puts the carts in five documents by the last digit of their
// number; oneDocument puts them all in one.
func inGroups(cartID string) string {
	return fmt.Sprintf("group-%d", int(cartID[len(cartID)-1]-'0')%5)
}

func oneDocument(string) string { return "all" }

var multiStreams = []multiStream{
	{"revision map", projector.RevisionMap(), inGroups, 4},
	{"handled ids", projector.HandledIDs(5000), oneDocument, 4},
	{"global position", projector.GlobalPosition(), inGroups, 1},
}

func (m multiStream) projection() *projector.Projection[streamsLedger] {
	p := projector.New[streamsLedger]("ledger_"+strings.ReplaceAll(m.name, " ", "_"), func(ev projector.Event) (string, bool) {
		id, ok := strings.CutPrefix(ev.StreamID, cart.StreamPrefix)
		if !ok {
			return "", false
		}
		return m.doc(id), true
	}).Idempotency(m.strategy)
	note := func(l streamsLedger, ev projector.Event) (streamsLedger, error) {
		next := maps.Clone(l.Applied)
		if next == nil {
			next = map[string][]uint64{}
		}
		id := strings.TrimPrefix(ev.StreamID, cart.StreamPrefix)
		next[id] = append(slices.Clone(next[id]), ev.StreamRevision)
		return streamsLedger{Applied: next}, nil
	}
	projector.OnEvent(p, func(l streamsLedger, _ cart.ShoppingCartOpened, ev projector.Event) (streamsLedger, error) {
		return note(l, ev)
	})
	projector.OnEvent(p, func(l streamsLedger, _ cart.ProductItemAddedToShoppingCart, ev projector.Event) (streamsLedger, error) {
		return note(l, ev)
	})
	projector.OnEvent(p, func(l streamsLedger, _ cart.ProductItemRemovedFromShoppingCart, ev projector.Event) (streamsLedger, error) {
		return note(l, ev)
	})
	projector.OnEvent(p, func(l streamsLedger, _ cart.ShoppingCartConfirmed, ev projector.Event) (streamsLedger, error) {
		return note(l, ev)
	})
	projector.OnEvent(p, func(l streamsLedger, _ cart.ShoppingCartCanceled, ev projector.Event) (streamsLedger, error) {
		return note(l, ev)
	})
	return p
}

func (m multiStream) engine(t *testing.T, store *mongostore.Store) *projector.Engine {
	t.Helper()
	e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{m.projection()}, projector.WithRetry(patient()))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// check asserts that every ledger holds each event of each of its carts
// once, in the cart's order, and that both stores hold the same documents:
// state and meta, but the version (which counts writes) and the write
// token.
func (m multiStream) check(t *testing.T, l *esdbLog, fast, perEvent *mongostore.Store) {
	t.Helper()
	p := m.projection()
	want := map[string]map[string][]uint64{}
	for id, evs := range l.carts.Events {
		doc := m.doc(id)
		if want[doc] == nil {
			want[doc] = map[string][]uint64{}
		}
		for _, ev := range evs {
			want[doc][id] = append(want[doc][id], ev.StreamRevision)
		}
	}
	for _, s := range []*mongostore.Store{fast, perEvent} {
		for doc, carts := range want {
			var got streamsLedger
			found, _, err := projector.ReadDocument(context.Background(), s, p, doc, &got)
			if err != nil || !found || !reflect.DeepEqual(got.Applied, carts) {
				t.Fatalf("%s: document %s (found %v, %v) applied %v,\nwant each event of its carts once, in order: %v", m.name, doc, found, err, got.Applied, carts)
			}
		}
	}
	a, b := ledgerDocuments(t, fast, p.Collection()), ledgerDocuments(t, perEvent, p.Collection())
	if len(a) != len(want) || !reflect.DeepEqual(a, b) {
		t.Fatalf("%s: documents differ:\n     fast %+v\nper-event %+v", m.name, a, b)
	}
}

// storedLedger is a ledger document as stored: its state and its meta,
// but the version (which counts writes, and batches make fewer) and the
// write token.
type storedLedger struct {
	Meta struct {
		Revs    []byte `bson:"revs"`
		Pos     int64  `bson:"pos"`
		Handled []byte `bson:"hids"`
		Evicted int64  `bson:"evicted"`
	} `bson:"_meta"`
	Applied map[string][]uint64 `bson:"applied"`
}

// ledgerDocuments reads the ledger documents of a collection, by id.
func ledgerDocuments(t *testing.T, s *mongostore.Store, coll string) map[string]storedLedger {
	t.Helper()
	ctx := context.Background()
	cur, err := s.Database().Collection(coll).Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	out := map[string]storedLedger{}
	for cur.Next(ctx) {
		var d storedLedger
		if err := cur.Decode(&d); err != nil {
			t.Fatal(err)
		}
		id, _ := cur.Current.Lookup("_id").StringValueOK()
		out[id] = d
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every event delivered two or three times, in batches, then the log again
// from an older position, then a new engine from the middle: under every
// strategy that batches documents fed by many streams, each delivery gets
// the outcome the per-event path gives it, each event is applied once, and
// the documents are the per-event path's.
func TestMultiStream_batches_equal_the_per_event_path_under_duplicates(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	l := newESDBLog(t, 41, 25, 10, 10)
	all := l.events(t)
	for _, m := range multiStreams {
		t.Run(m.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(41, 42))
			phases := []struct {
				events []projector.Event
				batch  int
				fresh  bool
			}{
				{deliveries(r, all), 37, false},
				{all[len(all)/2:], 29, false},
				{deliveries(r, all[len(all)*2/3:]), 41, true},
			}
			fastStore, slowStore := newStore(t), newStore(t)
			fast, slow := m.engine(t, fastStore), m.engine(t, slowStore)
			applied := map[eventKey]int{}
			for _, ph := range phases {
				if ph.fresh {
					fast, slow = m.engine(t, fastStore), m.engine(t, slowStore)
				}
				for i := 0; i < len(ph.events); i += ph.batch {
					batch := ph.events[i:min(i+ph.batch, len(ph.events))]
					got := fast.HandleBatch(context.Background(), batch)
					for j, ev := range batch {
						want, err := slow.Handle(context.Background(), ev)
						if err != nil {
							t.Fatalf("per-event path, %s@%d: %v", ev.StreamID, ev.StreamRevision, err)
						}
						if !sameOutcomes(got[j], want) || len(want) != 1 {
							t.Fatalf("%s@%d: batched %s, per-event %s", ev.StreamID, ev.StreamRevision, outcomeList(got[j]), outcomeList(want))
						}
						if want[0].Outcome == projector.Applied {
							applied[eventKey{ev.StreamID, ev.StreamRevision}]++
						}
					}
				}
			}
			for k, n := range applied {
				if n != 1 {
					t.Errorf("%s@%d applied %d times", k.stream, k.rev, n)
				}
			}
			if len(applied) != len(all) {
				t.Errorf("%d events applied, want %d", len(applied), len(all))
			}
			m.check(t, l, fastStore, slowStore)
		})
	}
}

// A runner with several workers (one where the strategy needs the log in
// order) catches up through duplicate deliveries and dropped subscriptions,
// is stopped in the middle and a new engine and runner go on from its
// checkpoint: each event is applied once over both runs, in batches, and the
// documents are those of the per-event path.
func TestMultiStream_runner_equals_the_per_event_path_through_duplicates_drops_and_a_restart(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	l := newESDBLog(t, 43, 25, 12, 12)
	all := l.events(t)
	for _, m := range multiStreams {
		t.Run(m.name, func(t *testing.T) {
			slowStore, fastStore := newStore(t), newStore(t)
			slow := m.engine(t, slowStore)
			for _, ev := range all {
				if _, err := slow.Handle(context.Background(), ev); err != nil {
					t.Fatalf("per-event path, %s@%d: %v", ev.StreamID, ev.StreamRevision, err)
				}
			}
			l.server.DuplicateDeliveries(0.25)
			defer l.server.DuplicateDeliveries(0)
			run := func(name string, until func(projector.RunnerStats) bool) projector.RunnerStats {
				src := &dropping{All: l.source(t), server: l.server, every: l.carts.Total / 4}
				src.times.Store(2)
				r := sourcetest.NewRunner(t, "multi", m.engine(t, fastStore), src, fastStore,
					projector.WithBatch(2, 5*time.Millisecond), projector.WithCheckpointEvery(10, 10*time.Millisecond),
					projector.WithWorkers(m.workers), projector.WithBuffer(64))
				x := sourcetest.Start(t, r)
				x.WaitFor(t, name, until)
				if err := x.Stop(); err != nil {
					t.Fatalf("%s: Run: %v", name, err)
				}
				return r.Stats()
			}
			half := uint64(l.carts.Total / 2)
			first := run("first", func(st projector.RunnerStats) bool { return st.Applied >= half })
			second := run("second", l.carts.Reached())
			t.Logf("first %+v\nsecond %+v", first, second)
			if first.Batches+second.Batches == 0 {
				t.Fatal("no batch: the batched path was not taken")
			}
			for _, st := range []projector.RunnerStats{first, second} {
				if st.Failed != 0 || st.Skipped != 0 || st.Parked != 0 {
					t.Fatalf("failures: %+v", st)
				}
			}
			if second.Events >= uint64(l.carts.Total) {
				t.Errorf("the second run read %d events: want it to go on from the first's checkpoint, not from the start of the %d", second.Events, l.carts.Total)
			}
			if got := first.Applied + second.Applied; got != uint64(l.carts.Total) {
				t.Errorf("applied %d over both runs, want each of the %d events once", got, l.carts.Total)
			}
			m.check(t, l, fastStore, slowStore)
		})
	}
}
