// Package mongostore keeps projection documents in MongoDB (or any server that
// speaks its wire protocol) for the projector engine, through
// go.mongodb.org/mongo-driver/v2.
//
// A document is the projection's state, encoded with the driver's BSON codec,
// plus fields the engine owns: _id (the document id), and revision (the
// stream revision of the last event applied) with _stream (the stream that
// feeds it), or _meta under the strategies other than the revision gate,
// and _write (a token of the write). A
// state type must therefore not have fields encoded as those. Readers decode
// the documents into their own types.
//
// Every write the gate makes is conditional and touches one document, so no
// transaction is needed: the store works on a standalone server, a replica
// set, a sharded cluster keyed by _id, and FerretDB.
//
// # What the engine uses, and what operators use
//
// A [Store] is the engine's document store, the interfaces of package
// projector/driver: Load, Insert, Update and EnsureIndexes ([driver.Store],
// store.go); LoadMany and WriteMany ([driver.BatchStore], batch.go, with the
// document cache of cache.go); LoadGuarded, PutGuarded, LoadGuardedMany,
// PutGuardedMany and the inbox ([driver.GuardedBatchStore] and
// [driver.InboxStore], guarded.go, with the window of handled ids of
// handled.go). Every read or write conditional on what a document holds
// goes through conditional.go, which says how the condition reaches each
// server. The rest is what a runner and an
// operator use beside the engine: checkpoints ([projector.CheckpointStore],
// checkpoint.go), parked events ([projector.Parker], parked.go), the
// collection a rebuild switches readers to (collections.go), and what the
// server can do (capabilities.go).
//
// # The collections it keeps beside the read models
//
// projector_checkpoints (a runner's position, one document per
// subscription), projector_parked ([ParkedCollection]: the events set aside
// under the park and hold policies), projector_collections (the collection
// each projection's readers use, switched by a rebuild), projector_leases
// (which process runs each projection) and projector_inbox_<projection> (the
// inbox strategy's handled events).
package mongostore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// Field names the engine owns in every document.
const (
	fieldID       = "_id"
	FieldRevision = "revision"
	// fieldStream holds the stream that feeds a document under the revision
	// gate: an event of another stream is refused, not counted a duplicate.
	fieldStream = "_stream"
	// fieldWrite holds a token only the write that set it knows: when a
	// bulk write's replace seems to miss, the store reads it back to tell its
	// own write from another writer's at the same revision.
	fieldWrite = "_write"
	// FieldDeleted is true on a document whose stream was deleted, kept for
	// its readers (the projection's [projector.MarkDeleted] policy).
	FieldDeleted = "_deleted"
)

// Store keeps projection documents in one database.
type Store struct {
	db     *mongo.Database
	client *mongo.Client // set when the store opened it and must close it

	cache  *lru.Cache[cacheKey, cached] // documents batches read or wrote; nil: none
	behind *behindSet                   // documents whose writes are held back (behind.go); nil: none

	bulkMu    sync.Mutex
	bulk      *bulkLimits // how to split batches for this server, once known
	bulkRetry time.Time   // after a failed ask, when to ask again
}

// What the engine and a runner use of a Store.
var (
	_ driver.Store              = (*Store)(nil)
	_ driver.BatchStore         = (*Store)(nil)
	_ driver.InboxStore         = (*Store)(nil)
	_ projector.CheckpointStore = (*Store)(nil)
	_ projector.ErrorRecorder   = (*Store)(nil)
	_ projector.Parker          = (*Store)(nil)
	_ projector.HoldPreparer    = (*Store)(nil)
)

// New returns a store on db. Closing the store leaves db's client open: it is
// the caller's.
func New(db *mongo.Database, opts ...Option) *Store {
	s := &Store{db: db}
	WithDocumentCache(defaultDocumentCache)(s)
	for _, o := range opts {
		o(s)
	}
	return s
}

// Database returns the database the store writes to.
func (s *Store) Database() *mongo.Database { return s.db }

// Close disconnects the client if the store opened it ([Open]); otherwise it
// does nothing.
func (s *Store) Close(ctx context.Context) error {
	if s.client == nil {
		return nil
	}
	return s.client.Disconnect(ctx)
}

// Load implements [driver.Store].
func (s *Store) Load(ctx context.Context, collection, id string, minRevision uint64, state any) (driver.Head, bool, error) {
	if err := s.release(ctx, collection, id); err != nil {
		return driver.Head{}, false, err
	}
	opts := options.FindOne()
	if state == nil {
		opts.SetProjection(bson.D{{Key: FieldRevision, Value: 1}, {Key: fieldStream, Value: 1}, {Key: FieldDeleted, Value: 1}, {Key: fieldWrite, Value: 1}})
	}
	raw, found, err := s.findIf(ctx, s.db.Collection(collection), id, cond{field: FieldRevision, n: int64(minRevision), atLeast: true}, opts)
	if err != nil {
		return driver.Head{}, false, fmt.Errorf("mongostore: load %s/%s: %w", collection, id, err)
	}
	if !found {
		return driver.Head{}, false, nil
	}
	head, err := headOf(raw)
	if err != nil {
		return driver.Head{}, false, fmt.Errorf("mongostore: load %s/%s: %w", collection, id, err)
	}
	if state != nil {
		if err := decodeState(collection, id, raw, state, true); err != nil {
			return driver.Head{}, false, err
		}
	}
	return head, true, nil
}

