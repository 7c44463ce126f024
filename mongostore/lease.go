package mongostore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
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

// ReleaseLease lets lease l go at once, if it is still its holder's: it
// has no holder from then on, so that a renewal of l that reaches the
// server after the release (sent before it, and abandoned) finds it lost
// instead of holding it again for a whole ttl.
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	filter := bson.D{{Key: fieldID, Value: l.Name}, {Key: "holder", Value: l.Holder}, {Key: "token", Value: l.Token}}
	release := bson.D{{Key: "$set", Value: bson.D{{Key: "holder", Value: ""}, {Key: "expires", Value: time.Now().UTC()}}}}
	if _, err := s.db.Collection(leaseCollection).UpdateOne(ctx, filter, release); err != nil {
		return fmt.Errorf("mongostore: release the lease of %q: %w", l.Name, err)
	}
	return nil
}

// Leases returns the leases whose names start with one of prefixes (every
// lease without), by name, held or not: a process that looks often reads
// those of its projection only, not every one ever taken.
func (s *Store) Leases(ctx context.Context, prefixes ...string) (map[string]Lease, error) {
	filter := bson.D{}
	if len(prefixes) > 0 {
		or := bson.A{}
		for _, p := range prefixes {
			or = append(or, bson.D{{Key: fieldID, Value: bson.Regex{Pattern: "^" + regexp.QuoteMeta(p)}}})
		}
		filter = bson.D{{Key: "$or", Value: or}}
	}
	cur, err := s.db.Collection(leaseCollection).Find(ctx, filter)
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

// SaveCheckpointUnder is [Store.SaveCheckpoint] fenced by lease l: the
// checkpoint records the lease and its token, and moves only while no newer
// token of that lease has written it. The error wraps [ErrFenced] when one
// has: the writer lost its lease, and its checkpoint is left as the new
// holder stored it.
//
// events, when not 0, is stored with it as how many events of its
// documents the checkpoint has passed, as the writer counts them (a
// segment of a segmented run counts each event once, whichever process
// applied it: [CheckpointStatus.Events]); 0 leaves the stored count.
//
// A checkpoint another lease wrote is taken over once that lease is not
// held: the checkpoints a rebuild's leases wrote pass to those of the runs
// that go on from them after its switch, and a rebuild process that lost its
// lease cannot write them back once a run has (its lease is held). While the
// other lease is held, the save is refused ([ErrFenced]).
func (s *Store) SaveCheckpointUnder(ctx context.Context, name string, c projector.Checkpoint, l Lease, events uint64) error {
	if c.Position > math.MaxInt64 || c.Prepare > math.MaxInt64 {
		return fmt.Errorf("mongostore: checkpoint %q: position %s does not fit a BSON int64", name, c)
	}
	if events > math.MaxInt64 {
		return fmt.Errorf("mongostore: checkpoint %q: %d events do not fit a BSON int64", name, events)
	}
	set := append(checkpointSet(c), bson.E{Key: "lease", Value: l.Token}, bson.E{Key: "leaseName", Value: l.Name})
	if events > 0 {
		set = append(set, bson.E{Key: "events", Value: int64(events)})
	}
	// No lease's yet, or this lease's under its token or an older one (or
	// a token written before leases were named).
	mine := bson.A{
		bson.D{{Key: "lease", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "leaseName", Value: l.Name}, {Key: "lease", Value: bson.D{{Key: "$lte", Value: l.Token}}}},
		bson.D{{Key: "leaseName", Value: bson.D{{Key: "$exists", Value: false}}}, {Key: "lease", Value: bson.D{{Key: "$lte", Value: l.Token}}}},
	}
	// A takeover that another writer wins makes the checkpoint this lease's
	// (a stale holder's, under an older token) or a third's: look again, a
	// few times.
	for range 3 {
		if took, err := s.saveFenced(ctx, name, c, set, mine); took || err != nil {
			return err
		}
		// The filter matched nothing: a later checkpoint, a newer token,
		// or another lease's checkpoint.
		fence, err := s.fenceOf(ctx, name)
		switch {
		case err != nil:
			return err
		case fence.Name == "" || fence.Name == l.Name:
			if fence.Token > l.Token {
				return fmt.Errorf("%w: %q is at lease token %d, this writer holds %d", ErrFenced, name, fence.Token, l.Token)
			}
			return nil // a later checkpoint: it never moves back
		}
		other, err := s.leaseOf(ctx, fence.Name)
		if err != nil {
			return err
		}
		if other.Held(time.Now()) {
			return fmt.Errorf("%w: %q is written under lease %q, held by %s, not %q", ErrFenced, name, fence.Name, other.Holder, l.Name)
		}
		theirs := bson.A{bson.D{{Key: "leaseName", Value: fence.Name}, {Key: "lease", Value: fence.Token}}}
		if took, err := s.saveFenced(ctx, name, c, set, theirs); took || err != nil {
			return err
		}
		now, err := s.fenceOf(ctx, name)
		if err != nil {
			return err
		}
		if now == fence {
			return nil // a later checkpoint of the lease let go: it never moves back
		}
	}
	return fmt.Errorf("%w: %q keeps changing hands", ErrFenced, name)
}

// fence is the lease a checkpoint was last written under.
type fence struct {
	Name  string `bson:"leaseName"`
	Token int64  `bson:"lease"`
}

// fenceOf returns the lease the checkpoint of name was last written under.
func (s *Store) fenceOf(ctx context.Context, name string) (fence, error) {
	var f fence
	if err := s.db.Collection(checkpointCollection).FindOne(ctx, bson.D{{Key: fieldID, Value: name}}).Decode(&f); err != nil {
		return f, fmt.Errorf("mongostore: save checkpoint %q: %w", name, err)
	}
	return f, nil
}

// leaseOf returns the lease of name (zero when there is none).
func (s *Store) leaseOf(ctx context.Context, name string) (Lease, error) {
	var l Lease
	err := s.db.Collection(leaseCollection).FindOne(ctx, bson.D{{Key: fieldID, Value: name}}).Decode(&l)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return l, fmt.Errorf("mongostore: lease of %q: %w", name, err)
	}
	return l, nil
}

// saveFenced sets the checkpoint of name to set where it is before c (or
// has no position) and matches one of fences, inserting it when there is
// none; took is false when it exists and matches not.
func (s *Store) saveFenced(ctx context.Context, name string, c projector.Checkpoint, set bson.D, fences bson.A) (took bool, err error) {
	filter := bson.D{{Key: fieldID, Value: name}, {Key: "$and", Value: bson.A{
		bson.D{{Key: "$or", Value: notAfter(c)}},
		bson.D{{Key: "$or", Value: fences}},
	}}}
	_, err = s.db.Collection(checkpointCollection).UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: set}}, options.UpdateOne().SetUpsert(true))
	switch {
	case mongo.IsDuplicateKeyError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("mongostore: save checkpoint %q: %w", name, err)
	}
	return true, nil
}
