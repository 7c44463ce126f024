package mongostore

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/projector/driver"
)

// defaultDocumentCache is how many documents a store keeps for batched
// catch-up unless [WithDocumentCache] says otherwise.
const defaultDocumentCache = 4096

// Option configures a [Store].
type Option func(*Store)

// WithDocumentCache keeps the last n documents the store read or wrote in
// bulk (default 4,096; 0 keeps none), so that batched
// catch-up reads a document from the server only the first time a batch
// needs it. The per-event path (at the head, and the gate) never reads the
// cache, and its writes drop the document from it.
//
// A cached document another process has moved is caught: the batch's write
// is conditional on the cached revision (or, for a document kept under
// another strategy than the revision gate, its version, which every write
// moves on), misses, and the engine takes the document through the
// per-event path, which reads the server. Under the revision gate a change
// that keeps the revision is not caught: a parked event replayed by another
// process, or an edit by hand, is written over by the next batch of a
// projector that holds the document. Replay parked events while the
// projection is stopped (as replay-parked asks), or with the store the
// running engine uses, or turn the cache off.
//
// The store also keeps, under the same option, the documents fed by many
// streams whose batch writes it holds back while a runner catches up (up
// to 32 MiB; see [Store.Flush]): 0 turns that off too.
func WithDocumentCache(n int) Option {
	return func(s *Store) {
		s.cache, s.behind = nil, nil
		if n > 0 {
			s.cache, _ = lru.New[cacheKey, cached](n) // n > 0: no error
			s.behind = &behindSet{docs: map[cacheKey]*behindDoc{}, limit: behindLimit}
		}
	}
}

type cacheKey struct{ collection, id string }

// cached is a document as the store last read or wrote it.
type cached struct {
	head driver.Head
	raw  bson.Raw // the document, or the state alone: both decode into the state
}

func (s *Store) cacheGet(collection, id string) (cached, bool) {
	if s.cache == nil {
		return cached{}, false
	}
	return s.cache.Get(cacheKey{collection, id})
}

func (s *Store) cachePut(collection, id string, head driver.Head, raw bson.Raw) {
	if s.cache != nil {
		s.cache.Add(cacheKey{collection, id}, cached{head, raw})
	}
}

func (s *Store) cacheDrop(collection, id string) {
	if s.cache != nil {
		s.cache.Remove(cacheKey{collection, id})
	}
}

// cachedOrFound reads the documents of ids that exist, as decode gives
// them: each from the store's cache where decode takes it there (cached is
// the head it was cached with), the others with one findMany (cached nil),
// each then cached with the head decode gives. From the server, an error
// of decode fails the read and skip leaves the document out; from the
// cache, either one drops it, and it is read from the server.
func cachedOrFound[T any](ctx context.Context, s *Store, collection string, ids []string,
	decode func(id string, raw bson.Raw, cached *driver.Head) (v T, head driver.Head, skip bool, err error)) (map[string]T, error) {
	// What the store keeps for writes held back (behind.go) is written
	// first, and forgotten: this read's documents are the cache's.
	if err := s.release(ctx, collection, ids...); err != nil {
		return nil, err
	}
	out := make(map[string]T, len(ids))
	missing := ids[:0:0]
	for _, id := range ids {
		if c, ok := s.cacheGet(collection, id); ok {
			if v, _, skip, err := decode(id, c.raw, &c.head); err == nil && !skip {
				out[id] = v
				continue
			}
			s.cacheDrop(collection, id)
		}
		missing = append(missing, id)
	}
	if len(missing) == 0 {
		return out, nil
	}
	now, err := s.findMany(ctx, s.db.Collection(collection), missing, nil)
	if err != nil {
		return nil, err
	}
	for id, raw := range now {
		v, head, skip, err := decode(id, raw, nil)
		if err != nil {
			return nil, err
		}
		if skip {
			continue
		}
		out[id] = v
		s.cachePut(collection, id, head, raw)
	}
	return out, nil
}
