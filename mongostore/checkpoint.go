package mongostore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/projector"
)

// checkpointCollection holds one document per subscription: where the
// projector resumes.
const checkpointCollection = "projector_checkpoints"

type checkpointDoc struct {
	ID       string    `bson:"_id"`
	Position int64     `bson:"position"`
	Prepare  int64     `bson:"prepare"`
	EventID  string    `bson:"eventId,omitempty"`
	Log      string    `bson:"log,omitempty"`
	Updated  time.Time `bson:"updatedAt"`
}

// CheckpointStatus is what is stored for one subscription.
type CheckpointStatus struct {
	Name string
	// Checkpoint is nil when none was stored yet.
	Checkpoint *projector.Checkpoint
	Updated    time.Time
	// LastError is the error the subscription last stopped with, and when.
	LastError   string
	LastErrorAt time.Time
	// UnknownTypes counts the events of types nobody registered that the
	// projectors writing it passed over, by type, summed over their runs
	// ([Store.AddUnknownTypes]): approximate, see there.
	UnknownTypes map[string]uint64
	// Events is how many events of the subscription's documents its
	// checkpoint has passed, where its writer counts them: each segment of
	// a projection run in segments (run --segments) does, since the
	// segment started from the collection's own checkpoint (the projection
	// was split, or rebuilt in one process), counting each event once
	// however many processes were killed or joined meanwhile (an event a
	// killed process applied and did not checkpoint is counted by the
	// process that resumes the segment).
	// An event counts whether it was applied, or parked or skipped under
	// the failure policy. 0 where nothing counts.
	Events uint64
}

