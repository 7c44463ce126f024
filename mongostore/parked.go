package mongostore

import (
	"cmp"
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

// ParkedCollection holds the events parked under the park policy, one
// document per (projection, event).
const ParkedCollection = "projector_parked"

type parkedDoc struct {
	ID         string     `bson:"_id"`
	Projection string     `bson:"projection"`
	Document   string     `bson:"document"`
	Stream     string     `bson:"stream"`
	Revision   int64      `bson:"revision"`
	Position   int64      `bson:"position"`
	Prepare    int64      `bson:"prepare,omitempty"` // below position (a legacy TCP transaction's event); none: at it
	EventID    string     `bson:"eventId"`
	Type       string     `bson:"type"`
	Data       []byte     `bson:"data"`
	Metadata   []byte     `bson:"metadata,omitempty"`
	Created    time.Time  `bson:"created"`
	Error      string     `bson:"error"`
	Attempts   int        `bson:"attempts"`
	ParkedAt   time.Time  `bson:"parkedAt"`
	Replayed   *time.Time `bson:"replayedAt,omitempty"`
	Held       bool       `bson:"held,omitempty"`
	Collection string     `bson:"collection,omitempty"`
	Claim      *claimDoc  `bson:"claim,omitempty"`
}

// claimDoc is a replay under way ([projector.ReplayClaim]).
type claimDoc struct {
	Before string    `bson:"before"`
	After  string    `bson:"after"`
	At     time.Time `bson:"at"`
}

func parkedID(projection, eventID string) string { return projection + "/" + eventID }

// recordID is the id of parked event p's record: the one Parked read it
// from, else the first record of its event.
func recordID(p projector.ParkedEvent) string {
	return cmp.Or(p.Record, parkedID(p.Projection, p.ID))
}

// Park implements [projector.Parker]. Parking an event again in the same
// build keeps the first record (recorded is false), unless it now fails
// with another document or held where it was not, which replaces it
// (recorded is true). Another build (a rebuild's collection) that parks it
// has a record of its own: each build replays its own.
func (s *Store) Park(ctx context.Context, p projector.ParkedEvent) (bool, error) {
	position := p.Position
	if position == math.MaxUint64 {
		position = 0 // unknown: an event read from its stream, which gives none
	}
	d := parkedDoc{
		ID: parkedID(p.Projection, p.ID), Projection: p.Projection, Document: p.Document, Stream: p.StreamID,
		Revision: int64(p.StreamRevision), Position: int64(position), EventID: p.ID, Type: p.Type,
		Data: p.Data, Metadata: p.Metadata, Created: p.Created, Error: p.Error, Attempts: p.Attempts, ParkedAt: p.ParkedAt, Held: p.Held, Collection: p.Collection,
	}
	if p.Prepare < position {
		d.Prepare = int64(p.Prepare)
	}
	// Looked up first: inside a transaction (the inbox strategy) a failed
	// insert would abort it.
	coll := s.db.Collection(ParkedCollection)
	var old parkedDoc
	if err := coll.FindOne(ctx, bson.D{{Key: fieldID, Value: d.ID}}).Decode(&old); err == nil {
		if old.Collection == d.Collection || d.Collection == "" || old.Collection == "" {
			// This build's (a record from before builds were told apart
			// counts as one): the same record, unless the event now fails
			// in a way that says more (with a document where it had none or
			// another, or held where it was not), which replaces it. A
			// delivery again that knows less (no document: its router
			// still cannot route it) leaves the record as it is.
			if old.Replayed != nil || !(d.Document != "" && d.Document != old.Document || d.Held && !old.Held) {
				return false, nil
			}
			if d.Position == 0 {
				d.Position, d.Prepare = old.Position, old.Prepare // the event as delivered had them
			}
			if _, err := coll.ReplaceOne(ctx, bson.D{{Key: fieldID, Value: old.ID}}, d); err != nil {
				return false, fmt.Errorf("mongostore: park %s: %w", d.ID, err)
			}
			return true, nil
		}
		d.ID = parkedID(p.Projection, p.Collection+"/"+p.ID)
		if err := coll.FindOne(ctx, bson.D{{Key: fieldID, Value: d.ID}}).Err(); err == nil {
			return false, nil
		} else if !errors.Is(err, mongo.ErrNoDocuments) {
			return false, fmt.Errorf("mongostore: park %s: %w", d.ID, err)
		}
	} else if !errors.Is(err, mongo.ErrNoDocuments) {
		return false, fmt.Errorf("mongostore: park %s: %w", d.ID, err)
	}
	_, err := coll.InsertOne(ctx, d)
	switch {
	case mongo.IsDuplicateKeyError(err):
		return false, nil // recorded meanwhile
	case err != nil:
		return false, fmt.Errorf("mongostore: park %s: %w", d.ID, err)
	}
	return true, nil
}

// Parked returns the events of projection that are parked and not replayed,
// in the order they were parked.
func (s *Store) Parked(ctx context.Context, projection string) ([]projector.ParkedEvent, error) {
	filter := bson.D{{Key: "projection", Value: projection}, {Key: "replayedAt", Value: bson.D{{Key: "$exists", Value: false}}}}
	return s.parked(ctx, filter, fmt.Sprintf("parked events of %q", projection))
}

// ParkedOf returns the events parked against document of projection in
// its build that writes collection (records from before builds were told
// apart included), not replayed, in the order they were parked: a lookup
// by the index [Store.PrepareHolds] makes.
func (s *Store) ParkedOf(ctx context.Context, projection, collection, document string) ([]projector.ParkedEvent, error) {
	filter := bson.D{{Key: "projection", Value: projection}, {Key: "collection", Value: bson.D{{Key: "$in", Value: bson.A{collection, ""}}}},
		{Key: "document", Value: document}, {Key: "replayedAt", Value: bson.D{{Key: "$exists", Value: false}}}}
	return s.parked(ctx, filter, fmt.Sprintf("parked events of %s in %q", document, projection))
}

// parked returns the parked records filter finds, in the order they were
// parked; what names them in an error.
func (s *Store) parked(ctx context.Context, filter bson.D, what string) ([]projector.ParkedEvent, error) {
	cur, err := s.db.Collection(ParkedCollection).Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "parkedAt", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("mongostore: %s: %w", what, err)
	}
	var docs []parkedDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongostore: %s: %w", what, err)
	}
	out := make([]projector.ParkedEvent, len(docs))
	for i, d := range docs {
		out[i] = projector.ParkedEvent{
			Event: projector.Event{ID: d.EventID, Type: d.Type, StreamID: d.Stream, StreamRevision: uint64(d.Revision),
				Position: uint64(d.Position), Prepare: uint64(d.Prepare), Data: d.Data, Metadata: d.Metadata, Created: d.Created},
			Projection: d.Projection, Document: d.Document,
			Error: d.Error, Attempts: d.Attempts, ParkedAt: d.ParkedAt, Held: d.Held, Collection: d.Collection, Record: d.ID,
		}
		if d.Claim != nil {
			out[i].Claim = &projector.ReplayClaim{Before: d.Claim.Before, After: d.Claim.After}
		}
	}
	return out, nil
}

