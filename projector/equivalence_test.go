package projector_test

// Equivalence of batched catch-up with stream folds (the fast path) and the
// per-event path (Engine.Handle, one event at a time through the gate), on
// the same events: a real event log on the in-process EventStoreDB-protocol
// server (esdbtest), read and folded through the production client, and
// real FerretDB documents. Each test compares the final documents, state and
// revision, of both paths, and counts each event's applications in the
// documents themselves (the ledger projection), so that an event folded
// twice or lost shows whatever the engine reports.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/subscription"
)

// ledgerName is the collection of the ledger projection.
const ledgerName = "cart_ledger"

// ledger records, in a cart's document, the stream revision of every event
// applied to it, once per application: a document whose events were each
// applied once holds 0, 1, ..., its revision.
type ledger struct {
	Applied []uint64 `bson:"applied"`
}

func newLedger() *projector.Projection[ledger] {
	p := projector.New[ledger](ledgerName, projector.StreamSuffix(cart.StreamPrefix))
	note := func(l ledger, ev projector.Event) (ledger, error) {
		return ledger{Applied: append(slices.Clone(l.Applied), ev.StreamRevision)}, nil
	}
	projector.Create(p, func(cart.ShoppingCartOpened) (ledger, error) { return ledger{Applied: []uint64{0}}, nil })
	projector.OnEvent(p, func(l ledger, _ cart.ProductItemAddedToShoppingCart, ev projector.Event) (ledger, error) {
		return note(l, ev)
	})
	projector.OnEvent(p, func(l ledger, _ cart.ProductItemRemovedFromShoppingCart, ev projector.Event) (ledger, error) {
		return note(l, ev)
	})
	projector.OnEvent(p, func(l ledger, _ cart.ShoppingCartConfirmed, ev projector.Event) (ledger, error) { return note(l, ev) })
	projector.OnEvent(p, func(l ledger, _ cart.ShoppingCartCanceled, ev projector.Event) (ledger, error) { return note(l, ev) })
	return p
}