// Checkpoints returns the status of every subscription with a stored
// checkpoint or error, by name; given names, of those only (one query by
// their ids, whatever else the collection holds).
func (s *Store) Checkpoints(ctx context.Context, names ...string) (map[string]CheckpointStatus, error) {
	filter := bson.D{}
	if len(names) > 0 {
		filter = bson.D{{Key: fieldID, Value: bson.D{{Key: "$in", Value: names}}}}
	}
	cur, err := s.db.Collection(checkpointCollection).Find(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("mongostore: read checkpoints: %w", err)
	}
	var docs []struct {
		ID           string        `bson:"_id"`
		Position     *int64        `bson:"position"`
		Prepare      int64         `bson:"prepare"`
		EventID      string        `bson:"eventId"`
		Log          string        `bson:"log"`
		Updated      time.Time     `bson:"updatedAt"`
		LastError    string        `bson:"lastError"`
		LastErrorAt  time.Time     `bson:"lastErrorAt"`
		UnknownTypes []unknownType `bson:"unknownTypes"`
		Events       int64         `bson:"events"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongostore: read checkpoints: %w", err)
	}
	unknown, err := s.allUnknownTypes(ctx, names...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]CheckpointStatus, len(docs))
	for _, d := range docs {
		counts := unknownTypes(d.UnknownTypes) // the list earlier versions kept here
		for t, n := range unknown[d.ID] {
			if counts == nil {
				counts = map[string]uint64{}
			}
			counts[t] += n
		}
		st := CheckpointStatus{Name: d.ID, Updated: d.Updated, LastError: d.LastError, LastErrorAt: d.LastErrorAt, UnknownTypes: counts}
		if d.Events > 0 {
			st.Events = uint64(d.Events)
		}
		if d.Position != nil && *d.Position >= 0 && d.Prepare >= 0 {
			st.Checkpoint = &projector.Checkpoint{Position: uint64(*d.Position), Prepare: uint64(d.Prepare), EventID: d.EventID, Log: d.Log}
		}
		out[d.ID] = st
	}
	for name, counts := range unknown {
		if _, ok := out[name]; !ok {
			out[name] = CheckpointStatus{Name: name, UnknownTypes: counts} // no checkpoint yet
		}
	}
	return out, nil
}

// RecordError implements the runner's error record: the error a subscription
// stopped with, kept beside its checkpoint for "projector status".
func (s *Store) RecordError(ctx context.Context, name, message string) error {
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "lastError", Value: message}, {Key: "lastErrorAt", Value: time.Now().UTC()}}}}
	if err := upsert(ctx, s.db.Collection(checkpointCollection), name, update); err != nil {
		return fmt.Errorf("mongostore: record error of %q: %w", name, err)
	}
	return nil
}

// ClearError implements the runner's error record: the subscription has
// recovered from the error it last stopped with.
func (s *Store) ClearError(ctx context.Context, name string) error {
	filter := bson.D{{Key: fieldID, Value: name}, {Key: "lastError", Value: bson.D{{Key: "$exists", Value: true}}}}
	update := bson.D{{Key: "$unset", Value: bson.D{{Key: "lastError", Value: ""}, {Key: "lastErrorAt", Value: ""}}}}
	if _, err := s.db.Collection(checkpointCollection).UpdateOne(ctx, filter, update); err != nil {
		return fmt.Errorf("mongostore: clear the error of %q: %w", name, err)
	}
	return nil
}

// LoadCheckpoint implements [projector.CheckpointStore].
func (s *Store) LoadCheckpoint(ctx context.Context, name string) (*projector.Checkpoint, error) {
	var d checkpointDoc
	filter := bson.D{{Key: fieldID, Value: name}, {Key: "position", Value: bson.D{{Key: "$exists", Value: true}}}}
	err := s.db.Collection(checkpointCollection).FindOne(ctx, filter).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mongostore: load checkpoint %q: %w", name, err)
	}
	return d.checkpoint()
}

// checkpoint is the checkpoint d stores.
func (d checkpointDoc) checkpoint() (*projector.Checkpoint, error) {
	if d.Position < 0 || d.Prepare < 0 {
		return nil, fmt.Errorf("mongostore: checkpoint %q holds a negative position %d/%d", d.ID, d.Position, d.Prepare)
	}
	return &projector.Checkpoint{Position: uint64(d.Position), Prepare: uint64(d.Prepare), EventID: d.EventID, Log: d.Log}, nil
}

// SaveCheckpoint implements [projector.CheckpointStore]. It only moves a
// checkpoint forward ([projector.Checkpoint.After]): when a later one is
// stored already (another process under the same name got further), it
// leaves that one. The write is
// acknowledged by the server before it returns, under the client's write
// concern (majority on a replica set by default).
func (s *Store) SaveCheckpoint(ctx context.Context, name string, c projector.Checkpoint) error {
	if c.Position > math.MaxInt64 || c.Prepare > math.MaxInt64 {
		return fmt.Errorf("mongostore: checkpoint %q: position %s does not fit a BSON int64", name, c)
	}
	set := checkpointSet(c)
	filter := bson.D{{Key: fieldID, Value: name}, {Key: "$or", Value: notAfter(c)}}
	coll := s.db.Collection(checkpointCollection)
	_, err := coll.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: set}}, options.UpdateOne().SetUpsert(true))
	if mongo.IsDuplicateKeyError(err) {
		// The upsert found no match and collided with the record: a later
		// checkpoint, or a record another writer inserted meanwhile (an
		// error recorded, with no position yet), which the update, done
		// again, matches.
		_, err = coll.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: set}}, options.UpdateOne().SetUpsert(true))
		if mongo.IsDuplicateKeyError(err) {
			return nil // a later checkpoint is stored
		}
	}
	if err != nil {
		return fmt.Errorf("mongostore: save checkpoint %q: %w", name, err)
	}
	return nil
}

// notAfter matches a checkpoint record that c is not behind: at or before
// c by commit position, then by prepare position (the events of a legacy
// TCP transaction share their commit position), or without a position (a
// record holding only an error).
func notAfter(c projector.Checkpoint) bson.A {
	return bson.A{
		bson.D{{Key: "position", Value: bson.D{{Key: "$lt", Value: int64(c.Position)}}}},
		bson.D{{Key: "position", Value: int64(c.Position)}, {Key: "prepare", Value: bson.D{{Key: "$lte", Value: int64(c.Prepare)}}}},
		bson.D{{Key: "position", Value: int64(c.Position)}, {Key: "prepare", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "position", Value: bson.D{{Key: "$exists", Value: false}}}},
	}
}

// checkpointSet is what a checkpoint write sets.
func checkpointSet(c projector.Checkpoint) bson.D {
	return bson.D{{Key: "position", Value: int64(c.Position)}, {Key: "prepare", Value: int64(c.Prepare)},
		{Key: "eventId", Value: c.EventID}, {Key: "log", Value: c.Log}, {Key: "updatedAt", Value: time.Now().UTC()}}
}

// DeleteCheckpoint removes the checkpoint of name, so that its subscription
// starts again from the beginning (a rebuild).
func (s *Store) DeleteCheckpoint(ctx context.Context, name string) error {
	if _, err := s.db.Collection(checkpointCollection).DeleteOne(ctx, bson.D{{Key: fieldID, Value: name}}); err != nil {
		return fmt.Errorf("mongostore: delete checkpoint %q: %w", name, err)
	}
	return nil
}

// Reached returns where the subscription name is, all together: its
// checkpoint; for a collection whose projection runs split into segments
// (run --segments), the lowest of its segments' checkpoints, a segment
// without one counting from the collection's own (where it was before it
// was split); nil when there is none. Every event up to it is applied.
// [projector.WaitForPosition] reads it, so that a wait on a segmented
// projection needs no segment's name.
func (s *Store) Reached(ctx context.Context, name string) (*projector.Checkpoint, error) {
	n, err := segment.Count(ctx, s.db, name)
	if err != nil {
		return nil, fmt.Errorf("mongostore: %w", err)
	}
	names := bson.A{name} // and its segments', one read for all
	for k := range n {
		names = append(names, segment.CheckpointName(name, k, n))
	}
	all, err := s.checkpointsIn(ctx, names)
	if err != nil || n <= 1 {
		return all[name], err
	}
	return segment.Lowest(name, n, all[name], func(name string) *projector.Checkpoint { return all[name] }), nil
}

// checkpointsIn returns the stored checkpoints among names, by name.
func (s *Store) checkpointsIn(ctx context.Context, names bson.A) (map[string]*projector.Checkpoint, error) {
	filter := bson.D{{Key: fieldID, Value: bson.D{{Key: "$in", Value: names}}}, {Key: "position", Value: bson.D{{Key: "$exists", Value: true}}}}
	cur, err := s.db.Collection(checkpointCollection).Find(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("mongostore: read checkpoints: %w", err)
	}
	var docs []checkpointDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongostore: read checkpoints: %w", err)
	}
	out := make(map[string]*projector.Checkpoint, len(docs))
	for _, d := range docs {
		if out[d.ID], err = d.checkpoint(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
