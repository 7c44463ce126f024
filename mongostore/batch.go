package mongostore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/revgate/projector/projector"
)

var _ projector.BatchStore = (*Store)(nil)

// batchChunk bounds one write command: FerretDB 1.24 holds a connection per
// statement of an update command and hangs past about 95 of them.
const batchChunk = 50

// LoadMany implements [projector.BatchStore]: one query for ids.
func (s *Store) LoadMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]projector.Loaded, error) {
	out := make(map[string]projector.Loaded, len(ids))
	for chunk := range slices.Chunk(ids, 1000) {
		cur, err := s.db.Collection(collection).Find(ctx, bson.D{{Key: FieldID, Value: bson.D{{Key: "$in", Value: chunk}}}})
		if err != nil {
			return nil, fmt.Errorf("mongostore: load %d documents of %s: %w", len(chunk), collection, err)
		}
		for cur.Next(ctx) {
			id, ok := cur.Current.Lookup(FieldID).StringValueOK()
			if !ok {
				continue
			}
			rev, err := revisionOf(cur.Current)
			if err != nil {
				cur.Close(ctx)
				return nil, fmt.Errorf("mongostore: %s/%s: %w", collection, id, err)
			}
			state := newState()
			if err := bson.Unmarshal(cur.Current, state); err != nil {
				cur.Close(ctx)
				return nil, fmt.Errorf("mongostore: decode %s/%s into %T: %w", collection, id, state, err)
			}
			out[id] = projector.Loaded{Revision: rev, State: state}
		}
		if err := cur.Err(); err != nil {
			cur.Close(ctx)
			return nil, err
		}
		cur.Close(ctx)
	}
	return out, nil
}

// WriteMany implements [projector.BatchStore]: unordered bulk inserts and
// replaces filtered on the revision each write starts from, in chunks; ok[i]
// reports whether writes[i] took effect.
func (s *Store) WriteMany(ctx context.Context, collection string, writes []projector.Write) ([]bool, error) {
	ok := make([]bool, len(writes))
	coll := s.db.Collection(collection)
	var inserts, replaces []int
	for i, w := range writes {
		if w.Insert {
			inserts = append(inserts, i)
		} else {
			replaces = append(replaces, i)
		}
	}
	for chunk := range slices.Chunk(inserts, batchChunk) {
		docs := make([]any, len(chunk))
		for j, i := range chunk {
			d, err := document(writes[i].ID, writes[i].Revision, writes[i].State)
			if err != nil {
				return nil, err
			}
			docs[j] = d
			ok[i] = true
		}
		_, err := coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
		var bw mongo.BulkWriteException
		switch {
		case err == nil:
		case errors.As(err, &bw) && bw.WriteConcernError == nil:
			for _, we := range bw.WriteErrors {
				if we.Index >= 0 && we.Index < len(chunk) {
					ok[chunk[we.Index]] = false
				}
			}
		default:
			return nil, fmt.Errorf("mongostore: insert %d documents into %s: %w", len(chunk), collection, err)
		}
	}
	for chunk := range slices.Chunk(replaces, batchChunk) {
		models := make([]mongo.WriteModel, len(chunk))
		for j, i := range chunk {
			w := writes[i]
			d, err := document(w.ID, w.Revision, w.State)
			if err != nil {
				return nil, err
			}
			models[j] = mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: FieldID, Value: w.ID}, {Key: FieldRevision, Value: int64(w.From)}}).SetReplacement(d)
		}
		res, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		if err != nil {
			return nil, fmt.Errorf("mongostore: write %d documents of %s: %w", len(chunk), collection, err)
		}
		if int(res.MatchedCount) == len(chunk) {
			for _, i := range chunk {
				ok[i] = true
			}
			continue
		}
		// Some filters matched nothing: find which by reading the revisions.
		ids := make([]string, len(chunk))
		for j, i := range chunk {
			ids[j] = writes[i].ID
		}
		now, err := s.LoadMany(ctx, collection, ids, func() any { return new(bson.Raw) })
		if err != nil {
			return nil, err
		}
		for _, i := range chunk {
			ok[i] = now[writes[i].ID].Revision == writes[i].Revision
		}
	}
	return ok, nil
}