// equivEngine returns a prepared engine of the cart details and the ledger
// on store, reading streams through h; folds says whether batches fold
// documents from their streams.
func equivEngine(t *testing.T, store driver.Store, h projector.StreamHistory, folds bool) *projector.Engine {
	t.Helper()
	opts := []projector.Option{projector.WithRetry(patient()), projector.WithStreamReader(h)}
	if !folds {
		opts = append(opts, projector.WithoutStreamFolds())
	}
	e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{cart.NewDetailsProjection(), newLedger()}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// esdbLog is an esdbtest server with carts appended to it.
type esdbLog struct {
	server *esdbtest.Server
	client *subscription.Client
	carts  *sourcetest.Carts
	lives  map[string][]any // each cart's events, appended or to come
	next   map[string]int   // how many of them are appended
}

// appender appends through a subscription.Client.
type appender struct{ c *subscription.Client }

func (a appender) Append(ctx context.Context, stream string, expected int64, events ...sourcetest.Event) (uint64, error) {
	return a.c.Append(ctx, stream, expected, events...)
}

func dialESDB(t *testing.T, s *esdbtest.Server) *subscription.Client {
	t.Helper()
	c, err := kurrent.Dial(s.URI(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newESDBLog starts a server, makes up the lives of n carts of size events
// each, and appends the first upTo events of each, shuffled over the log
// (each cart's in order), so that a batch meets most carts in the middle of
// their streams.
func newESDBLog(t *testing.T, seed uint64, n, size, upTo int) *esdbLog {
	t.Helper()
	s := esdbtest.New(t)
	c := dialESDB(t, s)
	l := &esdbLog{server: s, client: c, carts: sourcetest.NewCarts(appender{c}), lives: map[string][]any{}, next: map[string]int{}}
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range n {
		id := fmt.Sprintf("cart%03d", i)
		l.lives[id] = cart.RandomLife(r, id, fmt.Sprintf("client%d", i%7), size, t0)
	}
	l.appendShuffled(t, r, upTo)
	return l
}

// appendShuffled appends each cart's events up to upTo, shuffled over the
// log (each cart's in order), with an event of another stream every few.
func (l *esdbLog) appendShuffled(t *testing.T, r *rand.Rand, upTo int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var order []string
	for _, id := range slices.Sorted(maps.Keys(l.lives)) {
		for range min(upTo, len(l.lives[id])) - l.next[id] {
			order = append(order, id)
		}
	}
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for k, id := range order {
		l.carts.AppendCart(t, ctx, id, l.lives[id][l.next[id]])
		l.next[id]++
		if k%17 == 0 {
			l.carts.AppendOther(t, ctx)
		}
	}
	l.carts.AppendOther(t, ctx)
}

// source returns a catch-up source on $all filtered to the carts.
func (l *esdbLog) source(t *testing.T) *subscription.All {
	t.Helper()
	src, err := subscription.NewAll(l.client, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}, MaxSearchWindow: 8, CheckpointInterval: 2})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// events reads the carts' events from $all, in the log's order, as a
// catch-up subscription delivers them.
func (l *esdbLog) events(t *testing.T) []projector.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sub, err := l.source(t).Subscribe(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var out []projector.Event
	for len(out) < l.carts.Total {
		d, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("reading $all after %d events: %v", len(out), err)
		}
		if d.Event != nil {
			out = append(out, *d.Event)
		}
	}
	return out
}

// check asserts that the documents of both stores are the same, state and
// revision (all but the write token), that the cart details are the fold
// of each cart's events, and that each ledger holds every event of its
// cart once, in order.
func (l *esdbLog) check(t *testing.T, fast, perEvent *mongostore.Store) {
	t.Helper()
	for _, coll := range []string{cart.DetailsName, ledgerName} {
		a, b := rawDocuments(t, fast, coll), rawDocuments(t, perEvent, coll)
		if len(a) != len(l.carts.Events) || len(b) != len(l.carts.Events) {
			t.Errorf("%s: %d documents on the fast path, %d on the per-event path, want %d", coll, len(a), len(b), len(l.carts.Events))
		}
		bad := 0
		for id, doc := range a {
			if !reflect.DeepEqual(doc, b[id]) {
				if bad++; bad <= 3 {
					t.Errorf("%s/%s differs:\n     fast %v\nper-event %v", coll, id, doc, b[id])
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d documents differ", coll, bad, len(a))
		}
	}
	l.carts.Check(t, fast)
	for _, s := range []*mongostore.Store{fast, perEvent} {
		bad := 0
		for id, evs := range l.carts.Events {
			var got ledger
			found, rev, err := projector.ReadDocument(context.Background(), s, newLedger(), id, &got)
			want := make([]uint64, len(evs))
			for i := range want {
				want[i] = uint64(i)
			}
			if err != nil || !found || rev != int64(len(evs)-1) || !slices.Equal(got.Applied, want) {
				if bad++; bad <= 3 {
					t.Errorf("ledger of %s at revision %d (found %v, %v): applied %v, want each of its %d events once: %v",
						id, rev, found, err, got.Applied, len(evs), want)
				}
			}
		}
		if bad > 0 {
			t.Fatalf("%d of %d ledgers wrong", bad, len(l.carts.Events))
		}
	}
}

// rawDocuments returns the documents of a collection by id, as stored, but
// the write token (random per write).
func rawDocuments(t *testing.T, s *mongostore.Store, coll string) map[string]bson.M {
	t.Helper()
	ctx := context.Background()
	cur, err := s.Database().Collection(coll).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.M
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	out := map[string]bson.M{}
	for _, d := range docs {
		delete(d, "_write")
		out[fmt.Sprint(d["_id"])] = d
	}
	return out
}

// eventKey names an event of a stream.
type eventKey struct {
	stream string
	rev    uint64
}

// outcomes counts, per event and outcome, the results of its deliveries,
// and fails the test on any result but applied or duplicate.
type outcomes map[eventKey]map[projector.Outcome]int

func (o outcomes) add(t *testing.T, ev projector.Event, rs []projector.Result) {
	t.Helper()
	if len(rs) != 2 {
		t.Fatalf("%s@%d: %d results, want one per projection: %+v", ev.StreamID, ev.StreamRevision, len(rs), rs)
	}
	for _, r := range rs {
		if r.Outcome != projector.Applied && r.Outcome != projector.Duplicate {
			t.Fatalf("%s@%d in %s: %v %v", ev.StreamID, ev.StreamRevision, r.Projection, r.Outcome, r.Err)
		}
		k := eventKey{ev.StreamID, ev.StreamRevision}
		if o[k] == nil {
			o[k] = map[projector.Outcome]int{}
		}
		o[k][r.Outcome]++
	}
}

// deliveries returns events with each delivered two or three times: the
// copies soon after the original's first delivery (within 60 deliveries,
// as a redelivery after a short drop), often in the same batch, after
// later events of the same document.
func deliveries(r *rand.Rand, events []projector.Event) []projector.Event {
	out := slices.Clone(events)
	for _, e := range events {
		for range 1 + r.IntN(2) {
			first := slices.IndexFunc(out, func(x projector.Event) bool { return x.ID == e.ID })
			at := first + 1 + r.IntN(min(60, len(out)-first))
			out = slices.Insert(out, at, e)
		}
	}
	return out
}

// Every event delivered two or three times, in batches, then the log again
// from an older position (a runner re-reading from an older checkpoint),
// then a new engine (a restarted process, nothing known) from the middle:
// batches with stream folds give every delivery the outcome the per-event
// path gives it (applied on its first delivery, a duplicate on every other,
// in each projection), each event is applied once in all, and the documents
// are the per-event path's.
func TestStreamFold_equivalent_to_the_per_event_path_under_duplicates(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	l := newESDBLog(t, 21, 30, 10, 10)
	all := l.events(t)
	r := rand.New(rand.NewPCG(21, 22))
	phases := []struct {
		name   string
		events []projector.Event
		batch  int
		fresh  bool // a new engine
	}{
		{"each event delivered 2-3 times", deliveries(r, all), 37, false},
		{"again from an older checkpoint", all[len(all)/2:], 29, false},
		{"a new engine from the middle, duplicated", deliveries(r, all[len(all)*2/3:]), 41, true},
	}
	fastStore, slowStore := newStore(t), newStore(t)
	fast, slow := equivEngine(t, fastStore, l.client, true), equivEngine(t, slowStore, l.client, false)
	fastOut, slowOut := outcomes{}, outcomes{}
	folded := uint64(0)
	for _, ph := range phases {
		if ph.fresh {
			folded += fast.StreamsFolded()
			fast, slow = equivEngine(t, fastStore, l.client, true), equivEngine(t, slowStore, l.client, false)
		}
		evs := ph.events
		for i := 0; i < len(evs); i += ph.batch {
			batch := evs[i:min(i+ph.batch, len(evs))]
			got := fast.HandleBatch(context.Background(), batch)
			for j, ev := range batch {
				fastOut.add(t, ev, got[j])
				want, err := slow.Handle(context.Background(), ev)
				if err != nil {
					t.Fatalf("per-event path, %s@%d: %v", ev.StreamID, ev.StreamRevision, err)
				}
				slowOut.add(t, ev, want)
				if !sameOutcomes(got[j], want) {
					t.Errorf("%s, delivery %d (%s@%d): fast path %s, per-event path %s",
						ph.name, i+j, ev.StreamID, ev.StreamRevision, outcomeList(got[j]), outcomeList(want))
				}
			}
			if t.Failed() {
				t.FailNow()
			}
		}
	}
	folded += fast.StreamsFolded()
	if folded == 0 {
		t.Fatal("no document was folded from its stream: the fast path was not taken")
	}
	for _, o := range []outcomes{fastOut, slowOut} {
		for k, n := range o {
			if n[projector.Applied] != 2 { // once in each projection
				t.Errorf("%s@%d applied %d times over 2 projections, want once in each", k.stream, k.rev, n[projector.Applied])
			}
		}
		if len(o) != len(all) {
			t.Errorf("%d events have results, want %d", len(o), len(all))
		}
	}
	t.Logf("%d events, %d documents folded from their streams", len(all), folded)
	l.check(t, fastStore, slowStore)
}

// sameOutcomes reports whether two result lists have the same outcomes, per
// projection.
func sameOutcomes(a, b []projector.Result) bool {
	return slices.Equal(outcomeList(a), outcomeList(b))
}

func outcomeList(rs []projector.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s:%v", r.Projection, r.Outcome)
	}
	slices.Sort(out)
	return out
}

// dropping is a catch-up source whose subscriptions the server drops
// (esdbtest's DropSubscriptions) after every few deliveries, up to times
// drops in all: the drops come at the same points of the delivery on both
// paths, in the middle of the catch-up.
type dropping struct {
	*subscription.All
	server  *esdbtest.Server
	every   int
	times   atomic.Int32
	dropped atomic.Int32
}

func (d *dropping) Subscribe(ctx context.Context, from *projector.Checkpoint) (projector.Subscription, error) {
	sub, err := d.All.Subscribe(ctx, from)
	if err != nil {
		return nil, err
	}
	return &droppingSub{Subscription: sub, d: d}, nil
}

type droppingSub struct {
	projector.Subscription
	d    *dropping
	sent int
	done bool // dropped
}

func (s *droppingSub) Next(ctx context.Context) (projector.Delivery, error) {
	del, err := s.Subscription.Next(ctx)
	if err == nil && del.Event != nil {
		// From its every-th delivery on, until the server has one to drop.
		if s.sent++; s.sent >= s.d.every && !s.done && s.d.times.Load() > 0 && s.d.server.DropSubscriptions() > 0 {
			s.done = true
			s.d.times.Add(-1)
			s.d.dropped.Add(1)
		}
	}
	return del, err
}

// runToEnd runs r until its stored checkpoint is past the last cart event,
// then stops it.
func (l *esdbLog) runToEnd(t *testing.T, r *projector.Runner) projector.RunnerStats {
	t.Helper()
	x := sourcetest.Start(t, r)
	x.WaitFor(t, "the checkpoint past the last cart event", l.carts.Reached())
	if err := x.Stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return r.Stats()
}

// The subscription dropped up to three times in the middle of the catch-up
// (by the server, from the same numbers of deliveries on both paths), the
// runner resubscribing each time from its checkpoint: the batched runner with
// stream folds applies each event once, counts the overlaps as duplicates,
// and leaves the per-event runner's documents.
func TestStreamFold_equivalent_to_the_per_event_path_through_dropped_subscriptions(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	l := newESDBLog(t, 31, 30, 10, 10)
	const drops = 3
	run := func(name string, store *mongostore.Store, folds bool) (projector.RunnerStats, *projector.Engine, int) {
		src := &dropping{All: l.source(t), server: l.server, every: l.carts.Total / (drops + 2)}
		src.times.Store(drops)
		batch := 1
		if folds {
			batch = 40
		}
		e := equivEngine(t, store, l.client, folds)
		// Small buffers: the events read ahead of the checkpoint, delivered
		// again after each drop, stay few.
		r := sourcetest.NewRunner(t, name, e, src, store, projector.WithBatch(batch, 5*time.Millisecond),
			projector.WithCheckpointEvery(10, 10*time.Millisecond), projector.WithWorkers(2), projector.WithBuffer(64))
		st := l.runToEnd(t, r)
		return st, e, int(src.dropped.Load())
	}
	fastStore, slowStore := newStore(t), newStore(t)
	fast, e, fastDrops := run("fast", fastStore, true)
	slow, _, slowDrops := run("per-event", slowStore, false)
	t.Logf("fast path %+v, %d streams folded\nper-event %+v", fast, e.StreamsFolded(), slow)
	if e.StreamsFolded() == 0 || fast.Batches == 0 {
		t.Fatalf("no stream fold (%d) or no batch (%d): the fast path was not taken", e.StreamsFolded(), fast.Batches)
	}
	total := uint64(2 * l.carts.Total) // in each of the two projections
	for _, c := range []struct {
		name  string
		st    projector.RunnerStats
		drops int
		want  int // drops at least
	}{{"fast path", fast, fastDrops, 1}, {"per-event", slow, slowDrops, 1}} {
		// A runner may handle every event it has read before the server
		// has a subscription to drop again (its reader is ahead, the
		// resubscription comes after the queued events, and the catch-up
		// may be over by then): one drop at least, up to three.
		st := c.st
		if c.drops < c.want || st.Drops < uint64(c.drops) {
			t.Errorf("%s: %d drops injected, %d seen; want %d at least", c.name, c.drops, st.Drops, c.want)
		}
		if st.Applied != total || st.Failed != 0 || st.Skipped != 0 || st.Parked != 0 {
			t.Errorf("%s: applied %d, want each of the %d events once in each projection (%d): %+v", c.name, st.Applied, l.carts.Total, total, st)
		}
		if handled := 2 * (st.Events - st.Abandoned); st.Applied+st.Duplicates != handled {
			t.Errorf("%s: %d applied + %d duplicates, want the %d results of the events handled, the overlaps duplicates", c.name, st.Applied, st.Duplicates, handled)
		}
	}
	l.check(t, fastStore, slowStore)
}

// mortal is a process's store: once the process is killed it writes
// nothing more, documents or checkpoints. writeFault, when set, is called
// before each bulk write; it may kill the process and says whether the
// write still reaches the server, and whether the process learns it did.
type mortal struct {
	*mongostore.Store
	dead       atomic.Bool
	writeFault func() (write, answer bool)
}

var errKilled = errors.New("the process was killed")

func (m *mortal) WriteMany(ctx context.Context, collection string, writes []driver.Write) ([]bool, error) {
	write, answer := !m.dead.Load(), true
	if m.writeFault != nil {
		write, answer = m.writeFault()
	}
	if !write {
		return nil, errKilled
	}
	ok, err := m.Store.WriteMany(ctx, collection, writes)
	if !answer {
		return nil, errKilled
	}
	return ok, err
}

func (m *mortal) Insert(ctx context.Context, collection, id string, head driver.Head, state any) error {
	if m.dead.Load() {
		return errKilled
	}
	return m.Store.Insert(ctx, collection, id, head, state)
}

func (m *mortal) Update(ctx context.Context, collection, id string, from uint64, head driver.Head, state any) (bool, error) {
	if m.dead.Load() {
		return false, errKilled
	}
	return m.Store.Update(ctx, collection, id, from, head, state)
}

func (m *mortal) SaveCheckpoint(ctx context.Context, name string, cp projector.Checkpoint) error {
	if m.dead.Load() {
		return errKilled
	}
	return m.Store.SaveCheckpoint(ctx, name, cp)
}

// killingHistory reads streams for the stream folds. Once ready, it calls
// at in the first read that passes n events to its fold, before it passes
// the next (n < 0: at the end of the first read).
type killingHistory struct {
	projector.StreamHistory
	n     int
	ready func() bool
	done  atomic.Bool
	at    func(stream string)
}

func (h *killingHistory) ReadStream(ctx context.Context, stream string, from uint64, each func(projector.Event) error) error {
	if h.done.Load() || !h.ready() {
		return h.StreamHistory.ReadStream(ctx, stream, from, each)
	}
	if h.n < 0 {
		err := h.StreamHistory.ReadStream(ctx, stream, from, each)
		if h.done.CompareAndSwap(false, true) {
			h.at(stream)
		}
		return err
	}
	passed := 0
	return h.StreamHistory.ReadStream(ctx, stream, from, func(ev projector.Event) error {
		if passed == h.n && h.done.CompareAndSwap(false, true) {
			h.at(stream)
			return errKilled
		}
		passed++
		return each(ev)
	})
}

// heldBack is a source that delivers nothing at or past position at until
// open is closed.
type heldBack struct {
	*subscription.All
	at   uint64
	open chan struct{}
}

func (h *heldBack) Subscribe(ctx context.Context, from *projector.Checkpoint) (projector.Subscription, error) {
	sub, err := h.All.Subscribe(ctx, from)
	if err != nil {
		return nil, err
	}
	return &heldBackSub{Subscription: sub, h: h}, nil
}

type heldBackSub struct {
	projector.Subscription
	h *heldBack
}

func (s *heldBackSub) Next(ctx context.Context) (projector.Delivery, error) {
	d, err := s.Subscription.Next(ctx)
	if err == nil && d.Checkpoint != nil && d.Checkpoint.Position >= s.h.at {
		select {
		case <-s.h.open:
		case <-ctx.Done():
			return projector.Delivery{}, ctx.Err()
		}
	}
	return d, err
}

// firstOfNth returns the position of the first event of the n-th stream to
// appear in events.
func firstOfNth(events []projector.Event, n int) uint64 {
	seen := map[string]bool{}
	for _, ev := range events {
		if !seen[ev.StreamID] {
			if seen[ev.StreamID] = true; len(seen) == n {
				return ev.Position
			}
		}
	}
	return math.MaxUint64
}

// The process is killed in the middle of a stream's fold (its read cut
// after a few events, or its write lost, or its write done but unanswered)
// before it can store a later checkpoint: a new process (a new engine,
// knowing nothing, and a new store) resumes from the stored checkpoint. No
// event is lost and none applied twice: every ledger holds each event of
// its cart once, and the documents are those of the per-event path.
func TestStreamFold_a_restart_in_the_middle_of_a_fold_loses_nothing_and_applies_nothing_twice(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	l := newESDBLog(t, 41, 30, 10, 10)
	slowStore := newStore(t)
	slow := l.runToEnd(t, sourcetest.NewRunner(t, "per-event", equivEngine(t, slowStore, l.client, false), l.source(t), slowStore,
		projector.WithBatch(1, 0)))
	if slow.Applied != uint64(2*l.carts.Total) {
		t.Fatalf("per-event path: applied %d, want %d: %+v", slow.Applied, 2*l.carts.Total, slow)
	}
	all := l.events(t)
	for _, c := range []struct {
		name string
		// n: the killing read passes n events to the fold (-1: all);
		// write, answer: what becomes of the write after it.
		n             int
		write, answer bool
	}{
		{"read_cut_after_3_events", 3, false, false},
		{"write_lost", -1, false, false},
		{"write_done_unanswered", -1, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := mongotest.Database(t)
			first := &mortal{Store: mongostore.New(db)}
			var killed atomic.Value // the stream whose fold the process died in
			ctx, kill := context.WithCancel(context.Background())
			defer kill()
			die := func(stream string) {
				if killed.CompareAndSwap(nil, stream) {
					first.dead.Store(true)
					kill()
				}
			}
			h := &killingHistory{StreamHistory: l.client, n: c.n}
			var armed atomic.Value
			switch {
			case c.n >= 0:
				h.at = die
			default:
				// The fold read to its end; the process dies at the
				// batch's write.
				h.at = func(stream string) { armed.CompareAndSwap(nil, stream) }
				first.writeFault = func() (bool, bool) {
					if s, ok := armed.Load().(string); ok && killed.Load() == nil {
						die(s)
						return c.write, c.answer
					}
					return !first.dead.Load(), true
				}
			}
			e1 := equivEngine(t, first, h, true)
			// The first process sees the log up to the first event of the
			// 21st cart until it has stored a checkpoint: the carts after
			// it are folded, and one of those folds killed, after that,
			// however slow the machine.
			src := &heldBack{All: l.source(t), at: firstOfNth(all, 21), open: make(chan struct{})}
			r1 := sourcetest.NewRunner(t, "fast", e1, src, first, projector.WithBatch(20, 5*time.Millisecond),
				projector.WithCheckpointEvery(20, 10*time.Millisecond), projector.WithWorkers(1), projector.WithDrainTimeout(2*time.Second))
			// Killed in a fold after the first stored checkpoint, and
			// after a batch written since it: the events that batch wrote
			// past the checkpoint are the second process's duplicates.
			// (On a loaded machine the first checkpoint can be stored
			// before the first batch is written, and a kill in that
			// batch's fold left nothing written past it.)
			var opened sync.Once
			var appliedAtSave atomic.Uint64
			h.ready = func() bool {
				st := r1.Stats()
				if st.Saved == 0 {
					return false
				}
				opened.Do(func() { appliedAtSave.Store(st.Applied); close(src.open) })
				return r1.Stats().Applied > appliedAtSave.Load()
			}
			go func() {
				for r1.Stats().Saved == 0 && ctx.Err() == nil {
					time.Sleep(5 * time.Millisecond)
				}
				h.ready()
			}()
			done := make(chan error, 1)
			go func() { done <- r1.Run(ctx) }()
			select {
			case err := <-done:
				t.Logf("first process: %v", err)
			case <-time.After(sourcetest.WaitBound):
				t.Fatalf("the first process was not killed within %v: %+v", sourcetest.WaitBound, r1.Stats())
			}
			stream, _ := killed.Load().(string)
			if stream == "" {
				t.Fatalf("the process was not killed in a fold: %+v", r1.Stats())
			}
			a := r1.Stats()
			cp, err := first.LoadCheckpoint(context.Background(), "fast")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("killed in the fold of %s; first process %+v, %d streams folded; stored checkpoint %+v", stream, a, e1.StreamsFolded(), cp)
			if cp == nil || cp.Position >= l.carts.Last || a.Applied == 0 {
				t.Fatalf("stored checkpoint %+v (last cart event at %d), %d applied: want the first process killed mid-way", cp, l.carts.Last, a.Applied)
			}

			second := mongostore.New(db)
			e2 := equivEngine(t, second, l.client, true)
			r2 := sourcetest.NewRunner(t, "fast", e2, l.source(t), second, projector.WithBatch(20, 5*time.Millisecond),
				projector.WithCheckpointEvery(20, 10*time.Millisecond), projector.WithWorkers(1))
			b := l.runToEnd(t, r2)
			t.Logf("second process %+v, %d streams folded", b, e2.StreamsFolded())
			if e1.StreamsFolded()+e2.StreamsFolded() == 0 {
				t.Fatal("no stream fold")
			}
			if b.Failed != 0 || b.Skipped != 0 || b.Parked != 0 || b.Duplicates == 0 {
				t.Fatalf("second process: %+v; want no failure, and duplicates: the events since the stored checkpoint that the first process wrote", b)
			}
			// Each event is reported applied at most once over both
			// processes. (Fewer: the first process wrote the events its
			// folds read ahead of the catch-up; the second, knowing
			// nothing, finds them in the documents: duplicates.)
			if a.Applied+b.Applied > uint64(2*l.carts.Total) {
				t.Errorf("applied %d + %d, more than the %d events in each projection", a.Applied, b.Applied, l.carts.Total)
			}
			l.check(t, second, slowStore)
		})
	}
}

// Events appended to the carts' streams while the batched runner folds
// them, and another writer handling every event of the log one at a time
// (Engine.Handle, as a live consumer does) on the same engine at the same
// time: every document equals the one a lone per-event runner makes of the
// same log, and each event is applied once, in the ledger and in the
// results of the runner and the writer together. (The writer shares the
// engine: FerretDB's conditional updates are not compare-and-swap, so two
// processes writing one document at once are not exact on it, see the
// README's limits of the embedded server; TestStreamFold_beside_a_
// concurrent_writer has one in another engine and checks documents only.)
func TestStreamFold_equivalent_to_the_per_event_path_beside_a_concurrent_writer_and_appends(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	l := newESDBLog(t, 51, 30, 10, 6)
	fastStore := newStore(t)
	e := equivEngine(t, fastStore, l.client, true)
	folding := sourcetest.NewRunner(t, "folding", e, l.source(t), fastStore, projector.WithBatch(20, 5*time.Millisecond),
		projector.WithCheckpointEvery(30, 20*time.Millisecond), projector.WithWorkers(2))
	// The other writer goes through the log as it is, then through the
	// events appended meanwhile, while the runner catches up.
	initial := l.events(t)
	writer := outcomes{}
	var werr error
	var wg sync.WaitGroup
	appended := make(chan []projector.Event, 1)
	wg.Go(func() {
		handle := func(evs []projector.Event) {
			for _, ev := range evs {
				rs, err := e.Handle(context.Background(), ev)
				if err != nil || len(rs) != 2 {
					werr = fmt.Errorf("writer, %s@%d: %+v %v", ev.StreamID, ev.StreamRevision, rs, err)
					return
				}
				k := eventKey{ev.StreamID, ev.StreamRevision}
				if writer[k] == nil {
					writer[k] = map[projector.Outcome]int{}
				}
				for _, r := range rs {
					writer[k][r.Outcome]++
				}
			}
		}
		handle(initial)
		handle(<-appended)
	})
	x := sourcetest.Start(t, folding)
	x.WaitFor(t, "the first folds", func(projector.RunnerStats) bool { return e.StreamsFolded() > 0 })
	// The carts' later events, appended while the runner folds.
	l.appendShuffled(t, rand.New(rand.NewPCG(52, 52)), 10)
	appended <- l.events(t)[len(initial):]
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	x.WaitFor(t, "the runner past the last cart event", l.carts.Reached())
	if err := x.Stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	a := folding.Stats()
	var writerApplied uint64
	for k, n := range writer {
		writerApplied += uint64(n[projector.Applied])
		if n[projector.Applied]+n[projector.Duplicate] != 2 {
			t.Errorf("writer, %s@%d: %v", k.stream, k.rev, n)
		}
	}
	t.Logf("runner %+v, %d streams folded; the writer applied %d", a, e.StreamsFolded(), writerApplied)

	slowStore := newStore(t)
	slow := l.runToEnd(t, sourcetest.NewRunner(t, "per-event", equivEngine(t, slowStore, l.client, false), l.source(t), slowStore,
		projector.WithBatch(1, 0)))
	total := uint64(2 * l.carts.Total)
	if slow.Applied != total {
		t.Errorf("lone per-event runner: applied %d, want %d", slow.Applied, total)
	}
	if len(writer) != l.carts.Total {
		t.Errorf("the writer handled %d events, want %d", len(writer), l.carts.Total)
	}
	if a.Failed != 0 || a.Applied+writerApplied != total || a.Applied+a.Duplicates != 2*(a.Events-a.Abandoned) {
		t.Errorf("runner applied %d (of %d results), writer %d: want each of the %d events once in each projection (%d), by one or the other",
			a.Applied, a.Applied+a.Duplicates, writerApplied, l.carts.Total, total)
	}
	l.check(t, fastStore, slowStore)
}

// A redelivered event may come in a batch after later events of its
// document: the engine must not take the last event for the highest. Here
// the stream grew after its fold (revision 8, appended later) and the batch
// holds revision 8 and then revision 5 again: revision 8 must be applied,
// not passed over as known, and counted applied once.
func TestStreamFold_a_redelivery_after_a_later_event_in_one_batch(t *testing.T) {
	l := newESDBLog(t, 61, 3, 9, 8)
	all := l.events(t)
	s := newStore(t)
	e := equivEngine(t, s, l.client, true)
	var first []projector.Event // the first three events of each cart
	for _, ev := range all {
		if ev.StreamRevision < 3 {
			first = append(first, ev)
		}
	}
	got := outcomes{}
	for j, rs := range e.HandleBatch(context.Background(), first) {
		got.add(t, first[j], rs)
	}
	if e.StreamsFolded() == 0 {
		t.Fatal("no stream fold")
	}
	l.appendShuffled(t, rand.New(rand.NewPCG(62, 62)), 9)
	all = l.events(t)
	byRev := map[eventKey]projector.Event{}
	for _, ev := range all {
		byRev[eventKey{ev.StreamID, ev.StreamRevision}] = ev
	}
	var rest []projector.Event
	for _, id := range slices.Sorted(maps.Keys(l.lives)) {
		s := cart.StreamID(id)
		for rev := uint64(3); rev <= 8; rev++ {
			rest = append(rest, byRev[eventKey{s, rev}])
		}
		rest = append(rest, byRev[eventKey{s, 5}]) // again, after revision 8
	}
	for j, rs := range e.HandleBatch(context.Background(), rest) {
		got.add(t, rest[j], rs)
	}
	for k, n := range got {
		if n[projector.Applied] != 2 {
			t.Errorf("%s@%d applied %d times over 2 projections, want once in each", k.stream, k.rev, n[projector.Applied])
		}
	}
	if len(got) != len(all) {
		t.Errorf("%d events have results, want %d", len(got), len(all))
	}
	l.carts.Check(t, s)
}
