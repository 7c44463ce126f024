package mongostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ClaimVersion records that version of a projection builds collection,
// unless another version is recorded for it, and returns the version that
// builds it: version, or the one recorded. A collection that has documents
// and no version recorded was built before versions were: version 0. The
// record is the collection's checkpoint record (a rebuild's new collection
// has a record of its own).
func (s *Store) ClaimVersion(ctx context.Context, collection string, version int) (int, error) {
	rec, err := s.recordedVersion(ctx, collection)
	if err != nil || rec != nil {
		return deref(rec), err
	}
	err = s.db.Collection(collection).FindOne(ctx, bson.D{}, options.FindOne().SetProjection(bson.D{{Key: fieldID, Value: 1}})).Err()
	switch {
	case err == nil:
		return 0, nil // documents, and no version: built before versions were recorded
	case !errors.Is(err, mongo.ErrNoDocuments):
		return 0, fmt.Errorf("mongostore: look into %q: %w", collection, err)
	}
	filter := bson.D{{Key: fieldID, Value: collection}, {Key: "version", Value: bson.D{{Key: "$exists", Value: false}}}}
	_, err = s.db.Collection(checkpointCollection).UpdateOne(ctx, filter,
		bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: version}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil && !mongo.IsDuplicateKeyError(err) { // a duplicate: another version was recorded meanwhile
		return 0, fmt.Errorf("mongostore: record version %d of %q: %w", version, collection, err)
	}
	rec, err = s.recordedVersion(ctx, collection)
	return deref(rec), err
}

func deref(v *int) int {
	if v == nil {
		return 0
	}
	return *v
}

// recordedVersion is the version recorded for collection, nil when none is.
func (s *Store) recordedVersion(ctx context.Context, collection string) (*int, error) {
	var d struct {
		Version *int `bson:"version"`
	}
	err := s.db.Collection(checkpointCollection).FindOne(ctx, bson.D{{Key: fieldID, Value: collection}}).Decode(&d)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("mongostore: version of %q: %w", collection, err)
	}
	return d.Version, nil
}

// unknownType is one entry of a checkpoint record's unknown types: kept as
// a list, since type names may hold dots, which field names may not.
type unknownType struct {
	Type  string `bson:"type"`
	Count uint64 `bson:"count"`
}

// unknownTypesCollection holds the events of types nobody registered that
// each subscription met, one document a subscription and type, so that
// processes adding at once never lose each other's types.
const unknownTypesCollection = "projector_unknown_types"

// AddUnknownTypes adds counts to the events of types nobody registered
// recorded for the subscription name, by type: those the projectors writing
// it passed over (projector.RunnerStats.UnknownTypes, what a run met since
// it last added), summed over their runs, for "projector status"
// ([CheckpointStatus].UnknownTypes). The record stays once a build
// registers the type (the documents that met them miss them until a
// rebuild); a rebuild's collection has a record of its own. Processes that
// add at once keep each other's types (one record a type, added to with
// $inc); on a server whose updates are not atomic (FerretDB) two adds of
// one type at once may count as one. The counts are approximate anyway: a
// process counts again what it reads again after a restart, and each
// process of a segmented projection counts an event whose document it
// cannot tell.
func (s *Store) AddUnknownTypes(ctx context.Context, name string, counts map[string]uint64) error {
	coll := s.db.Collection(unknownTypesCollection)
	for _, t := range slices.Sorted(maps.Keys(counts)) {
		if counts[t] == 0 {
			continue
		}
		id := bson.D{{Key: "name", Value: name}, {Key: "type", Value: t}}
		update := bson.D{{Key: "$inc", Value: bson.D{{Key: "count", Value: int64(counts[t])}}}}
		if err := upsert(ctx, coll, id, update); err != nil {
			return fmt.Errorf("mongostore: record the unknown types of %q: %w", name, err)
		}
	}
	return nil
}

// allUnknownTypes returns the unknown types recorded, by subscription name
// and type; given names, those of these subscriptions only.
func (s *Store) allUnknownTypes(ctx context.Context, names ...string) (map[string]map[string]uint64, error) {
	filter := bson.D{}
	if len(names) > 0 {
		filter = bson.D{{Key: fieldID + ".name", Value: bson.D{{Key: "$in", Value: names}}}}
	}
	cur, err := s.db.Collection(unknownTypesCollection).Find(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("mongostore: read the unknown types: %w", err)
	}
	var docs []struct {
		ID struct {
			Name string `bson:"name"`
			Type string `bson:"type"`
		} `bson:"_id"`
		Count int64 `bson:"count"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongostore: read the unknown types: %w", err)
	}
	out := map[string]map[string]uint64{}
	for _, d := range docs {
		if out[d.ID.Name] == nil {
			out[d.ID.Name] = map[string]uint64{}
		}
		out[d.ID.Name][d.ID.Type] += uint64(max(d.Count, 0))
	}
	return out, nil
}

// unknownTypes returns list as a map (nil when empty).
func unknownTypes(list []unknownType) map[string]uint64 {
	if len(list) == 0 {
		return nil
	}
	out := make(map[string]uint64, len(list))
	for _, u := range list {
		out[u.Type] = u.Count
	}
	return out
}