// undecodable is the error of a stored document that does not decode into
// state: reading it again gives the same (retry.Permanent), so the engine
// fails the event at once, under its policy, instead of waiting for it as
// for a server that does not answer. Its projection's state type changed
// in a way the stored documents do not fit: rebuild it.
func undecodable(collection, id string, state any, err error) error {
	return retry.Permanent(fmt.Errorf("mongostore: decode %s/%s into %T (a state type changed in a way the stored document does not fit? "+
		"rebuild the projection): %w", collection, id, state, err))
}

// Insert implements [driver.Store].
func (s *Store) Insert(ctx context.Context, collection, id string, head driver.Head, state any) error {
	if err := s.release(ctx, collection, id); err != nil {
		return err
	}
	s.cacheDrop(collection, id)
	doc, err := s.encodeFor(ctx, state, ownFields(id, head)...)
	if err != nil {
		return err
	}
	_, err = s.db.Collection(collection).InsertOne(ctx, doc)
	s.cacheDrop(collection, id) // again: a batch may have read it meanwhile
	if mongo.IsDuplicateKeyError(err) {
		return driver.ErrDuplicate
	}
	if err != nil {
		return fmt.Errorf("mongostore: insert %s/%s: %w", collection, id, refusal(err))
	}
	return nil
}

// Update implements [driver.Store]. It replaces the whole document, so that
// fields the new state leaves out do not linger, and reports a match, not a
// modification: an event that changes nothing but the revision still counts.
func (s *Store) Update(ctx context.Context, collection, id string, from uint64, head driver.Head, state any) (bool, error) {
	if err := s.release(ctx, collection, id); err != nil {
		return false, err
	}
	s.cacheDrop(collection, id)
	doc, err := s.encodeFor(ctx, state, ownFields(id, head)...)
	if err != nil {
		return false, err
	}
	matched, err := s.replaceIf(ctx, s.db.Collection(collection), id, cond{field: FieldRevision, n: int64(from)}, doc)
	s.cacheDrop(collection, id) // again: a batch may have read it meanwhile
	if err != nil {
		return false, fmt.Errorf("mongostore: update %s/%s: %w", collection, id, err)
	}
	return matched, nil
}

// Delete implements [driver.Store].
func (s *Store) Delete(ctx context.Context, collection, id string, from uint64) (bool, error) {
	if err := s.release(ctx, collection, id); err != nil {
		return false, err
	}
	s.cacheDrop(collection, id)
	deleted, err := s.deleteIf(ctx, s.db.Collection(collection), id, cond{field: FieldRevision, n: int64(from)})
	s.cacheDrop(collection, id)
	if err != nil {
		return false, fmt.Errorf("mongostore: delete %s/%s: %w", collection, id, err)
	}
	return deleted, nil
}

// EnsureIndexes implements [driver.Store]. It creates one index per
// command: FerretDB 1.24 drops the connection when one createIndexes command
// names several indexes that exist already.
func (s *Store) EnsureIndexes(ctx context.Context, collection string, indexes []projector.Index) error {
	for _, idx := range indexes {
		keys := bson.D{}
		for _, k := range idx.Keys {
			if name, desc := strings.CutPrefix(k, "-"); desc {
				keys = append(keys, bson.E{Key: name, Value: -1})
			} else {
				keys = append(keys, bson.E{Key: k, Value: 1})
			}
		}
		model := mongo.IndexModel{Keys: keys, Options: options.Index().SetUnique(idx.Unique)}
		if _, err := s.db.Collection(collection).Indexes().CreateOne(ctx, model); err != nil {
			return fmt.Errorf("mongostore: create index %v on %s: %w", idx.Keys, collection, err)
		}
	}
	return nil
}

// encodeFor encodes state with owned, the engine's fields, in front, as
// bytes, which every write sends (and the store's cache keeps), encoded
// once (encode), for the store's server: where it is one that drops the
// connection at a NaN (bulkLimits.noNaN), a state with one is refused
// with driver.ErrUnencodable before it is sent, so that it costs its event
// only: a dropped connection is an outage, which stops the run.
func (s *Store) encodeFor(ctx context.Context, state any, owned ...bson.E) (bson.Raw, error) {
	doc, err := encode(state, owned...)
	if err != nil || !s.bulkLimits(ctx).noNaN {
		return doc, err
	}
	if path, ok := nanIn(doc); ok {
		return nil, fmt.Errorf("mongostore: encode %T: %s is NaN, which the server (FerretDB) does not store: %w", state, path, driver.ErrUnencodable)
	}
	return doc, nil
}

