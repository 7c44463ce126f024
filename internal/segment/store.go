package segment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Collections of the records processes of a segmented projection share.
const (
	// CountCollection holds how many segments each collection of a
	// projection is split into: one record a collection, written by the
	// first segmented run.
	CountCollection = "projector_segments"
	// MemberCollection holds one heartbeat a process of a segmented
	// projection: who is alive, until when.
	MemberCollection = "projector_members"
)

// Count returns how many segments collection is split into, as its first
// segmented run recorded; 0 when none did.
func Count(ctx context.Context, db *mongo.Database, collection string) (int, error) {
	var d struct {
		Segments int `bson:"segments"`
	}
	err := db.Collection(CountCollection).FindOne(ctx, bson.D{{Key: "_id", Value: collection}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading how many segments %s has: %w", collection, err)
	}
	return d.Segments, nil
}

// Record records that collection (of projection) is split into n segments,
// unless a number is recorded already, and returns the number recorded.
func Record(ctx context.Context, db *mongo.Database, projection, collection string, n int) (int, error) {
	doc := bson.D{{Key: "_id", Value: collection}, {Key: "projection", Value: projection}, {Key: "segments", Value: n},
		{Key: "recordedAt", Value: time.Now().UTC()}}
	_, err := db.Collection(CountCollection).InsertOne(ctx, doc)
	if err != nil && !mongo.IsDuplicateKeyError(err) {
		return 0, fmt.Errorf("recording the segments of %s: %w", collection, err)
	}
	return Count(ctx, db, collection)
}

// member is one process's heartbeat.
type member struct {
	ID         string    `bson:"_id"`
	Projection string    `bson:"projection"`
	Holder     string    `bson:"holder"`
	Expires    time.Time `bson:"expires"`
}

func memberID(projection, holder string) string { return projection + " " + holder }

// Beat records that holder runs projection for ttl from now.
func Beat(ctx context.Context, db *mongo.Database, projection, holder string, ttl time.Duration) error {
	set := bson.D{{Key: "projection", Value: projection}, {Key: "holder", Value: holder}, {Key: "expires", Value: time.Now().UTC().Add(ttl)}}
	_, err := db.Collection(MemberCollection).UpdateOne(ctx, bson.D{{Key: "_id", Value: memberID(projection, holder)}},
		bson.D{{Key: "$set", Value: set}}, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("heartbeat of %s: %w", projection, err)
	}
	return nil
}

// Leave removes holder's heartbeat of projection at once.
func Leave(ctx context.Context, db *mongo.Database, projection, holder string) error {
	if _, err := db.Collection(MemberCollection).DeleteOne(ctx, bson.D{{Key: "_id", Value: memberID(projection, holder)}}); err != nil {
		return fmt.Errorf("leaving %s: %w", projection, err)
	}
	return nil
}

// Forget removes the heartbeats of projection expired for longer than
// after: those of processes gone without leaving (killed).
func Forget(ctx context.Context, db *mongo.Database, projection string, after time.Duration) error {
	_, err := db.Collection(MemberCollection).DeleteMany(ctx, bson.D{{Key: "projection", Value: projection},
		{Key: "expires", Value: bson.D{{Key: "$lt", Value: time.Now().UTC().Add(-after)}}}})
	if err != nil {
		return fmt.Errorf("members of %s: %w", projection, err)
	}
	return nil
}

// Live returns the processes whose heartbeat of projection has not
// expired, sorted.
func Live(ctx context.Context, db *mongo.Database, projection string) ([]string, error) {
	coll := db.Collection(MemberCollection)
	now := time.Now().UTC()
	cur, err := coll.Find(ctx, bson.D{{Key: "projection", Value: projection}, {Key: "expires", Value: bson.D{{Key: "$gt", Value: now}}}})
	if err != nil {
		return nil, fmt.Errorf("members of %s: %w", projection, err)
	}
	var all []member
	if err := cur.All(ctx, &all); err != nil {
		return nil, fmt.Errorf("members of %s: %w", projection, err)
	}
	out := make([]string, len(all))
	for i, m := range all {
		out[i] = m.Holder
	}
	slices.Sort(out)
	return out, nil
}
