package mongostore_test

import (
	"context"
	"maps"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
)

// A document whose revisions were written as a subdocument ("revs", by
// earlier versions) is read as before, and its next write stores them as
// one binary value under the same name, which an earlier version fails to
// decode.
func TestRevisions_the_earlier_subdocument_is_read_and_written_again_in_the_binary_form(t *testing.T) {
	ctx := context.Background()
	s := mongostore.New(mongotest.Database(t))
	coll := s.Database().Collection("summaries")
	old := bson.D{{Key: "_id", Value: "o-"}, {Key: "_meta", Value: bson.D{{Key: "v", Value: int64(3)},
		{Key: "revs", Value: bson.D{{Key: "blood-1", Value: int64(2)}, {Key: "blood-2", Value: int64(0)}}}}}, {Key: "units", Value: 5}}
	if _, err := coll.InsertOne(ctx, old); err != nil {
		t.Fatal(err)
	}
	var state struct {
		Units int `bson:"units"`
	}
	meta, found, err := s.LoadGuarded(ctx, "summaries", "o-", &state)
	want := map[string]uint64{"blood-1": 2, "blood-2": 0}
	if err != nil || !found || meta.Version != 3 || !maps.Equal(meta.Revisions, want) || state.Units != 5 {
		t.Fatalf("read %+v (found %v, %v), units %d; want version 3, revisions %v, units 5", meta, found, err, state.Units, want)
	}
	meta.Version, meta.Revisions["blood-3"] = 4, 1
	state.Units = 6
	if ok, err := s.PutGuarded(ctx, "summaries", "o-", 3, meta, state); err != nil || !ok {
		t.Fatalf("write: %v %v", ok, err)
	}
	raw, err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "o-"}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	revs, err := raw.LookupErr("_meta", "revs")
	if err != nil || revs.Type != bson.TypeBinary {
		t.Fatalf("the write stored revs as %v (%v), want one binary value", revs.Type, err)
	}
	// An earlier version decodes it into a map, and fails: loudly, rather
	// than reading a document with no revisions and applying its events
	// again.
	var earlier struct {
		Meta struct {
			Revs map[string]int64 `bson:"revs"`
		} `bson:"_meta"`
	}
	if err := bson.Unmarshal(raw, &earlier); err == nil {
		t.Errorf("an earlier version's decoding of the binary form succeeded: %v", earlier.Meta.Revs)
	}
	again, _, err := s.LoadGuarded(ctx, "summaries", "o-", &state)
	if want["blood-3"] = 1; err != nil || !maps.Equal(again.Revisions, want) {
		t.Errorf("read again %v (%v), want %v", again.Revisions, err, want)
	}
}
