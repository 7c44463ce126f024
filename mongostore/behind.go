package mongostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// behindLimit is how many bytes of encoded documents a store keeps for
// writes held back before it writes them (see [Store.Flush]).
const behindLimit = 32 << 20

// Writes held back. Batched catch-up writes a document fed by many streams
// (kept under [projector.RevisionMap], GlobalPosition or HandledIDs) once
// per batch that meets it, and a shuffled log has every batch meet most of
// them (under the revision gate the engine's stream folds write each
// document about once already). Under a context marked by
// [driver.HoldBack] (a runner's batches behind the head), the store keeps
// such documents instead:
//
//   - LoadGuardedMany reads each from the store's memory, or from the server
//     (never from the document cache, which may be out of date), and the
//     store keeps it;
//   - PutGuardedMany checks a write of a kept document against it, as the
//     server would, and holds it back; the next batch folds on the state it
//     wrote, without decoding it again;
//   - [Store.Flush] writes what is held back, each document conditional on
//     the version the server had when the store read it. A runner flushes
//     before each checkpoint it stores, and before it says it has caught
//     up (then the store forgets what it keeps), so that a checkpoint
//     covers only what is written. A batch that finds behindLimit bytes
//     kept as it reads flushes too, and the store then forgets what it
//     keeps: memory is bounded by the limit and one batch's documents;
//   - any other read or write of a kept document (an event at the head, the
//     gate, a replay, WaitForRevision) writes it first, and the store
//     forgets it.
//
// So a summary fed by events spread over a long catch-up is written about
// once per checkpoint instead of once per batch. Readers of the server (an
// application, status) see a catching-up read model as of the last flush.
// A document another writer changed after the store read it makes the
// flush fail for good ([retry.Permanent]): the runner stops, and its next
// run applies those events again from its checkpoint. [WithDocumentCache]
// (0) turns this off with the cache.

// behindSet is what a store keeps for writes held back.
type behindSet struct {
	mu    sync.Mutex
	docs  map[cacheKey]*behindDoc
	bytes int
	limit int
	// lost is, by collection, the first write a flush found another writer
	// had made impossible: every flush of the collection reports it until
	// one that forgets (a run's end or start) has, so that no checkpoint
	// moves past the events of the write lost.
	lost map[string]error
	// flush lets one flush write at a time: a document stays in docs while
	// it is written, so that batches find it there, and a read that must
	// see it on the server waits for the flush under way.
	flush sync.Mutex
}

// behindDoc is a versioned document the store keeps: as the server has it
// (read by a batch, or written by a flush), or with writes held back
// (dirty).
type behindDoc struct {
	found bool // it exists (on the server, or in the writes held back)
	dirty bool
	// insert: dirty, and the server has no document; else, dirty, from is
	// the version the server has.
	insert bool
	from   int64
	doc    bson.Raw // encoded, as read or as last held back
	// meta and state are doc decoded, to lend to the next batch that reads
	// the document (nil state: lent, or not decoded; then doc is decoded).
	meta  driver.Meta
	state any
	gen   uint64 // moves with each write held back
	// sent are the write tokens of the documents flushes sent since the
	// last one known to have taken, in flushes cut short: the server may
	// hold one of them (see settleMissed).
	sent []string
}

// weight is what d counts against the store's limit: its bytes, twice
// when decoded too, and the entry.
func (d *behindDoc) weight() int {
	w := len(d.doc) + 128
	if d.state != nil {
		w += len(d.doc)
	}
	return w
}

// holdsBack reports whether ctx lets this store keep documents and hold
// writes back.
func (s *Store) holdsBack(ctx context.Context) bool {
	return s.behind != nil && driver.HeldBack(ctx)
}

