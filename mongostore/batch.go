package mongostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/revgate/projector/projector/driver"
)

// bulkLimits is how the store splits a batch's reads and writes for the
// server it talks to.
type bulkLimits struct {
	inserts, replaces int // writes per command
	// byID reads a batch's documents one _id at a time, a few at once,
	// instead of with one $in query.
	byID bool
}

var (
	// MongoDB takes a batch in one command of each kind, and finds by $in
	// through the _id index.
	mongoBulk = bulkLimits{inserts: 1000, replaces: 1000}
	// FerretDB 1.24 holds a PostgreSQL connection for each statement of an
	// update command until the command ends (it hangs past about 95 of them,
	// and opening the connections costs more than the writes), and it does
	// not push $in down to PostgreSQL: a $in query reads the whole
	// collection, while a query on one _id uses its index.
	ferretBulk = bulkLimits{inserts: 50, replaces: 10, byID: true}
)

// byIDReaders is how many documents a byID read fetches at once.
const byIDReaders = 8

// bulkLimits returns the limits for the store's server, asking it once. If
// the server does not answer, it returns FerretDB's, which work on both, and
// asks again after a minute.
func (s *Store) bulkLimits(ctx context.Context) bulkLimits {
	s.bulkMu.Lock()
	known, retry := s.bulk, s.bulkRetry
	s.bulkMu.Unlock()
	if known != nil {
		return *known
	}
	if time.Now().Before(retry) {
		return ferretBulk
	}
	caps, err := s.Capabilities(ctx)
	s.bulkMu.Lock()
	defer s.bulkMu.Unlock()
	if err != nil {
		s.bulkRetry = time.Now().Add(time.Minute)
		return ferretBulk
	}
	l := mongoBulk
	if strings.HasPrefix(caps.Server, "FerretDB") {
		l = ferretBulk
	}
	s.bulk = &l
	return l
}

