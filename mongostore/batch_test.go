package mongostore_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector/driver"
)

type note struct {
	Text string `bson:"text"`
}

func newNote() any { return new(note) }

func TestLoadMany_serves_what_WriteMany_wrote_and_forgets_a_write_that_missed(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Database(t)
	s := mongostore.New(db)
	ok, err := s.WriteMany(ctx, "notes", []driver.Write{{ID: "a", Insert: true, Revision: 0, State: note{"first"}}})
	if err != nil || !ok[0] {
		t.Fatalf("insert: %v %v", ok, err)
	}
	got, err := s.LoadMany(ctx, "notes", []string{"a", "b"}, newNote)
	if a := got["a"]; err != nil || !a.Cached || a.Revision != 0 || a.State.(*note).Text != "first" || len(got) != 1 {
		t.Fatalf("after the write: %+v %v", got, err)
	}

	// Another process moves the document: the cache does not know, and the
	// next conditional write from it misses.
	if _, err := db.Collection("notes").UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "revision", Value: int64(5)}, {Key: "text", Value: "theirs"}}}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadMany(ctx, "notes", []string{"a"}, newNote); !got["a"].Cached || got["a"].Revision != 0 {
		t.Fatalf("stale entry: %+v", got["a"])
	}
	ok, err = s.WriteMany(ctx, "notes", []driver.Write{{ID: "a", From: 0, Revision: 1, State: note{"mine"}}})
	if err != nil || ok[0] {
		t.Fatalf("write from the stale revision: took %v (%v), want a miss", ok, err)
	}
	got, err = s.LoadMany(ctx, "notes", []string{"a"}, newNote)
	if a := got["a"]; err != nil || a.Cached || a.Revision != 5 || a.State.(*note).Text != "theirs" {
		t.Fatalf("after the miss, want the server's document: %+v %v", a, err)
	}

	// The per-event path writes around the cache and drops the entry.
	if took, err := s.Update(ctx, "notes", "a", 5, driver.Head{Revision: 6}, note{"gate"}); err != nil || !took {
		t.Fatalf("update: %v %v", took, err)
	}
	if got, _ := s.LoadMany(ctx, "notes", []string{"a"}, newNote); got["a"].Cached || got["a"].Revision != 6 {
		t.Fatalf("after a gate write: %+v", got["a"])
	}

	// A write that misses while another writer put the document at the same
	// revision is not taken (only this write's own token would say so), and
	// what the cache keeps is the server's document, not the one that was
	// not written.
	if _, err := s.LoadMany(ctx, "notes", []string{"a"}, newNote); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("notes").UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "revision", Value: int64(7)}, {Key: "text", Value: "also theirs"}}}}); err != nil {
		t.Fatal(err)
	}
	ok, err = s.WriteMany(ctx, "notes", []driver.Write{{ID: "a", From: 6, Revision: 7, State: note{"not written"}}})
	if err != nil || ok[0] {
		t.Fatalf("write to the revision another writer reached: took %v (%v), want a miss", ok, err)
	}
	got, err = s.LoadMany(ctx, "notes", []string{"a"}, newNote)
	if a := got["a"]; err != nil || a.Cached || a.State.(*note).Text != "also theirs" {
		t.Fatalf("after a write another writer beat: %+v %v", a, err)
	}

	none := mongostore.New(db, mongostore.WithDocumentCache(0))
	if _, err := none.WriteMany(ctx, "notes", []driver.Write{{ID: "c", Insert: true, State: note{"x"}}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := none.LoadMany(ctx, "notes", []string{"c"}, newNote); got["c"].Cached {
		t.Fatal("a store without a cache served from one")
	}
}

// A replace that misses because another writer moved the document to the
// same revision is not taken for one that took: the store tells its own
// write by a token only that write set.
func TestWriteMany_a_miss_to_another_writers_same_revision_is_a_miss(t *testing.T) {
	ctx := context.Background()
	s := mongostore.New(mongotest.Database(t), mongostore.WithDocumentCache(0))
	for _, id := range []string{"a", "b"} {
		if err := s.Insert(ctx, "notes", id, driver.Head{Revision: 4, Stream: "n-" + id}, note{"start"}); err != nil {
			t.Fatal(err)
		}
	}
	// Another writer takes "a" from 4 to 9 first.
	if took, err := s.Update(ctx, "notes", "a", 4, driver.Head{Revision: 9, Stream: "n-a"}, note{"theirs"}); err != nil || !took {
		t.Fatalf("the other writer: %v %v", took, err)
	}
	ok, err := s.WriteMany(ctx, "notes", []driver.Write{
		{ID: "a", From: 4, Revision: 9, Stream: "n-a", State: note{"mine"}},
		{ID: "b", From: 4, Revision: 9, Stream: "n-b", State: note{"mine"}},
	})
	if err != nil || ok[0] || !ok[1] {
		t.Fatalf("ok %v (%v): want a's write missed (another writer's revision 9) and b's taken", ok, err)
	}
	var got note
	if h, _, err := s.Load(ctx, "notes", "a", 0, &got); err != nil || h.Revision != 9 || got.Text != "theirs" {
		t.Fatalf("a: %+v %+v %v, want the other writer's", h, got, err)
	}
}
