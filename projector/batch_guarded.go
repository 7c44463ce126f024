package projector

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/revgate/projector/projector/driver"
)

// guardedBatches reports whether a batch can fold k's versioned documents:
// strategies whose check and record are pure functions of the document's
// meta (not the inbox, whose transaction records each event, nor none).
func guardedBatches(k keeper) bool {
	switch k.(type) {
	case revisionMap, globalPosition, handledIDs:
		return true
	}
	return false
}

// guardedLimit bounds the documents a batch reads and writes at once.
const guardedLimit = 8

// projectGuarded handles the batch's events of projection p, whose
// documents are versioned (a summary fed by many streams, under
// RevisionMap): each document is read once, its events of the batch folded
// in memory as the strategy would apply them one by one, and written once,
// conditional on the version read. A document whose fold meets an event the
// strategy would not simply apply or pass over (a predecessor missing, a
// step that fails), or whose write misses (another writer moved it), has its
// events handled one by one instead, with their waits and failure policy.
func (b *batchRun) projectGuarded(ctx context.Context, p Definition, ids []string) {
	docs := b.documents(ids)
	if len(docs) == 0 {
		return
	}
	start := time.Now()
	// The documents' locks, in the order of their ids: what the per-event
	// path holds for one attempt, a batch holds while it folds.
	sorted := slices.Clone(docs)
	slices.SortFunc(sorted, func(x, y *docEvents) int { return strings.Compare(x.id, y.id) })
	var through []*docEvents
	aside := map[*docEvents]bool{}
	for _, d := range sorted {
		if !b.decodeAll(d) || b.policyOf(p) == Hold && b.heldHere(ctx, p, d) {
			through = append(through, d)
			aside[d] = true
		}
	}
	unlocks := make([]func(), 0, len(sorted))
	for _, d := range sorted {
		if !aside[d] {
			unlocks = append(unlocks, b.locks.lock(docKey{p.Collection(), d.id}))
		}
	}
	var mu sync.Mutex
	var missed []*docEvents
	tracing := b.tracing()
	var stored map[*docEvents]time.Duration // each document's time in the store, for its events' spans
	if tracing {
		stored = make(map[*docEvents]time.Duration, len(docs))
	}
	sem := make(chan struct{}, guardedLimit)
	var wg sync.WaitGroup
	for _, d := range docs {
		if aside[d] {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			dctx, clock := ctx, (*storeClock)(nil)
			if tracing {
				dctx, clock = withStoreClock(ctx)
			}
			results, ok := b.foldGuarded(dctx, p, d)
			mu.Lock()
			defer mu.Unlock()
			if clock != nil {
				stored[d] = clock.elapsed()
			}
			if !ok {
				missed = append(missed, d)
				return
			}
			for k, i := range d.idx {
				b.out[i] = append(b.out[i], results[k])
			}
		})
	}
	wg.Wait()
	for _, unlock := range unlocks {
		unlock()
	}
	through = append(through, missed...)
	b.traceFolded(ctx, p, docs, through, start, func(d *docEvents) time.Duration { return stored[d] }, nil)
	// In the batch's order, so that a document's events go in their order.
	slices.SortFunc(through, func(x, y *docEvents) int { return x.idx[0] - y.idx[0] })
	for _, d := range through {
		b.slowDoc(ctx, p, d)
	}
}

// foldGuarded reads document d, folds its events and writes it; ok is false
// when its events must go through the per-event path (nothing written).
func (b *batchRun) foldGuarded(ctx context.Context, p Definition, d *docEvents) (results []Result, ok bool) {
	k := b.keeperOf(p)
	state := p.newState()
	sctx, span := b.startStore(ctx, spanBatchRead, p, 1)
	meta, found, err := b.docs().LoadGuarded(sctx, p.Collection(), d.id, state)
	endStore(span, err, 0)
	if err != nil {
		b.logger.Warn("batch read failed: the document's events go through one at a time", "projection", p.Name(), "document", d.id, "err", err)
		return nil, false
	}
	read := stored{found: found, meta: meta}
	var cur any
	if found {
		cur = state
	}
	changed := false
	for _, i := range d.idx {
		ev := b.decoded[i]
		v, err := k.check(read, ev, p.creates(ev))
		switch {
		case err != nil:
			return nil, false
		case v == duplicate:
			results = append(results, Result{Projection: p.Name(), Document: d.id, Outcome: Duplicate})
			continue
		case v != apply && v != create:
			return nil, false // a predecessor missing, a second creation: one at a time
		}
		from := cur
		if v == create {
			from = nil
		}
		next, err := p.applyTo(from, ev)
		if err != nil {
			return nil, false // under its failure policy, one at a time
		}
		cur, changed = next, true
		read = k.record(stored{found: true, meta: read.meta}, ev)
		read.found = true
		results = append(results, Result{Projection: p.Name(), Document: d.id, Outcome: Applied})
	}
	if !changed {
		return results, true
	}
	expected := int64(-1)
	if found {
		expected = meta.Version
	}
	written := read.meta
	written.Version = meta.Version + 1
	sctx, span = b.startStore(ctx, spanBatchWrite, p, 1)
	put, err := b.docs().PutGuarded(sctx, p.Collection(), d.id, expected, written, cur)
	missed := 0
	if err == nil && !put {
		missed = 1
	}
	endStore(span, err, missed)
	if err != nil || !put {
		if err != nil {
			b.logger.Warn("batch write failed: the document's events go through one at a time", "projection", p.Name(), "document", d.id, "err", err)
		}
		return nil, false
	}
	return results, true
}

// batchesWith reports whether a batch can fold the documents of every
// projection on store: gated ones with a [driver.BatchStore], versioned
// ones of the strategies [guardedBatches] names.
func batchesWith(store driver.Store, keepers map[string]keeper) bool {
	_, bulk := store.(driver.BatchStore)
	_, guarded := store.(driver.GuardedStore)
	for _, k := range keepers {
		switch k.(type) {
		case streamRevision:
			if !bulk {
				return false
			}
		default:
			if !guarded || !guardedBatches(k) {
				return false
			}
		}
	}
	return true
}