// LoadMany implements [driver.BatchStore]: the documents in the store's
// cache from there (marked Cached), the others with one query (on FerretDB,
// one per id, a few at a time).
func (s *Store) LoadMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]driver.Loaded, error) {
	out := make(map[string]driver.Loaded, len(ids))
	missing := ids[:0:0]
	for _, id := range ids {
		c, ok := s.cacheGet(collection, id)
		if !ok {
			missing = append(missing, id)
			continue
		}
		state := newState()
		if err := bson.Unmarshal(c.raw, state); err != nil {
			s.cacheDrop(collection, id)
			missing = append(missing, id)
			continue
		}
		out[id] = driver.Loaded{Revision: c.head.Revision, Stream: c.head.Stream, State: state, Cached: true}
	}
	ids = missing
	if len(ids) == 0 {
		return out, nil
	}
	if !s.bulkLimits(ctx).byID {
		for chunk := range slices.Chunk(ids, 1000) {
			if err := s.find(ctx, collection, bson.D{{Key: FieldID, Value: bson.D{{Key: "$in", Value: chunk}}}}, newState, out); err != nil {
				return nil, fmt.Errorf("mongostore: load %d documents of %s: %w", len(chunk), collection, err)
			}
		}
		return out, nil
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(byIDReaders)
	for _, id := range ids {
		g.Go(func() error {
			one := map[string]driver.Loaded{}
			if err := s.find(gctx, collection, bson.D{{Key: FieldID, Value: id}}, newState, one); err != nil {
				return fmt.Errorf("mongostore: load %s/%s: %w", collection, id, err)
			}
			mu.Lock()
			maps.Copy(out, one)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// find adds the documents filter selects to out, by id.
func (s *Store) find(ctx context.Context, collection string, filter bson.D, newState func() any, out map[string]driver.Loaded) error {
	cur, err := s.db.Collection(collection).Find(ctx, filter)
	if err != nil {
		return err
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		id, ok := cur.Current.Lookup(FieldID).StringValueOK()
		if !ok {
			continue
		}
		head, err := headOf(cur.Current)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		state := newState()
		if err := bson.Unmarshal(cur.Current, state); err != nil {
			return fmt.Errorf("decode %s into %T: %w", id, state, err)
		}
		out[id] = driver.Loaded{Revision: head.Revision, Stream: head.Stream, State: state}
		s.cachePut(collection, id, head, slices.Clone(cur.Current))
	}
	return cur.Err()
}

// WriteMany implements [driver.BatchStore]: unordered bulk inserts and
// replaces filtered on the revision each write starts from, in chunks; ok[i]
// reports whether writes[i] took effect.
func (s *Store) WriteMany(ctx context.Context, collection string, writes []driver.Write) ([]bool, error) {
	limits := s.bulkLimits(ctx)
	b := bulk{s: s, coll: s.db.Collection(collection), writes: writes, ok: make([]bool, len(writes)), sure: make([]bool, len(writes))}
	// What the cache holds of these documents is about to be out of date;
	// what is written goes into it once the write is known to have taken.
	b.docs = make([]bson.Raw, len(writes))
	for i, w := range writes {
		s.cacheDrop(collection, w.ID)
		d, err := rawDocument(w.ID, driver.Head{Revision: w.Revision, Stream: w.Stream}, w.State)
		if err != nil {
			return nil, err
		}
		b.docs[i] = d
	}
	defer b.cache(collection)
	var inserts, replaces []int
	for i, w := range writes {
		if w.Insert {
			inserts = append(inserts, i)
		} else {
			replaces = append(replaces, i)
		}
	}
	for chunk := range slices.Chunk(inserts, limits.inserts) {
		if err := b.insert(ctx, chunk); err != nil {
			clear(b.ok)
			return nil, fmt.Errorf("mongostore: insert %d documents into %s: %w", len(chunk), collection, err)
		}
	}
	for chunk := range slices.Chunk(replaces, limits.replaces) {
		if err := b.replace(ctx, collection, chunk); err != nil {
			clear(b.ok)
			return nil, err
		}
	}
	return b.ok, nil
}

// bulk is one WriteMany: its writes, their documents, and what took.
type bulk struct {
	s      *Store
	coll   *mongo.Collection
	writes []driver.Write
	docs   []bson.Raw
	// ok[i]: writes[i] took effect; sure[i]: and what the server holds is
	// docs[i] (for the cache).
	ok, sure []bool
}

// tokenOf returns the write token of an encoded document.
func tokenOf(doc bson.Raw) string {
	s, _ := doc.Lookup(FieldWrite).StringValueOK()
	return s
}

// cache puts what the server surely took in the store's cache, and drops
// the rest.
func (b *bulk) cache(collection string) {
	for i, w := range b.writes {
		if !b.ok[i] || !b.sure[i] {
			b.s.cacheDrop(collection, w.ID)
		} else {
			b.s.cachePut(collection, w.ID, driver.Head{Revision: w.Revision, Stream: w.Stream}, b.docs[i])
		}
	}
}

// insert inserts the documents of chunk, unordered: those that exist
// already are not ok.
func (b *bulk) insert(ctx context.Context, chunk []int) error {
	docs := make([]any, len(chunk))
	for j, i := range chunk {
		docs[j] = b.docs[i]
		b.ok[i], b.sure[i] = true, true
	}
	_, err := b.coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	var bw mongo.BulkWriteException
	switch {
	case err == nil:
	case errors.As(err, &bw) && bw.WriteConcernError == nil:
		for _, we := range bw.WriteErrors {
			if we.Index >= 0 && we.Index < len(chunk) {
				b.ok[chunk[we.Index]] = false
			}
		}
	default:
		return err
	}
	return nil
}

// replace replaces the documents of chunk, each filtered on the revision it
// starts from; when some filters match nothing, a re-read of the revisions
// says which writes took.
func (b *bulk) replace(ctx context.Context, collection string, chunk []int) error {
	models := make([]mongo.WriteModel, len(chunk))
	for j, i := range chunk {
		w := b.writes[i]
		models[j] = mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: FieldID, Value: w.ID}, {Key: FieldRevision, Value: int64(w.From)}}).SetReplacement(b.docs[i])
	}
	res, err := b.coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	if err != nil {
		return fmt.Errorf("mongostore: write %d documents of %s: %w", len(chunk), collection, err)
	}
	if int(res.MatchedCount) == len(chunk) {
		for _, i := range chunk {
			b.ok[i], b.sure[i] = true, true
		}
		return nil
	}
	ids := make([]string, len(chunk))
	for j, i := range chunk {
		ids[j] = b.writes[i].ID
	}
	now, err := b.s.LoadMany(ctx, collection, ids, func() any { return new(bson.Raw) })
	if err != nil {
		return err
	}
	// A write took if the document holds its token: another writer at the
	// same revision has another.
	for _, i := range chunk {
		raw, found := now[b.writes[i].ID].State.(*bson.Raw)
		if !found || raw == nil {
			continue
		}
		theirs, _ := raw.Lookup(FieldWrite).StringValueOK()
		b.ok[i] = theirs == tokenOf(b.docs[i])
	}
	return nil
}
