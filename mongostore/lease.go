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

// leaseCollection holds one lease per projection: which process runs it,
// until when, and the fencing token of that holding.
const leaseCollection = "projector_leases"

// Lease is a projection's lease: held by Holder until Expires, unless
// renewed. Token grows with every new holder; a checkpoint written under a
// lease carries it, so that a process that lost its lease cannot move the
// checkpoint any more ([Store.SaveCheckpointUnder]).
type Lease struct {
	Name    string    `bson:"_id"`
	Holder  string    `bson:"holder"`
	Token   int64     `bson:"token"`
	Expires time.Time `bson:"expires"`
}

// Held reports whether the lease is held by someone at now.
func (l Lease) Held(now time.Time) bool { return l.Holder != "" && now.Before(l.Expires) }

var (
	// ErrLeaseHeld: another process holds the lease.
	ErrLeaseHeld = errors.New("the lease is held by another process")
	// ErrLeaseLost: the lease expired and someone else took it, or it was
	// released.
	ErrLeaseLost = errors.New("the lease was lost")
	// ErrFenced: a checkpoint written under a lease token older than the
	// one stored: the writer lost its lease.
	ErrFenced = errors.New("the checkpoint was moved under a newer lease")
)

// AcquireLease takes the lease of name for holder for ttl, if nobody holds
// it (or holder does already): a new holding gets a new token. When another
// process holds it, the error wraps [ErrLeaseHeld] and the lease returned
// says who, and until when. Times are this process's clock: keep the clocks
// of the processes within a fraction of ttl of each other.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error) {
	now := time.Now().UTC()
	coll := s.db.Collection(leaseCollection)
	filter := bson.D{{Key: fieldID, Value: name}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "expires", Value: bson.D{{Key: "$lte", Value: now}}}},
		bson.D{{Key: "holder", Value: holder}},
	}}}
	update := bson.D{
		{Key: "$set", Value: bson.D{{Key: "holder", Value: holder}, {Key: "expires", Value: now.Add(ttl)}}},
		{Key: "$inc", Value: bson.D{{Key: "token", Value: int64(1)}}},
	}
	var l Lease
	err := coll.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&l)
	if mongo.IsDuplicateKeyError(err) {
		// Held by another: the upsert collided with its lease.
		if err := coll.FindOne(ctx, bson.D{{Key: fieldID, Value: name}}).Decode(&l); err != nil {
			return Lease{}, fmt.Errorf("mongostore: lease of %q: %w", name, err)
		}
		return l, fmt.Errorf("%w: %s holds the lease of %q until %s", ErrLeaseHeld, l.Holder, name, l.Expires.Format(time.RFC3339))
	}
	if err != nil {
		return Lease{}, fmt.Errorf("mongostore: lease of %q: %w", name, err)
	}
	return l, nil
}

// RenewLease extends lease l for ttl; the error wraps [ErrLeaseLost] when
// l is no longer its holder's.
func (s *Store) RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	expires := time.Now().UTC().Add(ttl)
	filter := bson.D{{Key: fieldID, Value: l.Name}, {Key: "holder", Value: l.Holder}, {Key: "token", Value: l.Token}}
	res, err := s.db.Collection(leaseCollection).UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "expires", Value: expires}}}})
	if err != nil {
		return l, fmt.Errorf("mongostore: renew the lease of %q: %w", l.Name, err)
	}
	if res.MatchedCount == 0 {
		return l, fmt.Errorf("%w: %q is no longer held by %s under token %d", ErrLeaseLost, l.Name, l.Holder, l.Token)
	}
	l.Expires = expires
	return l, nil
}

// ReleaseLease lets lease l go at once, if it is still its holder's.
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	filter := bson.D{{Key: fieldID, Value: l.Name}, {Key: "holder", Value: l.Holder}, {Key: "token", Value: l.Token}}
	if _, err := s.db.Collection(leaseCollection).UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "expires", Value: time.Now().UTC()}}}}); err != nil {
		return fmt.Errorf("mongostore: release the lease of %q: %w", l.Name, err)
	}
	return nil
}

// Leases returns every lease, by name, held or not.
func (s *Store) Leases(ctx context.Context) (map[string]Lease, error) {
	cur, err := s.db.Collection(leaseCollection).Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("mongostore: read leases: %w", err)
	}
	var all []Lease
	if err := cur.All(ctx, &all); err != nil {
		return nil, fmt.Errorf("mongostore: read leases: %w", err)
	}
	out := make(map[string]Lease, len(all))
	for _, l := range all {
		out[l.Name] = l
	}
	return out, nil
}

// SaveCheckpointUnder is [Store.SaveCheckpoint] fenced by a lease token: the
// checkpoint moves only while no newer token has written it. The error wraps
// [ErrFenced] when one has: the writer lost its lease, and its checkpoint is
// left as the new holder stored it.
func (s *Store) SaveCheckpointUnder(ctx context.Context, name string, c projector.Checkpoint, token int64) error {
	if c.Position > math.MaxInt64 || c.Prepare > math.MaxInt64 {
		return fmt.Errorf("mongostore: checkpoint %q: position %s does not fit a BSON int64", name, c)
	}
	set := checkpointSet(c)
	set = append(set, bson.E{Key: "lease", Value: token})
	filter := bson.D{{Key: fieldID, Value: name}, {Key: "$and", Value: bson.A{
		bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "position", Value: bson.D{{Key: "$lte", Value: int64(c.Position)}}}},
			bson.D{{Key: "position", Value: bson.D{{Key: "$exists", Value: false}}}},
		}}},
		bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "lease", Value: bson.D{{Key: "$lte", Value: token}}}},
			bson.D{{Key: "lease", Value: bson.D{{Key: "$exists", Value: false}}}},
		}}},
	}}}
	coll := s.db.Collection(checkpointCollection)
	_, err := coll.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: set}}, options.UpdateOne().SetUpsert(true))
	if !mongo.IsDuplicateKeyError(err) {
		if err != nil {
			return fmt.Errorf("mongostore: save checkpoint %q: %w", name, err)
		}
		return nil
	}
	// The filter matched nothing: a later checkpoint, or a newer lease.
	var d struct {
		Lease int64 `bson:"lease"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: fieldID, Value: name}}).Decode(&d); err != nil {
		return fmt.Errorf("mongostore: save checkpoint %q: %w", name, err)
	}
	if d.Lease > token {
		return fmt.Errorf("%w: %q is at lease token %d, this writer holds %d", ErrFenced, name, d.Lease, token)
	}
	return nil
}
