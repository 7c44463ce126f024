package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/revgate/projector/projector/driver"
)

// fieldMeta holds, in a document kept under a strategy other than the
// revision gate, what the engine knows of the events applied to it.
const fieldMeta = "_meta"

type metaDoc struct {
	Version     int64          `bson:"v"`
	Revisions   revisionsField `bson:"revs,omitempty"` // revisions.go
	Position    int64          `bson:"pos,omitempty"`
	Prepare     int64          `bson:"prep,omitempty"`    // below pos (a legacy TCP transaction's event); none: at pos
	Handled     []byte         `bson:"hids,omitempty"`    // handled.go
	OldForm     []handledDoc   `bson:"handled,omitempty"` // read, not written
	Evicted     int64          `bson:"evicted,omitempty"`
	EvictedPrep int64          `bson:"evp,omitempty"` // the prepare position of evicted, where below it
	Replayed    string         `bson:"replayed,omitempty"`
}

type handledDoc struct {
	ID       string `bson:"id"`
	Position int64  `bson:"pos"`
}

func toMetaDoc(m driver.Meta) metaDoc {
	d := metaDoc{Version: m.Version, Position: int64(m.Position), Prepare: int64(m.Prepare), Evicted: int64(m.Evicted), EvictedPrep: int64(m.EvictedPrepare), Replayed: m.Replayed}
	d.Revisions = m.Revisions
	d.Handled = encodeHandled(m.Handled)
	return d
}

func (d metaDoc) meta() (driver.Meta, error) {
	m := driver.Meta{Version: d.Version, Position: uint64(d.Position), Prepare: uint64(d.Prepare), Evicted: uint64(d.Evicted), EvictedPrepare: uint64(d.EvictedPrep), Replayed: d.Replayed}
	if len(d.Revisions) > 0 {
		m.Revisions = d.Revisions
	}
	for _, h := range d.OldForm {
		m.Handled = append(m.Handled, driver.Handled{ID: h.ID, Position: uint64(h.Position)})
	}
	if len(d.Handled) > 0 {
		var err error
		if m.Handled, err = decodeHandled(d.Handled); err != nil {
			return driver.Meta{}, err
		}
	}
	return m, nil
}

// LoadGuarded implements [driver.GuardedStore].
func (s *Store) LoadGuarded(ctx context.Context, collection, id string, state any) (driver.Meta, bool, error) {
	if err := s.release(ctx, collection, id); err != nil {
		return driver.Meta{}, false, err
	}
	raw, err := s.db.Collection(collection).FindOne(ctx, byID(id)).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return driver.Meta{}, false, nil
	}
	if err != nil {
		return driver.Meta{}, false, fmt.Errorf("mongostore: load %s/%s: %w", collection, id, err)
	}
	meta, err := decodeGuarded(collection, id, raw, state)
	return meta, err == nil, err
}

// decodeGuarded decodes a versioned document's meta, and its state into
// state unless nil.
func decodeGuarded(collection, id string, raw bson.Raw, state any) (driver.Meta, error) {
	var wrap struct {
		Meta metaDoc `bson:"_meta"`
	}
	if err := bson.Unmarshal(raw, &wrap); err != nil {
		return driver.Meta{}, fmt.Errorf("mongostore: %s/%s: %s: %w", collection, id, fieldMeta, err)
	}
	if state != nil {
		if err := decodeState(collection, id, raw, state, false); err != nil {
			return driver.Meta{}, err
		}
	}
	meta, err := wrap.Meta.meta()
	if err != nil {
		return driver.Meta{}, fmt.Errorf("mongostore: %s/%s: %s: %w", collection, id, fieldMeta, err)
	}
	return meta, nil
}

// guardedFields are the engine's fields of a versioned document: its id,
// its meta, and a write token no other write has (see [fieldWrite]).
func guardedFields(id string, meta driver.Meta) []bson.E {
	return []bson.E{{Key: fieldID, Value: id}, {Key: fieldMeta, Value: toMetaDoc(meta)}, {Key: fieldWrite, Value: writeToken()}}
}

// metaVersion is the condition of a write on a versioned document stored
// at version v.
func metaVersion(v int64) cond { return cond{field: fieldMeta + ".v", n: v} }

// PutGuarded implements [driver.GuardedStore]: an insert when expected is
// -1, else a replace conditional on the stored version.
func (s *Store) PutGuarded(ctx context.Context, collection, id string, expected int64, meta driver.Meta, state any) (bool, error) {
	if err := s.release(ctx, collection, id); err != nil {
		return false, err
	}
	s.cacheDrop(collection, id)
	doc, err := s.encodeFor(ctx, state, guardedFields(id, meta)...)
	if err != nil {
		return false, err
	}
	coll := s.db.Collection(collection)
	if expected < 0 {
		_, err := coll.InsertOne(ctx, doc)
		if mongo.IsDuplicateKeyError(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("mongostore: insert %s/%s: %w", collection, id, refusal(err))
		}
		return true, nil
	}
	written, err := s.replaceIf(ctx, coll, id, metaVersion(expected), doc)
	s.cacheDrop(collection, id) // again: a batch may have read it meanwhile
	if err != nil {
		return false, fmt.Errorf("mongostore: update %s/%s: %w", collection, id, err)
	}
	return written, nil
}