// Held implements [projector.Holder]: the documents of projection with held
// events not replayed, and how many each holds.
func (s *Store) Held(ctx context.Context, projection, collection string) (map[string]int, error) {
	filter := bson.D{{Key: "projection", Value: projection}, {Key: "collection", Value: collection}, {Key: "held", Value: true},
		{Key: "replayedAt", Value: bson.D{{Key: "$exists", Value: false}}}}
	cur, err := s.db.Collection(ParkedCollection).Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "document", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("mongostore: held documents of %q: %w", projection, err)
	}
	var docs []struct {
		Document string `bson:"document"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongostore: held documents of %q: %w", projection, err)
	}
	out := map[string]int{}
	for _, d := range docs {
		out[d.Document]++
	}
	return out, nil
}

// PrepareHolds implements [projector.HoldPreparer]: it creates the index of
// the lookups the hold policy makes for every event of a held document
// ([Store.Holds]), and a replay of each parked event of a document folded
// anew ([Store.ParkedOf]); without it each would scan the parked events,
// and a busy document held for long parks more with every event. It
// writes to the database: the engine calls it from Prepare, never from a
// read-only command such as status.
func (s *Store) PrepareHolds(ctx context.Context) error {
	keys := bson.D{{Key: "projection", Value: 1}, {Key: "collection", Value: 1}, {Key: "document", Value: 1}}
	if _, err := s.db.Collection(ParkedCollection).Indexes().CreateOne(ctx, mongo.IndexModel{Keys: keys}); err != nil {
		return fmt.Errorf("mongostore: index of %s: %w", ParkedCollection, err)
	}
	return nil
}

// Holds implements [projector.Holder]: how many events document holds in
// projection.
func (s *Store) Holds(ctx context.Context, projection, collection, document string) (int, error) {
	filter := bson.D{{Key: "projection", Value: projection}, {Key: "collection", Value: collection}, {Key: "document", Value: document}, {Key: "held", Value: true},
		{Key: "replayedAt", Value: bson.D{{Key: "$exists", Value: false}}}}
	n, err := s.db.Collection(ParkedCollection).CountDocuments(ctx, filter)
	if err != nil {
		return 0, fmt.Errorf("mongostore: held events of %s in %q: %w", document, projection, err)
	}
	return int(n), nil
}

// ClaimReplay implements [projector.ReplayClaimer]: it records on the parked
// event, not replayed yet, the replay about to write its document.
func (s *Store) ClaimReplay(ctx context.Context, pe projector.ParkedEvent, c projector.ReplayClaim) error {
	id := recordID(pe)
	filter := bson.D{{Key: fieldID, Value: id}, {Key: "replayedAt", Value: bson.D{{Key: "$exists", Value: false}}}}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "claim", Value: claimDoc{Before: c.Before, After: c.After, At: time.Now().UTC()}}}}}
	res, err := s.db.Collection(ParkedCollection).UpdateOne(ctx, filter, set)
	switch {
	case err != nil:
		return fmt.Errorf("mongostore: claim the replay of %s: %w", id, err)
	case res.MatchedCount == 0:
		return fmt.Errorf("mongostore: claim the replay of %s: %w", id, projector.ErrReplayedAlready)
	}
	return nil
}

// ReleaseReplay implements [projector.ReplayClaimer]: it removes claim c
// from the parked event when c is the one recorded (by its token after).
func (s *Store) ReleaseReplay(ctx context.Context, pe projector.ParkedEvent, c projector.ReplayClaim) error {
	id := recordID(pe)
	filter := bson.D{{Key: fieldID, Value: id}, {Key: "claim.after", Value: c.After}}
	if _, err := s.db.Collection(ParkedCollection).UpdateOne(ctx, filter, bson.D{{Key: "$unset", Value: bson.D{{Key: "claim", Value: ""}}}}); err != nil {
		return fmt.Errorf("mongostore: release the replay of %s: %w", id, err)
	}
	return nil
}

// Replayed marks a parked event replayed (it stays, for the record); a replay
// that failed again records the new error instead (replayErr non-nil).
func (s *Store) Replayed(ctx context.Context, pe projector.ParkedEvent, replayErr error) error {
	id := recordID(pe)
	set := bson.D{{Key: "replayedAt", Value: time.Now().UTC()}}
	update := bson.D{{Key: "$set", Value: set}}
	if replayErr != nil {
		// The cause, as the record has it from the park, where the event
		// failed where the record says (its projection, document, stream
		// and revision); an event parked with no document (its router
		// could not route it) is routed again, and its error names the
		// document it failed in.
		var failed *projector.Error
		if errors.As(replayErr, &failed) && failed.Err != nil && failed.Projection == pe.Projection && failed.Document == pe.Document &&
			failed.Stream == pe.StreamID && failed.Revision == pe.StreamRevision {
			replayErr = failed.Err
		}
		update = bson.D{{Key: "$set", Value: bson.D{{Key: "error", Value: replayErr.Error()}}}, {Key: "$inc", Value: bson.D{{Key: "attempts", Value: 1}}}}
	}
	if _, err := s.db.Collection(ParkedCollection).UpdateOne(ctx, bson.D{{Key: fieldID, Value: id}}, update); err != nil {
		return fmt.Errorf("mongostore: mark %s replayed: %w", id, err)
	}
	return nil
}