// nanIn returns the path, within doc, of its first NaN. It builds the
// path only of a NaN found.
func nanIn(doc bson.Raw) (string, bool) {
	elems, err := doc.Elements()
	if err != nil {
		return "", false
	}
	for _, e := range elems {
		v := e.Value()
		var inner bson.Raw
		switch v.Type {
		case bson.TypeDouble:
			if math.IsNaN(v.Double()) {
				return e.Key(), true
			}
			continue
		case bson.TypeEmbeddedDocument:
			inner = v.Document()
		case bson.TypeArray:
			inner = bson.Raw(v.Array())
		default:
			continue
		}
		if p, ok := nanIn(inner); ok {
			return e.Key() + "." + p, true
		}
	}
	return "", false
}

// ownFields are the engine's fields of a gated document.
func ownFields(id string, head driver.Head) []bson.E {
	owned := []bson.E{{Key: fieldID, Value: id}, {Key: FieldRevision, Value: int64(head.Revision)},
		{Key: fieldStream, Value: head.Stream}, {Key: fieldWrite, Value: cmp.Or(head.Write, writeToken())}}
	if head.Deleted {
		owned = append(owned, bson.E{Key: FieldDeleted, Value: true})
	}
	return owned
}

// writeToken returns a token no other write has: 96 random bits.
func writeToken() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// maxDocumentBytes is the largest document MongoDB stores (its
// maxBsonObjectSize), which the store holds every server to.
const maxDocumentBytes = 16 << 20

// encode encodes state with owned, the engine's fields, in front, as
// bytes. A state that does not encode, encodes a field of the same name or
// makes a document larger than maxDocumentBytes is refused with
// driver.ErrUnencodable. Every document the store writes is encoded here.
func encode(state any, owned ...bson.E) (bson.Raw, error) {
	raw, err := stateElements(state, owned)
	if err != nil {
		return nil, err
	}
	head, err := bson.Marshal(bson.D(owned))
	if err != nil {
		return nil, fmt.Errorf("mongostore: encode %T: %w", state, err)
	}
	if err := fits(state, len(head)+len(raw)); err != nil {
		return nil, err
	}
	// A document is its length, its elements and a 0: owned's elements,
	// then the state's (with its 0).
	out := make([]byte, 4, len(head)+len(raw)-5)
	out = append(out, head[4:len(head)-1]...)
	out = append(out, raw[4:]...)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out, nil
}

// stateElements encodes state, and refuses (driver.ErrUnencodable) one that
// does not encode, its encoder panicking included, or encodes a field of
// owned.
func stateElements(state any, owned []bson.E) (bson.Raw, error) {
	raw, err := marshal(state)
	if err != nil {
		return nil, fmt.Errorf("mongostore: encode %T: %w: %w", state, driver.ErrUnencodable, err)
	}
	elems, err := bson.Raw(raw).Elements()
	if err != nil {
		return nil, fmt.Errorf("mongostore: encode %T: %w: %w", state, driver.ErrUnencodable, err)
	}
	for _, el := range elems {
		key := el.Key()
		if slices.ContainsFunc(owned, func(o bson.E) bool { return o.Key == key }) {
			return nil, fmt.Errorf("mongostore: %T encodes %s, a field the engine owns: %w", state, key, driver.ErrUnencodable)
		}
	}
	return raw, nil
}

// marshal is bson.Marshal, with a panic of the state's own encoding methods
// an error of this state's, not of the process.
func marshal(state any) (raw []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			raw, err = nil, fmt.Errorf("panicked: %v", r)
		}
	}()
	return bson.Marshal(state)
}

// fits refuses (driver.ErrUnencodable) a document of state of n bytes that
// MongoDB would not store.
func fits(state any, n int) error {
	if n > maxDocumentBytes {
		return fmt.Errorf("mongostore: encode %T: %d bytes, more than the %d a document may have: %w", state, n, maxDocumentBytes, driver.ErrUnencodable)
	}
	return nil
}

// headOf reads the head of a gated document.
func headOf(raw bson.Raw) (driver.Head, error) {
	rev, err := revisionOf(raw)
	if err != nil {
		return driver.Head{}, err
	}
	stream, _ := raw.Lookup(fieldStream).StringValueOK()
	deleted, _ := raw.Lookup(FieldDeleted).BooleanOK()
	write, _ := raw.Lookup(fieldWrite).StringValueOK()
	return driver.Head{Revision: rev, Stream: stream, Deleted: deleted, Write: write}, nil
}

func revisionOf(raw bson.Raw) (uint64, error) {
	v, err := raw.LookupErr(FieldRevision)
	if err != nil {
		return 0, fmt.Errorf("document has no %s field", FieldRevision)
	}
	n, ok := v.AsInt64OK()
	if !ok || n < 0 {
		return 0, fmt.Errorf("document's %s is %v, want a non-negative integer", FieldRevision, v)
	}
	return uint64(n), nil
}
