package mongostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/revgate/projector/projector/driver"
)

// bulkLimits is how the store splits a batch's reads and writes for the
// server it talks to, and what it must not send it.
type bulkLimits struct {
	inserts, replaces int // writes per command
	// byID: the server finds a document by its index only with a filter on
	// _id alone. The store reads a batch's documents one _id at a time, a
	// few at once, instead of with one $in query, and checks the conditions
	// of its reads and writes itself (conditional.go).
	byID bool
	// noNaN: the server drops the connection at a document with a NaN
	// (FerretDB 1.24, whose documents hold no NaN or infinity: it refuses
	// an infinity with a write error), so the store refuses such a state
	// itself (encodeFor).
	noNaN bool
}

var (
	// MongoDB takes a batch in one command of each kind, and finds by $in
	// through the _id index.
	mongoBulk = bulkLimits{inserts: 1000, replaces: 1000}
	// FerretDB 1.24 holds a PostgreSQL connection for each statement of an
	// update command until the command ends (it hangs past about 95 of them,
	// and opening the connections costs more than the writes), and it does
	// not push $in down to PostgreSQL: a $in query reads the whole
	// collection, while a query on one _id uses its index. Its SQLite
	// backend pushes down no filter but {_id} (conditional.go).
	ferretBulk = bulkLimits{inserts: 50, replaces: 10, byID: true, noNaN: true}
	// unknownBulk are the limits while the server has not said what it is:
	// FerretDB's, which work on both, but with a NaN sent (were it refused,
	// a server that does not answer for a while would cost the event).
	unknownBulk = bulkLimits{inserts: 50, replaces: 10, byID: true}
)

// byIDReaders is how many documents a byID read fetches at once.
const byIDReaders = 8

// bulkLimits returns the limits for the store's server, asking it once. If
// the server does not answer, it returns unknownBulk, and asks again after
// a minute.
func (s *Store) bulkLimits(ctx context.Context) bulkLimits {
	s.bulkMu.Lock()
	known, retry := s.bulk, s.bulkRetry
	s.bulkMu.Unlock()
	if known != nil {
		return *known
	}
	if time.Now().Before(retry) {
		return unknownBulk
	}
	caps, err := s.Capabilities(ctx)
	s.bulkMu.Lock()
	defer s.bulkMu.Unlock()
	if err != nil {
		s.bulkRetry = time.Now().Add(time.Minute)
		return unknownBulk
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
	return cachedOrFound(ctx, s, collection, ids, func(id string, raw bson.Raw, cached *driver.Head) (driver.Loaded, driver.Head, bool, error) {
		var head driver.Head
		if cached != nil {
			head = *cached
		} else {
			var err error
			if head, err = headOf(raw); err != nil {
				return driver.Loaded{}, head, false, fmt.Errorf("mongostore: load %s/%s: %w", collection, id, err)
			}
		}
		state := newState()
		if err := decodeState(collection, id, raw, state, true); err != nil {
			return driver.Loaded{}, head, false, err
		}
		return driver.Loaded{Revision: head.Revision, Stream: head.Stream, State: state, Cached: cached != nil}, head, false, nil
	})
}

// WriteMany implements [driver.BatchStore]: unordered bulk inserts and
// replaces filtered on the revision each write starts from, in chunks; ok[i]
// reports whether writes[i] took effect. A write whose state the store
// cannot encode (driver.ErrUnencodable) is not sent, and not ok.
func (s *Store) WriteMany(ctx context.Context, collection string, writes []driver.Write) ([]bool, error) {
	if err := s.release(ctx, collection, writeIDs(writes)...); err != nil {
		return nil, err
	}
	b := bulk{s: s, coll: s.db.Collection(collection), writes: writes, ok: make([]bool, len(writes))}
	// What the cache holds of these documents is about to be out of date;
	// what is written goes into it once the write is known to have taken.
	b.docs = make([]bson.Raw, len(writes))
	for i, w := range writes {
		s.cacheDrop(collection, w.ID)
		d, err := s.encodeFor(ctx, w.State, ownFields(w.ID, driver.Head{Revision: w.Revision, Stream: w.Stream})...)
		if err != nil && !errors.Is(err, driver.ErrUnencodable) {
			return nil, err
		}
		b.docs[i] = d
	}
	defer b.cache(collection)
	var inserts, replaces []int
	for i, w := range writes {
		switch {
		case b.docs[i] == nil:
		case w.Insert:
			inserts = append(inserts, i)
		default:
			replaces = append(replaces, i)
		}
	}
	if len(inserts) > 0 {
		if err := b.insert(ctx, inserts); err != nil {
			clear(b.ok)
			return nil, fmt.Errorf("mongostore: insert %d documents into %s: %w", len(inserts), collection, err)
		}
	}
	if len(replaces) > 0 {
		if err := b.replace(ctx, replaces); err != nil {
			clear(b.ok)
			return nil, err
		}
	}
	return b.ok, nil
}

// writeIDs returns the ids of writes.
func writeIDs(writes []driver.Write) []string {
	ids := make([]string, len(writes))
	for i, w := range writes {
		ids[i] = w.ID
	}
	return ids
}

// bulk is one WriteMany: its writes, their documents, and what took.
type bulk struct {
	s      *Store
	coll   *mongo.Collection
	writes []driver.Write
	docs   []bson.Raw
	// ok[i]: writes[i] took effect, and the server holds docs[i] (for the
	// cache).
	ok []bool
}

// tokenOf returns the write token of an encoded document.
func tokenOf(doc bson.Raw) string {
	s, _ := doc.Lookup(fieldWrite).StringValueOK()
	return s
}

// cache puts what the server surely took in the store's cache, and drops
// the rest.
func (b *bulk) cache(collection string) {
	for i, w := range b.writes {
		if !b.ok[i] {
			b.s.cacheDrop(collection, w.ID)
		} else {
			b.s.cachePut(collection, w.ID, driver.Head{Revision: w.Revision, Stream: w.Stream}, b.docs[i])
		}
	}
}

// insert inserts the documents of chunk, unordered: those that exist
// already are not ok.
func (b *bulk) insert(ctx context.Context, chunk []int) error {
	return b.s.insertMany(ctx, b.coll, b.docs, chunk, b.ok)
}

// insertMany inserts docs[i] for each i of which, unordered, in commands
// of the store's size, and sets ok[i] for those that took (a document with
// the same _id makes one not take).
func (s *Store) insertMany(ctx context.Context, coll *mongo.Collection, docs []bson.Raw, which []int, ok []bool) error {
	for chunk := range slices.Chunk(which, s.bulkLimits(ctx).inserts) {
		batch := make([]any, len(chunk))
		for j, i := range chunk {
			batch[j] = docs[i]
			ok[i] = true
		}
		_, err := coll.InsertMany(ctx, batch, options.InsertMany().SetOrdered(false))
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
			for _, i := range chunk {
				ok[i] = false
			}
			return err
		}
	}
	return nil
}

// replace replaces the documents of chunk, each conditional on the
// revision it starts from.
func (b *bulk) replace(ctx context.Context, chunk []int) error {
	reps := make([]replacement, len(chunk))
	for j, i := range chunk {
		reps[j] = replacement{id: b.writes[i].ID, c: cond{field: FieldRevision, n: int64(b.writes[i].From)}, doc: b.docs[i]}
	}
	ok, err := b.s.replaceMany(ctx, b.coll, reps)
	if err != nil {
		return err
	}
	for j, i := range chunk {
		b.ok[i] = ok[j]
	}
	return nil
}
