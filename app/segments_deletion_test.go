package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest/e2e"
)

// Two segments; a stream deleted and written again, its document live in
// one of them. A run that resumes the other segment from before the
// deletion (its holder died there) reads the deletion record again: it is
// not its segment's document, and the segment that holds it is past the
// record, so the live document is not marked deleted.
func TestRun_segments_a_takeover_does_not_delete_again_a_document_written_again_since(t *testing.T) {
	servers := e2e.StartServers(t, e2e.Options{})
	db := servers.Database(t)
	ctx := context.Background()
	first := servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	if _, err := servers.Client().DeleteStream(ctx, "ticket/1", kurrentdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "b"}) // written again: the stream lives, its document starts over
	c := config(app.Projection{Definition: tickets("tickets").OnDelete(projector.MarkDeleted), Reads: app.StreamPrefix("ticket/")})
	args := []string{"run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
		"--http", "", "--segments", "2", "--lease", "2s", "--checkpoint-interval", "100ms"}
	atHead := func(r *e2e.Running) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			cps, _ := mongostore.New(db).Checkpoints(ctx)
			a, b := cps["tickets/segment-0-of-2"].Checkpoint, cps["tickets/segment-1-of-2"].Checkpoint
			if a != nil && b != nil && a.Position >= servers.Head() && b.Position >= servers.Head() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the segments do not reach the head %d\n%s", servers.Head(), r.Stderr())
			}
		}
	}
	deleted := func() any {
		var doc bson.M
		if err := db.Collection("tickets").FindOne(ctx, bson.D{{Key: "_id", Value: "1"}}).Decode(&doc); err != nil {
			return err
		}
		return doc["_deleted"]
	}
	r := e2e.StartCommand(t, c, args...)
	atHead(r)
	r.Stop(t)
	before := deleted()
	// The other segment's checkpoint is behind, before the deletion: as
	// its holder, which died, left it.
	other := 1 - segment.Of("1", 2)
	if _, err := db.Collection("projector_checkpoints").UpdateOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("tickets/segment-%d-of-2", other)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "position", Value: int64(first[0].Position)}, {Key: "prepare", Value: int64(first[0].Position)}, {Key: "eventId", Value: first[0].ID}}}}); err != nil {
		t.Fatal(err)
	}
	r = e2e.StartCommand(t, c, args...)
	atHead(r)
	r.Stop(t)
	after := deleted()
	t.Logf("document 1 (stream ticket/1 deleted, then written again): _deleted %v after the first run, %v after the takeover", before, after)
	if after == true {
		t.Errorf("the live document of ticket/1 (segment %d, past the deletion) is marked deleted by a run that resumed segment %d from before the deletion\n%s",
			1-other, other, r.Stderr())
	}
}
