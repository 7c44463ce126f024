package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// collectionsCollection records, per projection, the collection readers use
// and the one a rebuild is filling. A rebuild writes a new collection while
// the live one keeps serving, then switches this record; readers that resolve
// the collection with [Store.ActiveCollection] follow. (FerretDB has no
// renameCollection with dropTarget, so the switch is this record, not a
// rename; on MongoDB a reader may equally be pointed at the new name.)
const collectionsCollection = "projector_collections"

// Collections is a projection's record.
type Collections struct {
	// Active is the collection readers use; empty means the projection's own.
	Active string `bson:"active"`
	// Building is the collection a rebuild is filling, empty when none is.
	Building string `bson:"building"`
	// Previous is the collection Active replaced, kept until someone drops it.
	Previous string    `bson:"previous"`
	Switched time.Time `bson:"switchedAt,omitempty"`
	// Groups are the persistent subscription groups that fed the
	// projection in this database ([Store.RecordGroup]).
	Groups []string `bson:"groups,omitempty"`
}

// RecordGroup records that persistent subscription group feeds projection
// in this database: a rebuild of the projection refuses while the group is
// on the event store (a group of the same name recorded in no database of
// its own, another deployment's, does not stop it).
func (s *Store) RecordGroup(ctx context.Context, projection, group string) error {
	err := upsert(ctx, s.db.Collection(collectionsCollection), projection,
		bson.D{{Key: "$addToSet", Value: bson.D{{Key: "groups", Value: group}}}})
	if err != nil {
		return fmt.Errorf("mongostore: record group %q of %q: %w", group, projection, err)
	}
	return nil
}

// CollectionsOf returns the record of projection (zero when none).
func (s *Store) CollectionsOf(ctx context.Context, projection string) (Collections, error) {
	var c Collections
	err := s.db.Collection(collectionsCollection).FindOne(ctx, bson.D{{Key: fieldID, Value: projection}}).Decode(&c)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return Collections{}, fmt.Errorf("mongostore: collections of %q: %w", projection, err)
	}
	return c, nil
}

// ActiveCollection returns the collection readers of projection use: the one
// its last rebuild switched to, else def (the projection's own). With
// projection empty, it is that of the projection whose own collection is
// def, found by def (recorded by the rebuilds that switched since this
// version; def for one switched before): for a reader that knows only the
// collection, such as [projector.WaitForRevision].
func (s *Store) ActiveCollection(ctx context.Context, projection, def string) (string, error) {
	var c Collections
	var err error
	if projection == "" {
		// The latest switch: a projection renamed that kept its collection
		// left its old name's record, with the same def.
		latest := options.FindOne().SetSort(bson.D{{Key: "switchedAt", Value: -1}})
		err = s.db.Collection(collectionsCollection).FindOne(ctx, bson.D{{Key: fieldDef, Value: def}}, latest).Decode(&c)
		if errors.Is(err, mongo.ErrNoDocuments) {
			err = nil
		} else if err != nil {
			err = fmt.Errorf("mongostore: collections of %q: %w", def, err)
		}
	} else {
		c, err = s.CollectionsOf(ctx, projection)
	}
	if err != nil || c.Active == "" {
		return def, err
	}
	return c.Active, nil
}

// fieldDef, in a projection's record, is its own collection, which the
// record's Active replaces for readers.
const fieldDef = "def"

// StartRebuild records that a rebuild of projection fills collection, unless
// one is recorded already: it returns the collection of the rebuild in
// progress, so that an interrupted rebuild resumes where it was.
func (s *Store) StartRebuild(ctx context.Context, projection, collection string) (string, error) {
	coll := s.db.Collection(collectionsCollection)
	filter := bson.D{{Key: fieldID, Value: projection}, {Key: "building", Value: bson.D{{Key: "$in", Value: bson.A{nil, ""}}}}}
	_, err := coll.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "building", Value: collection}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil && !mongo.IsDuplicateKeyError(err) {
		return "", fmt.Errorf("mongostore: start rebuild of %q: %w", projection, err)
	}
	c, err := s.CollectionsOf(ctx, projection)
	if err != nil {
		return "", err
	}
	return c.Building, nil
}

// FinishRebuild switches readers of projection to building, the collection
// the caller's rebuild filled, keeping the one they used as Previous. It fails
// when the rebuild in progress is not that one (another process finished it
// and started the next).
func (s *Store) FinishRebuild(ctx context.Context, projection, building, def string) (Collections, error) {
	c, err := s.CollectionsOf(ctx, projection)
	if err != nil {
		return Collections{}, err
	}
	if c.Building != building {
		return Collections{}, fmt.Errorf("mongostore: the rebuild of %q in progress fills %q, not %q", projection, c.Building, building)
	}
	prev := c.Active
	if prev == "" {
		prev = def
	}
	next := Collections{Active: c.Building, Previous: prev, Switched: time.Now().UTC(), Groups: c.Groups}
	filter := bson.D{{Key: fieldID, Value: projection}, {Key: "building", Value: c.Building}}
	rec := struct {
		Collections `bson:",inline"`
		Def         string `bson:"def"`
	}{next, def}
	res, err := s.db.Collection(collectionsCollection).ReplaceOne(ctx, filter, rec)
	if err != nil {
		return Collections{}, fmt.Errorf("mongostore: switch %q to %s: %w", projection, c.Building, err)
	}
	if res.MatchedCount != 1 {
		return Collections{}, fmt.Errorf("mongostore: the rebuild of %q changed while it was switched", projection)
	}
	return next, nil
}

// upsert applies update to the record id of coll, inserting it when there is
// none. Two writers that find no record both insert it, and the server
// refuses the second with a duplicate key error: that one's update, done
// again, finds the record the other inserted.
func upsert(ctx context.Context, coll *mongo.Collection, id any, update bson.D) error {
	filter := bson.D{{Key: fieldID, Value: id}}
	_, err := coll.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
	if mongo.IsDuplicateKeyError(err) {
		_, err = coll.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
	}
	return err
}