// keptOrFound reads the versioned documents of ids as LoadGuardedMany
// does, but each from what the store keeps, else from the server, never
// from the document cache: what it reads from the server, or finds
// missing there, the store then keeps. A kept document's state is lent to
// the caller, not decoded again: the caller's write of it gives it back
// (hold); until then the next read decodes it. A document that does not
// decode is left out, and not kept: its write is then not held back.
func (s *Store) keptOrFound(ctx context.Context, collection string, ids []string, newState func() any) (map[string]driver.Guarded, error) {
	if err := s.flushIfFull(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]driver.Guarded, len(ids))
	missing := ids[:0:0]
	for _, id := range ids {
		g, found, kept, err := s.lend(collection, id, newState)
		switch {
		case err != nil:
			return nil, err
		case !kept:
			missing = append(missing, id)
		case found:
			out[id] = g
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	now, err := s.findMany(ctx, s.db.Collection(collection), missing, nil)
	if err != nil {
		return nil, err
	}
	for _, id := range missing {
		raw, found := now[id]
		if !found {
			s.keep(collection, id, nil, driver.Meta{})
			continue
		}
		state := newState()
		meta, err := decodeGuarded(collection, id, raw, state)
		if err != nil {
			continue // see LoadGuardedMany
		}
		out[id] = driver.Guarded{Meta: meta, State: state}
		s.keep(collection, id, raw, meta)
	}
	return out, nil
}

// lend returns the document the store keeps of collection and id (kept),
// if it exists (found), with its state lent: it is the caller's until its
// write gives it back.
func (s *Store) lend(collection, id string, newState func() any) (g driver.Guarded, found, kept bool, err error) {
	b := s.behind
	b.mu.Lock()
	defer b.mu.Unlock()
	d, kept := b.docs[cacheKey{collection, id}]
	if !kept || !d.found {
		return driver.Guarded{}, false, kept, nil
	}
	if d.state != nil {
		g = driver.Guarded{Meta: d.meta, State: d.state}
		b.bytes -= d.weight()
		d.state = nil
		b.bytes += d.weight()
		return g, true, true, nil
	}
	state := newState()
	meta, err := decodeGuarded(collection, id, d.doc, state)
	if err != nil {
		return driver.Guarded{}, false, true, fmt.Errorf("mongostore: %s/%s, kept for writes held back, does not decode: %w", collection, id, err)
	}
	return driver.Guarded{Meta: meta, State: state}, true, true, nil
}

// keep notes what a batch read of a document from the server (raw, with
// its meta; nil when it has none), unless the store keeps it already.
func (s *Store) keep(collection, id string, raw bson.Raw, meta driver.Meta) {
	b := s.behind
	b.mu.Lock()
	defer b.mu.Unlock()
	k := cacheKey{collection, id}
	if _, ok := b.docs[k]; ok {
		return
	}
	d := &behindDoc{found: raw != nil, doc: raw, meta: meta}
	b.docs[k] = d
	b.bytes += d.weight()
}

// hold holds back the write of put, encoded as doc, to a kept document,
// and reports whether the document as the store keeps it allowed it, as
// the server would have (an insert where there is none; a replace from the
// version it is at); kept: the store keeps the document (else it holds
// nothing, and the server is to say).
func (s *Store) hold(collection string, put driver.Put, doc bson.Raw) (held, kept bool) {
	b := s.behind
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.docs[cacheKey{collection, put.ID}]
	insert := put.Expected < 0
	switch {
	case !ok:
		return false, false
	case insert && d.found, !insert && (!d.found || put.Expected != d.meta.Version):
		return false, true
	}
	if !d.dirty {
		d.dirty, d.insert, d.from = true, insert, d.meta.Version
	}
	b.bytes -= d.weight()
	d.found, d.doc, d.meta, d.state, d.gen = true, doc, put.Meta, put.State, d.gen+1
	b.bytes += d.weight()
	return true, true
}

// holdPuts holds puts back; ok[i] reports whether puts[i] is held (the
// document as kept allowed it), or written: a document the store no
// longer keeps (a flush at the limit forgot it while a batch folded it)
// is written now, conditional on the version the batch read, as without
// holding back. The store's limit is seen to as a batch reads
// (keptOrFound).
func (s *Store) holdPuts(ctx context.Context, collection string, puts []driver.Put) ([]bool, error) {
	ok := make([]bool, len(puts))
	var now []int
	for i, p := range puts {
		doc, err := s.encodeFor(ctx, p.State, guardedFields(p.ID, p.Meta)...)
		if errors.Is(err, driver.ErrUnencodable) {
			continue
		}
		if err != nil {
			return nil, err
		}
		held, kept := s.hold(collection, p, doc)
		ok[i] = held
		if !kept {
			now = append(now, i)
		}
	}
	if len(now) == 0 {
		return ok, nil
	}
	written := make([]driver.Put, len(now))
	for j, i := range now {
		written[j] = puts[i]
	}
	took, err := s.putNow(ctx, collection, written)
	if err != nil {
		return nil, err
	}
	for j, i := range now {
		ok[i] = took[j]
	}
	return ok, nil
}

// flushIfFull flushes and forgets what the store keeps once it keeps its
// limit.
func (s *Store) flushIfFull(ctx context.Context) error {
	b := s.behind
	b.mu.Lock()
	full := b.bytes >= b.limit
	b.mu.Unlock()
	if !full {
		return nil
	}
	return s.flushWhere(ctx, func(cacheKey) bool { return true }, true)
}

// Flush writes every document of collections (of any collection, given
// none) whose writes the store holds back, batched catch-up's under
// [driver.HoldBack] (see behind.go). An error leaves held back what it did
// not write. One that wraps [retry.Permanent] names a document of
// collections another writer changed after the store read it, whose
// writes are dropped: every flush of its collection says so again until
// one that forgets.
//
// Under a context marked by [driver.HoldBack] (a runner's checkpoint while
// it is behind the head) the store goes on keeping the documents it
// wrote, for the batches to come. Otherwise (a run's start or end) it
// forgets them, and the loss it has said.
func (s *Store) Flush(ctx context.Context, collections ...string) error {
	if s.behind == nil {
		return nil
	}
	match := func(cacheKey) bool { return true }
	if len(collections) > 0 {
		set := make(map[string]bool, len(collections))
		for _, c := range collections {
			set[c] = true
		}
		match = func(k cacheKey) bool { return set[k.collection] }
	}
	forget := !driver.HeldBack(ctx)
	err := s.flushWhere(ctx, match, forget)
	b := s.behind
	b.mu.Lock()
	defer b.mu.Unlock()
	for c, lost := range b.lost {
		if match(cacheKey{collection: c}) {
			if !errors.Is(err, lost) {
				err = errors.Join(err, lost)
			}
			if forget {
				delete(b.lost, c)
			}
		}
	}
	return err
}

// release writes the documents of ids of collection whose writes are held
// back, and forgets them, before a read or write of them that goes to the
// server.
func (s *Store) release(ctx context.Context, collection string, ids ...string) error {
	if s.behind == nil {
		return nil
	}
	s.behind.mu.Lock()
	kept := false
	for _, id := range ids {
		if _, ok := s.behind.docs[cacheKey{collection, id}]; ok {
			kept = true
			break
		}
	}
	s.behind.mu.Unlock()
	if !kept {
		return nil
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	return s.flushWhere(ctx, func(k cacheKey) bool { return k.collection == collection && want[k.id] }, true)
}

// flushed is a document held back as a flush writes it.
type flushed struct {
	key cacheKey
	behindDoc
}

// flushWhere writes the documents held back that match, by collection;
// forget: then the store forgets every document that matches, once
// written.
func (s *Store) flushWhere(ctx context.Context, match func(cacheKey) bool, forget bool) error {
	b := s.behind
	b.flush.Lock()
	defer b.flush.Unlock()
	byColl := map[string][]flushed{}
	b.mu.Lock()
	for k, d := range b.docs {
		if match(k) && d.dirty {
			byColl[k.collection] = append(byColl[k.collection], flushed{k, *d})
		}
	}
	b.mu.Unlock()
	var errs []error
	for collection, docs := range byColl {
		errs = append(errs, s.flushColl(ctx, collection, docs))
	}
	err := errors.Join(errs...)
	if err == nil && forget {
		b.mu.Lock()
		for k, d := range b.docs {
			if match(k) && !d.dirty {
				delete(b.docs, k)
				b.bytes -= d.weight()
			}
		}
		b.mu.Unlock()
	}
	return err
}

// flushColl writes docs, documents of collection held back, each
// conditional on what the server had when the store read it.
func (s *Store) flushColl(ctx context.Context, collection string, docs []flushed) error {
	coll := s.db.Collection(collection)
	ids, raws, from := make([]string, len(docs)), make([]bson.Raw, len(docs)), make([]int64, len(docs))
	for i, d := range docs {
		ids[i], raws[i], from[i] = d.key.id, d.doc, d.from
		if d.insert {
			from[i] = -1
		}
	}
	ok, err := s.putVersioned(ctx, coll, ids, raws, from)
	if err == nil {
		err = s.settleMissed(ctx, coll, docs, ok)
	}
	if err != nil {
		s.sent(docs)
		return fmt.Errorf("mongostore: write %d documents of %s held back: %w", len(docs), collection, err)
	}
	var lost []string
	for i, d := range docs {
		if !ok[i] {
			lost = append(lost, d.key.id)
		}
		s.written(d, ok[i])
	}
	if len(lost) == 0 {
		return nil
	}
	which := fmt.Sprintf("%d documents of %s held back for batched catch-up were changed by another writer after this store read them (%q first)",
		len(lost), collection, lost[0])
	if len(lost) == 1 {
		which = fmt.Sprintf("document %q of %s, held back for batched catch-up, was changed by another writer after this store read it",
			lost[0], collection)
	}
	err = retry.Permanent(fmt.Errorf("mongostore: %s: their events are applied again from the checkpoint", which))
	s.behind.mu.Lock()
	if s.behind.lost == nil {
		s.behind.lost = map[string]error{}
	}
	if s.behind.lost[collection] == nil {
		s.behind.lost[collection] = err
	}
	s.behind.mu.Unlock()
	return err
}

// sent notes, of docs, what a flush cut short sent: the server may hold
// it, which the next flush's conditions do not expect.
func (s *Store) sent(docs []flushed) {
	b := s.behind
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range docs {
		if cur, ok := b.docs[d.key]; ok {
			cur.sent = append(cur.sent, tokenOf(d.doc))
		}
	}
}

// written notes that the flush wrote d (took), or that its write missed:
// then the store forgets it. Written, it is kept as the server has it now,
// unless held back again since the flush took it, when what is held back
// now starts from what was written.
func (s *Store) written(d flushed, took bool) {
	b := s.behind
	b.mu.Lock()
	defer b.mu.Unlock()
	s.cacheDrop(d.key.collection, d.key.id) // what the cache holds of it is older
	cur, ok := b.docs[d.key]
	switch {
	case !ok:
	case !took:
		delete(b.docs, d.key)
		b.bytes -= cur.weight()
	case cur.gen == d.gen:
		cur.dirty, cur.insert, cur.sent = false, false, nil
	default:
		cur.insert, cur.from, cur.sent = false, d.meta.Version, nil
	}
}

// settleMissed settles the writes of docs that did not take (ok[i] false:
// an insert that found a document, a replace that found another version).
// One whose document holds its own write token took (tookByToken has
// seen to the replaces). One whose document holds the token of a write a
// flush cut short sent (behindDoc.sent) took an earlier state of it: it is
// written over that, conditional on its version. Any other stays missed.
func (s *Store) settleMissed(ctx context.Context, coll *mongo.Collection, docs []flushed, ok []bool) error {
	var ids []string
	for i, d := range docs {
		if !ok[i] {
			ids = append(ids, d.key.id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	now, err := s.findMany(ctx, coll, ids, bson.D{{Key: fieldWrite, Value: 1}, {Key: fieldMeta + ".v", Value: 1}})
	if err != nil {
		return err
	}
	for i, d := range docs {
		cur, found := now[d.key.id]
		switch {
		case ok[i] || !found:
		case tokenOf(cur) == tokenOf(d.doc):
			ok[i] = true
		case slices.Contains(d.sent, tokenOf(cur)):
			v, _ := cur.Lookup(fieldMeta, "v").AsInt64OK()
			took, err := s.replaceIf(ctx, coll, d.key.id, metaVersion(v), d.doc)
			if err != nil {
				return err
			}
			ok[i] = took
		}
	}
	return nil
}
