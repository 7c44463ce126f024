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

	"github.com/revgate/projector/projector"
)

// CheckpointCollection holds one document per subscription: where the
// projector resumes.
const CheckpointCollection = "projector_checkpoints"

var _ projector.CheckpointStore = (*Store)(nil)

type checkpointDoc struct {
	ID       string    `bson:"_id"`
	Position int64     `bson:"position"`
	Prepare  int64     `bson:"prepare"`
	Updated  time.Time `bson:"updatedAt"`
}

// LoadCheckpoint implements [projector.CheckpointStore].
func (s *Store) LoadCheckpoint(ctx context.Context, name string) (*projector.Checkpoint, error) {
	var d checkpointDoc
	err := s.db.Collection(CheckpointCollection).FindOne(ctx, bson.D{{Key: FieldID, Value: name}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mongostore: load checkpoint %q: %w", name, err)
	}
	if d.Position < 0 || d.Prepare < 0 {
		return nil, fmt.Errorf("mongostore: checkpoint %q holds a negative position %d/%d", name, d.Position, d.Prepare)
	}
	return &projector.Checkpoint{Position: uint64(d.Position), Prepare: uint64(d.Prepare)}, nil
}

// SaveCheckpoint implements [projector.CheckpointStore]. It only moves a
// checkpoint forward: when a later one is stored already (another process
// under the same name got further), it leaves that one. The write is
// acknowledged by the server before it returns, under the client's write
// concern (majority on a replica set by default).
func (s *Store) SaveCheckpoint(ctx context.Context, name string, c projector.Checkpoint) error {
	if c.Position > math.MaxInt64 || c.Prepare > math.MaxInt64 {
		return fmt.Errorf("mongostore: checkpoint %q: position %s does not fit a BSON int64", name, c)
	}
	d := checkpointDoc{ID: name, Position: int64(c.Position), Prepare: int64(c.Prepare), Updated: time.Now().UTC()}
	filter := bson.D{{Key: FieldID, Value: name}, {Key: "position", Value: bson.D{{Key: "$lte", Value: d.Position}}}}
	_, err := s.db.Collection(CheckpointCollection).ReplaceOne(ctx, filter, d, options.Replace().SetUpsert(true))
	if mongo.IsDuplicateKeyError(err) {
		return nil // a later checkpoint is stored: the upsert found no match and collided with it
	}
	if err != nil {
		return fmt.Errorf("mongostore: save checkpoint %q: %w", name, err)
	}
	return nil
}

// DeleteCheckpoint removes the checkpoint of name, so that its subscription
// starts again from the beginning (a rebuild).
func (s *Store) DeleteCheckpoint(ctx context.Context, name string) error {
	if _, err := s.db.Collection(CheckpointCollection).DeleteOne(ctx, bson.D{{Key: FieldID, Value: name}}); err != nil {
		return fmt.Errorf("mongostore: delete checkpoint %q: %w", name, err)
	}
	return nil
}