// LoadGuardedMany implements [driver.GuardedBatchStore]: the documents in
// the store's cache from there (marked Cached), the others with one query
// (on FerretDB, one per id, a few at a time). A document that does not
// decode is left out.
func (s *Store) LoadGuardedMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]driver.Guarded, error) {
	if s.holdsBack(ctx) {
		return s.keptOrFound(ctx, collection, ids, newState)
	}
	return cachedOrFound(ctx, s, collection, ids, func(id string, raw bson.Raw, cached *driver.Head) (driver.Guarded, driver.Head, bool, error) {
		state := newState()
		meta, err := decodeGuarded(collection, id, raw, state)
		// One that does not decode is left out: a batch's write of it then
		// misses, and its events go one at a time, where reading it says
		// what is wrong. The batch's other documents stay batched.
		return driver.Guarded{Meta: meta, State: state, Cached: cached != nil}, driver.Head{}, err != nil, nil
	})
}

// PutGuardedMany implements [driver.GuardedBatchStore]: unordered bulk
// inserts and replaces conditional on the stored version, in chunks. A put
// whose state the store cannot encode (driver.ErrUnencodable) is not sent,
// and not ok.
func (s *Store) PutGuardedMany(ctx context.Context, collection string, puts []driver.Put) ([]bool, error) {
	if s.holdsBack(ctx) {
		return s.holdPuts(ctx, collection, puts)
	}
	return s.putNow(ctx, collection, puts)
}

// putNow writes puts, as PutGuardedMany does without holding back.
func (s *Store) putNow(ctx context.Context, collection string, puts []driver.Put) ([]bool, error) {
	ids := make([]string, len(puts))
	for i, p := range puts {
		ids[i] = p.ID
	}
	if err := s.release(ctx, collection, ids...); err != nil {
		return nil, err
	}
	docs := make([]bson.Raw, len(puts))
	from := make([]int64, len(puts))
	for i, p := range puts {
		s.cacheDrop(collection, p.ID)
		d, err := s.encodeFor(ctx, p.State, guardedFields(p.ID, p.Meta)...)
		if err != nil && !errors.Is(err, driver.ErrUnencodable) {
			return nil, err
		}
		docs[i], from[i] = d, p.Expected
	}
	ok, err := s.putVersioned(ctx, s.db.Collection(collection), ids, docs, from)
	if err != nil {
		return nil, err
	}
	for i, p := range puts {
		if ok[i] {
			s.cachePut(collection, p.ID, driver.Head{}, docs[i])
		}
	}
	return ok, nil
}

// putVersioned writes docs[i], document ids[i] (nil: not sent), as an
// insert where from[i] is below 0, else as a replace conditional on the
// stored version from[i]: unordered, in chunks. ok[i] reports whether
// docs[i] took.
func (s *Store) putVersioned(ctx context.Context, coll *mongo.Collection, ids []string, docs []bson.Raw, from []int64) ([]bool, error) {
	ok := make([]bool, len(docs))
	var inserts, replaced []int
	var reps []replacement
	for i, doc := range docs {
		switch {
		case doc == nil:
		case from[i] < 0:
			inserts = append(inserts, i)
		default:
			reps = append(reps, replacement{id: ids[i], c: metaVersion(from[i]), doc: doc})
			replaced = append(replaced, i)
		}
	}
	if err := s.insertMany(ctx, coll, docs, inserts, ok); err != nil {
		return nil, fmt.Errorf("mongostore: insert into %s: %w", coll.Name(), err)
	}
	if len(reps) > 0 {
		took, err := s.replaceMany(ctx, coll, reps)
		if err != nil {
			return nil, err
		}
		for j, i := range replaced {
			ok[i] = took[j]
		}
	}
	return ok, nil
}

// Transactions implements [driver.InboxStore].
func (s *Store) Transactions(ctx context.Context) (bool, error) {
	c, err := s.Capabilities(ctx)
	return c.Transactions, err
}

// inboxCollection returns the inbox collection of projection.
func inboxCollection(projection string) string { return "projector_inbox_" + projection }

// EnsureInbox implements [driver.InboxStore]: the inbox collection with a
// TTL index that removes records after retention.
func (s *Store) EnsureInbox(ctx context.Context, projection string, retention time.Duration) error {
	model := mongo.IndexModel{
		Keys:    bson.D{{Key: "at", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(int32(retention / time.Second)),
	}
	if _, err := s.db.Collection(inboxCollection(projection)).Indexes().CreateOne(ctx, model); err != nil {
		return fmt.Errorf("mongostore: inbox of %q: %w", projection, err)
	}
	return nil
}

// Receive implements [driver.InboxStore]. It looks for the record before
// inserting it: inside a transaction, a failed insert (a duplicate key) would
// abort the transaction. Two deliveries racing past the look both insert; the
// loser's transaction fails and is retried, and then finds the record.
func (s *Store) Receive(ctx context.Context, projection, eventID string) error {
	coll := s.db.Collection(inboxCollection(projection))
	err := coll.FindOne(ctx, bson.D{{Key: fieldID, Value: eventID}}).Err()
	if err == nil {
		return driver.ErrDuplicate
	}
	if !errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("mongostore: inbox of %q: %w", projection, err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: fieldID, Value: eventID}, {Key: "at", Value: time.Now().UTC()}})
	if err != nil {
		return fmt.Errorf("mongostore: inbox of %q: %w", projection, err)
	}
	return nil
}

// InTransaction implements [driver.InboxStore] with a session's
// transaction (retried by the driver on transient errors).
func (s *Store) InTransaction(ctx context.Context, fn func(ctx context.Context) error) error {
	sess, err := s.db.Client().StartSession()
	if err != nil {
		return fmt.Errorf("mongostore: session: %w", err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) { return nil, fn(ctx) })
	return err
}
