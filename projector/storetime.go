package projector

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// storeClock sums the time spent in the document store on behalf of one
// traced event (the gate's reads and writes of it) or one batch's documents
// of a projection: the attribute projector.store.time_ms of an event's span.
// The engine makes one only when it records a span (nil otherwise: tracing
// off costs a nil check per store call).
type storeClock struct{ ns atomic.Int64 }

// start is when a store call begins; zero on a nil clock.
func (c *storeClock) start() time.Time {
	if c == nil {
		return time.Time{}
	}
	return time.Now()
}

// stop adds the time since t0 to the clock.
func (c *storeClock) stop(t0 time.Time) {
	if c != nil {
		c.ns.Add(int64(time.Since(t0)))
	}
}

// elapsed is the time summed so far; 0 on a nil clock.
func (c *storeClock) elapsed() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.ns.Load())
}

// docStore is every call the engine makes to the document store for
// documents, each timed into clock when there is one: tracing's seam on the
// store. A batch's bulk reads and writes each get a span of their own
// (projector.batch.read, projector.batch.write), with p's name. The store's
// optional abilities are the engine's (nil when absent).
type docStore struct {
	c     *core
	clock *storeClock
	p     Definition // the projection of a batch's bulk calls
}

func (s docStore) Load(ctx context.Context, collection, id string, minRevision uint64, state any) (driver.Head, bool, error) {
	defer s.clock.stop(s.clock.start())
	return s.c.store.Load(ctx, collection, id, minRevision, state)
}

func (s docStore) Insert(ctx context.Context, collection, id string, head driver.Head, state any) error {
	defer s.clock.stop(s.clock.start())
	return refusedState(s.c.store.Insert(ctx, collection, id, head, state))
}

func (s docStore) Update(ctx context.Context, collection, id string, from uint64, head driver.Head, state any) (bool, error) {
	defer s.clock.stop(s.clock.start())
	ok, err := s.c.store.Update(ctx, collection, id, from, head, state)
	return ok, refusedState(err)
}

func (s docStore) Delete(ctx context.Context, collection, id string, from uint64) (bool, error) {
	defer s.clock.stop(s.clock.start())
	return s.c.store.Delete(ctx, collection, id, from)
}

func (s docStore) LoadGuarded(ctx context.Context, collection, id string, state any) (driver.Meta, bool, error) {
	defer s.clock.stop(s.clock.start())
	return s.c.guardedStore.LoadGuarded(ctx, collection, id, state)
}

func (s docStore) PutGuarded(ctx context.Context, collection, id string, expected int64, meta driver.Meta, state any) (bool, error) {
	defer s.clock.stop(s.clock.start())
	ok, err := s.c.guardedStore.PutGuarded(ctx, collection, id, expected, meta, state)
	return ok, refusedState(err)
}

// refusedState marks the store's refusal of a document's state
// ([driver.ErrUnencodable]) as permanent: writing it again gives the same.
// The gate and the strategies then fail the event's step with it (see
// [Engine.refusedStep]).
func refusedState(err error) error {
	if errors.Is(err, driver.ErrUnencodable) {
		return retry.Permanent(err)
	}
	return err
}

func (s docStore) LoadMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]driver.Loaded, error) {
	return bulk(ctx, s, spanBatchRead, len(ids), nil, func(ctx context.Context) (map[string]driver.Loaded, error) {
		return s.c.batchStore.LoadMany(ctx, collection, ids, newState)
	})
}

func (s docStore) WriteMany(ctx context.Context, collection string, writes []driver.Write) ([]bool, error) {
	return bulk(ctx, s, spanBatchWrite, len(writes), missedOf, func(ctx context.Context) ([]bool, error) {
		return s.c.batchStore.WriteMany(ctx, collection, writes)
	})
}

func (s docStore) LoadGuardedMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]driver.Guarded, error) {
	return bulk(ctx, s, spanBatchRead, len(ids), nil, func(ctx context.Context) (map[string]driver.Guarded, error) {
		return s.c.guardedBatch.LoadGuardedMany(ctx, collection, ids, newState)
	})
}

func (s docStore) PutGuardedMany(ctx context.Context, collection string, puts []driver.Put) ([]bool, error) {
	return bulk(ctx, s, spanBatchWrite, len(puts), missedOf, func(ctx context.Context) ([]bool, error) {
		return s.c.guardedBatch.PutGuardedMany(ctx, collection, puts)
	})
}

// bulk runs call, a batch's bulk read or write of n documents of s.p, in a
// span of its own (name), timed into the clock inside it so that the
// store's time is within the span's; missed (nil for a read) counts the
// documents a write did not write, for the span.
func bulk[T any](ctx context.Context, s docStore, name string, n int, missed func(T, error) int, call func(context.Context) (T, error)) (T, error) {
	ctx, span := s.c.startStore(ctx, name, s.p, n)
	t0 := s.clock.start()
	v, err := call(ctx)
	s.clock.stop(t0)
	m := 0
	if missed != nil {
		m = missed(v, err)
	}
	endStore(span, err, m)
	return v, err
}

func (s docStore) Receive(ctx context.Context, projection, eventID string) error {
	defer s.clock.stop(s.clock.start())
	return s.c.inboxStore.Receive(ctx, projection, eventID)
}

// InTransaction times the transaction (its start, its commit, its retries)
// but not fn, whose store calls are timed on their own and whose fold is
// not the store's time.
func (s docStore) InTransaction(ctx context.Context, fn func(ctx context.Context) error) error {
	c := s.clock
	if c == nil {
		return s.c.inboxStore.InTransaction(ctx, fn)
	}
	t0 := c.start()
	var inner time.Duration
	err := s.c.inboxStore.InTransaction(ctx, func(ctx context.Context) error {
		t1 := time.Now()
		defer func() { inner += time.Since(t1) }()
		return fn(ctx)
	})
	c.ns.Add(int64(time.Since(t0) - inner))
	return err
}

// docs is the engine's document store, its calls timed into the view's
// clock (a traced event's).
func (e *Engine) docs() docStore { return docStore{e.core, e.clock, nil} }

// docsOf is the batch's document store for projection p's documents, its
// calls timed into the clock of its round of them, when traced.
func (b *batchRun) docsOf(p Definition) docStore { return docStore{b.core, b.clock, p} }
