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

// AddUnknownTypes adds counts to the events of types nobody registered
// recorded beside the checkpoint of name, by type: those the projectors
// writing it passed over (projector.RunnerStats.UnknownTypes, what a run
// met since it last added), summed over their runs, for "projector status"
// ([CheckpointStatus].UnknownTypes). The record stays once a build
// registers the type (the documents that met them miss them until a
// rebuild); a rebuild's collection has a record of its own. Two processes
// adding at once may leave one's counts out (read, then written): the
// record says which types were met, its counts at least that many.
func (s *Store) AddUnknownTypes(ctx context.Context, name string, counts map[string]uint64) error {
	if len(counts) == 0 {
		return nil
	}
	coll := s.db.Collection(checkpointCollection)
	var d struct {
		UnknownTypes []unknownType `bson:"unknownTypes"`
	}
	err := coll.FindOne(ctx, bson.D{{Key: fieldID, Value: name}}).Decode(&d)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("mongostore: record the unknown types of %q: %w", name, err)
	}
	sum := unknownTypes(d.UnknownTypes)
	if sum == nil {
		sum = make(map[string]uint64, len(counts))
	}
	for t, n := range counts {
		sum[t] += n
	}
	list := make([]unknownType, 0, len(sum))
	for _, t := range slices.Sorted(maps.Keys(sum)) {
		list = append(list, unknownType{Type: t, Count: sum[t]})
	}
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "unknownTypes", Value: list}}}}
	if err := upsert(ctx, coll, name, update); err != nil {
		return fmt.Errorf("mongostore: record the unknown types of %q: %w", name, err)
	}
	return nil
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
