package app

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
)

// A rebuild names its collection after the second it begins: one begun in
// the second the last began (a script, a test) is given a name of its own,
// not the collection readers use since the last one switched, nor one that
// exists.
func TestFreshCollection_is_never_one_in_use_or_existing(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Database(t)
	store := mongostore.New(db)
	if got, err := freshCollection(ctx, store, "p", "p_r100"); err != nil || got != "p_r100" {
		t.Fatalf("nothing there: %q, %v; want p_r100", got, err)
	}
	building, err := store.StartRebuild(ctx, "p", "p_r100")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.FinishRebuild(ctx, "p", building, "p"); err != nil {
		t.Fatal(err)
	}
	if got, err := freshCollection(ctx, store, "p", "p_r100"); err != nil || got != "p_r100_2" {
		t.Fatalf("readers' collection: %q, %v; want p_r100_2", got, err)
	}
	if _, err := db.Collection("p_r100_2").InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := freshCollection(ctx, store, "p", "p_r100"); err != nil || got != "p_r100_3" {
		t.Fatalf("readers' collection and one that exists: %q, %v; want p_r100_3", got, err)
	}
}
