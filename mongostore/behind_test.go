package mongostore_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// tally is a summary's state in these tests.
type tally struct {
	N int `bson:"n"`
}

// countedStore returns a store on a fresh database whose writes to the
// server are counted, and the database through another client.
func countedStore(t *testing.T, opts ...mongostore.Option) (*mongostore.Store, *mongotest.Writes, *mongo.Database) {
	t.Helper()
	db, w := mongotest.CountedDatabase(t)
	return mongostore.New(db, opts...), w, mongotest.Client(t).Database(db.Name())
}

// onServer reads document id of coll from the server, past any store.
func onServer(t *testing.T, db *mongo.Database, coll, id string) (tally, int64, bool) {
	t.Helper()
	var doc struct {
		N    int `bson:"n"`
		Meta struct {
			V int64 `bson:"v"`
		} `bson:"_meta"`
	}
	err := db.Collection(coll).FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Decode(&doc)
	if err == mongo.ErrNoDocuments {
		return tally{}, 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return tally{doc.N}, doc.Meta.V, true
}

func newTally() any { return &tally{} }

// put is a write of document id from version from (0: an insert) to
// version from+1, with n.
func put(id string, from int64, n int) driver.Put {
	expected := from
	if from == 0 {
		expected = -1
	}
	return driver.Put{ID: id, Expected: expected, Meta: driver.Meta{Version: from + 1, Revisions: map[string]uint64{"s-" + id: uint64(n)}}, State: &tally{N: n}}
}

// Held back, ten batches' writes of the same summaries reach the server as
// one write of each at the flush; meanwhile each batch folds on what the
// batch before wrote, the server keeps its old documents, and the store
// checks each write as the server would.
func TestWriteBehind_batches_writes_of_a_summary_reach_the_server_once_at_the_flush(t *testing.T) {
	s, w, db := countedStore(t)
	ctx := context.Background()
	behind := driver.HoldBack(ctx)
	const coll, batches = "summaries", 10
	ids := []string{"s1", "s2", "s3"}
	if ok, err := s.PutGuardedMany(ctx, coll, []driver.Put{put("s1", 0, 1)}); err != nil || !ok[0] {
		t.Fatalf("the first write, not held back: %v %v", ok, err)
	}
	before := w.Of(coll)
	for b := range batches {
		got, err := s.LoadGuardedMany(behind, coll, ids, newTally)
		if err != nil {
			t.Fatal(err)
		}
		var puts []driver.Put
		for _, id := range ids {
			g, found := got[id]
			switch {
			case !found && b == 0 && id != "s1":
				puts = append(puts, put(id, 0, 1))
			case !found:
				t.Fatalf("batch %d: %s not found", b, id)
			default:
				n := g.State.(*tally).N
				if id == "s1" && n != b+1 || id != "s1" && n != b {
					t.Fatalf("batch %d: %s has %d: not what the batch before wrote", b, id, n)
				}
				puts = append(puts, put(id, g.Meta.Version, n+1))
			}
		}
		ok, err := s.PutGuardedMany(behind, coll, puts)
		if err != nil || !ok[0] || !ok[1] || !ok[2] {
			t.Fatalf("batch %d: %v %v", b, ok, err)
		}
		// A write from a version the document is not at is refused, as the
		// server refuses it.
		if ok, err := s.PutGuardedMany(behind, coll, []driver.Put{put("s2", 0, 99), put("s3", 77, 99)}); err != nil || ok[0] || ok[1] {
			t.Fatalf("batch %d: writes from the wrong version: %v %v, want both refused", b, ok, err)
		}
	}
	if n := w.Of(coll) - before; n != 0 {
		t.Errorf("%d writes reached the server before the flush, want 0", n)
	}
	if got, v, _ := onServer(t, db, coll, "s1"); got.N != 1 || v != 1 {
		t.Errorf("s1 on the server before the flush: %+v at version %d, want its first write", got, v)
	}
	if _, _, found := onServer(t, db, coll, "s2"); found {
		t.Error("s2 is on the server before the flush")
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.Of(coll) - before; n != len(ids) {
		t.Errorf("the flush sent %d writes, want one per document (%d)", n, len(ids))
	}
	for _, id := range ids {
		want := batches
		if id == "s1" {
			want++
		}
		if got, v, found := onServer(t, db, coll, id); !found || got.N != want || v != int64(want) {
			t.Errorf("%s on the server after the flush: %+v at version %d (found %v), want %d at version %d", id, got, v, found, want, want)
		}
	}
	// Flushed, the documents are still the store's: the next batch writes
	// from the version flushed, and the next flush sends only it.
	got, err := s.LoadGuardedMany(behind, coll, []string{"s2"}, newTally)
	if err != nil || got["s2"].Meta.Version != batches {
		t.Fatalf("s2 after the flush: %+v %v", got["s2"], err)
	}
	if ok, err := s.PutGuardedMany(behind, coll, []driver.Put{put("s2", batches, 50)}); err != nil || !ok[0] {
		t.Fatalf("s2 after the flush: %v %v", ok, err)
	}
	before = w.Of(coll)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.Of(coll) - before; n != 1 {
		t.Errorf("the second flush sent %d writes, want 1", n)
	}
}

// A read or write of a document held back that goes to the server (the
// per-event path, the gate, a replay) writes it first: it sees every event
// the batches applied, never the server's older document.
func TestWriteBehind_a_read_past_the_batches_writes_the_document_first(t *testing.T) {
	s, _, db := countedStore(t)
	ctx := context.Background()
	behind := driver.HoldBack(ctx)
	const coll = "summaries"
	if _, err := s.LoadGuardedMany(behind, coll, []string{"a", "b"}, newTally); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.PutGuardedMany(behind, coll, []driver.Put{put("a", 0, 5), put("b", 0, 7)}); err != nil || !ok[0] || !ok[1] {
		t.Fatalf("%v %v", ok, err)
	}
	var a tally
	meta, found, err := s.LoadGuarded(ctx, coll, "a", &a)
	if err != nil || !found || a.N != 5 || meta.Version != 1 {
		t.Fatalf("LoadGuarded(a) = %+v %+v %v %v, want the write held back", a, meta, found, err)
	}
	if got, _, found := onServer(t, db, coll, "a"); !found || got.N != 5 {
		t.Errorf("a on the server after a read through the store: %+v %v", got, found)
	}
	// The gate's write of b, from the version the batches left it at.
	if ok, err := s.PutGuarded(ctx, coll, "b", 1, driver.Meta{Version: 2}, &tally{N: 8}); err != nil || !ok {
		t.Fatalf("PutGuarded(b) from version 1: %v %v, want written", ok, err)
	}
	// Then a batch reads b from the server, not the store's old copy.
	got, err := s.LoadGuardedMany(behind, coll, []string{"b"}, newTally)
	if err != nil || got["b"].State.(*tally).N != 8 || got["b"].Meta.Version != 2 {
		t.Fatalf("b read by a batch after the gate wrote it: %+v %v", got["b"], err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, v, _ := onServer(t, db, coll, "b"); got.N != 8 || v != 2 {
		t.Errorf("b on the server: %+v at version %d, want the gate's write", got, v)
	}
}

// A document another writer changed after the store read it is not
// written over: the flush fails for good, naming it, and writes the rest.
func TestWriteBehind_a_document_changed_by_another_writer_fails_the_flush_for_good(t *testing.T) {
	s, _, db := countedStore(t)
	other := mongostore.New(db)
	ctx := context.Background()
	behind := driver.HoldBack(ctx)
	const coll = "summaries"
	if ok, err := other.PutGuardedMany(ctx, coll, []driver.Put{put("x", 0, 1), put("y", 0, 1)}); err != nil || !ok[0] || !ok[1] {
		t.Fatalf("%v %v", ok, err)
	}
	if _, err := s.LoadGuardedMany(behind, coll, []string{"x", "y"}, newTally); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.PutGuardedMany(behind, coll, []driver.Put{put("x", 1, 2), put("y", 1, 2)}); err != nil || !ok[0] || !ok[1] {
		t.Fatalf("%v %v", ok, err)
	}
	if ok, err := other.PutGuarded(ctx, coll, "x", 1, driver.Meta{Version: 2}, &tally{N: 40}); err != nil || !ok {
		t.Fatalf("the other writer: %v %v", ok, err)
	}
	err := s.Flush(behind)
	if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), `"x"`) || !strings.Contains(err.Error(), "another writer") {
		t.Fatalf("Flush = %v, want a permanent error that names x and another writer", err)
	}
	if got, _, _ := onServer(t, db, coll, "x"); got.N != 40 {
		t.Errorf("x = %+v, want the other writer's", got)
	}
	if got, _, _ := onServer(t, db, coll, "y"); got.N != 2 {
		t.Errorf("y = %+v, want the write held back", got)
	}
	// The loss is said again by every flush of the collection, so that no
	// checkpoint moves past it, until one that forgets (a run's end).
	if err := s.Flush(behind, coll); !retry.IsPermanent(err) {
		t.Errorf("a second flush: %v, want the loss said again", err)
	}
	if err := s.Flush(behind, "other"); err != nil {
		t.Errorf("a flush of another collection: %v, want nothing of this one's loss", err)
	}
	if err := s.Flush(ctx, coll); !retry.IsPermanent(err) {
		t.Errorf("a flush that forgets: %v, want the loss said once more", err)
	}
	if err := s.Flush(ctx, coll); err != nil {
		t.Errorf("after a flush that forgot: %v, want nothing", err)
	}
}

// A flush cut short after the server took some of its writes (here, as
// its inserts are answered) leaves those documents on the server with
// writes the next flush's conditions do not expect: the next flush knows
// them for its own, by their write tokens, and writes over them; no other
// writer is reported.
func TestWriteBehind_a_flush_cut_short_is_done_again_without_a_false_loss(t *testing.T) {
	name := mongotest.Database(t).Name()
	var cut atomic.Pointer[context.CancelFunc]
	monitor := &event.CommandMonitor{Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
		if c := cut.Load(); c != nil && e.CommandName == "insert" {
			(*c)()
		}
	}}
	client, err := mongo.Connect(options.Client().ApplyURI(mongotest.URI(t)).SetMonitor(monitor))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	s, db := mongostore.New(client.Database(name)), mongotest.Client(t).Database(name)
	ctx := context.Background()
	behind := driver.HoldBack(ctx)
	const coll = "summaries"
	if ok, err := s.PutGuardedMany(ctx, coll, []driver.Put{put("old", 0, 1)}); err != nil || !ok[0] {
		t.Fatal(ok, err)
	}
	batch := func(puts ...driver.Put) {
		t.Helper()
		if _, err := s.LoadGuardedMany(behind, coll, []string{"new", "old"}, newTally); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.PutGuardedMany(behind, coll, puts); err != nil || !ok[0] || !ok[1] {
			t.Fatal(ok, err)
		}
	}
	batch(put("new", 0, 1), put("old", 1, 2))
	fctx, cancel := context.WithCancel(behind)
	cut.Store(&cancel)
	err = s.Flush(fctx)
	cut.Store(nil)
	if err == nil {
		t.Fatal("the flush was not cut short")
	}
	batch(put("new", 1, 2), put("old", 2, 3))
	if err := s.Flush(behind); err != nil {
		t.Fatalf("the flush after one cut short: %v, want no loss (permanent %v)", err, retry.IsPermanent(err))
	}
	for id, want := range map[string]int{"new": 2, "old": 3} {
		if got, v, _ := onServer(t, db, coll, id); got.N != want || v != int64(want) {
			t.Errorf("%s = %+v at version %d, want %d", id, got, v, want)
		}
	}
}

// A store that keeps its limit as a batch reads writes what it holds
// back, and forgets what it keeps: its memory is bounded by the limit and
// a batch, not by the documents.
func TestWriteBehind_a_store_at_its_limit_writes_and_forgets(t *testing.T) {
	s, w, db := countedStore(t, mongostore.WithBehindLimit(1))
	ctx := context.Background()
	behind := driver.HoldBack(ctx)
	const coll = "summaries"
	if _, err := s.LoadGuardedMany(behind, coll, []string{"a"}, newTally); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.PutGuardedMany(behind, coll, []driver.Put{put("a", 0, 3)}); err != nil || !ok[0] {
		t.Fatalf("%v %v", ok, err)
	}
	if w.Of(coll) != 0 {
		t.Fatalf("%d writes: want a held back", w.Of(coll))
	}
	if _, err := s.LoadGuardedMany(behind, coll, []string{"b"}, newTally); err != nil {
		t.Fatal(err)
	}
	if got, _, found := onServer(t, db, coll, "a"); !found || got.N != 3 || w.Of(coll) != 1 {
		t.Errorf("a = %+v (found %v) after %d writes: want written as the next batch read, the store at its limit", got, found, w.Of(coll))
	}
	// Forgotten (as a batch that folded it writes it, when another
	// batch's read found the store at its limit): a write is not held
	// back, but written at once, conditional on the version it is from.
	if ok, err := s.PutGuardedMany(behind, coll, []driver.Put{put("a", 1, 4)}); err != nil || !ok[0] {
		t.Errorf("a write of a document the store forgot: %v %v, want it written", ok, err)
	}
	if got, v, found := onServer(t, db, coll, "a"); !found || got.N != 4 || v != 2 || w.Of(coll) != 2 {
		t.Errorf("a = %+v at version %d (found %v) after %d writes: want written at once, at version 2", got, v, found, w.Of(coll))
	}
	if ok, err := s.PutGuardedMany(behind, coll, []driver.Put{put("a", 1, 5)}); err != nil || ok[0] {
		t.Errorf("a write from version 1 of a document at version 2: %v %v, want it refused", ok, err)
	}
	if got, _, _ := onServer(t, db, coll, "a"); got.N != 4 {
		t.Errorf("a = %+v after a refused write: want it unchanged, n 4", got)
	}
}
