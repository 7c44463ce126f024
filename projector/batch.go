package projector

import (
	"context"
	"errors"
	"slices"
)

// BatchStore is what batched catch-up needs of the store: one read for many
// documents and unordered bulk writes, each still conditional on the revision
// it starts from. mongostore implements it.
type BatchStore interface {
	Store
	// LoadMany reads the documents of ids that exist, decoding each state
	// into a value from newState.
	LoadMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]Loaded, error)
	// WriteMany applies writes, in any order; ok[i] reports whether writes[i]
	// took effect (an insert found no document, a replace found its From).
	WriteMany(ctx context.Context, collection string, writes []Write) (ok []bool, err error)
}

// Loaded is a document as LoadMany read it.
type Loaded struct {
	Revision uint64
	State    any
	// Cached: from the store's cache of what it read or wrote, not from the
	// server, so possibly out of date. A write from it is conditional on
	// Revision and misses if so; HandleBatch does not count events
	// duplicates on a cached document's word alone.
	Cached bool
}

// Write is one document write of a batch: an insert at Revision, or a
// replace from revision From to Revision.
type Write struct {
	ID       string
	Insert   bool
	From     uint64
	Revision uint64
	State    any
}

// batchable reports whether HandleBatch can fold events of every projection:
// all under the revision gate, on a store that writes in bulk.
func (e *Engine) batchable() bool {
	if _, ok := e.store.(BatchStore); !ok {
		return false
	}
	for _, p := range e.projections {
		if strategyOf(p).kind != kindStreamRevision {
			return false
		}
	}
	return true
}

// HandleBatch handles events as Handle does, one result list per event, but
// reads and writes each document once: for each projection it reads the
// documents the batch touches with one query, folds each document's events
// in memory from the revision it is at, and writes it with one conditional
// bulk write. A document whose events do not follow on from what is stored
// (a predecessor not applied yet), whose fold fails, or whose write misses
// (another writer moved it) has its events handled one by one through the
// gate instead, with its waits and its failure policy. Events of one document
// must be in revision order in events, as a catch-up subscription gives them.
//
// A failed event stops a runner, so once one fails, the events still to go
// through the gate are left alone, with results that are [Failed] with
// [ErrNotHandled], instead of each waiting out its retry policy for a
// predecessor that will not come.
func (e *Engine) HandleBatch(ctx context.Context, events []Event) [][]Result {
	out := make([][]Result, len(events))
	b := &batchRun{Engine: e, events: events, out: out}
	if !e.batchable() || len(events) < 2 {
		for i := range events {
			b.handle(ctx, i)
		}
		return out
	}
	bs := e.store.(BatchStore)
	decoded := make([]Event, len(events))
	for i, ev := range events {
		d, err := e.registry.Decode(ev)
		if err != nil {
			// A payload that does not decode: the whole batch goes through
			// the gate in order, which applies the failure policy.
			for i := range events {
				b.handle(ctx, i)
			}
			return out
		}
		decoded[i] = d
	}
	b.decoded = decoded
	type docEvents struct {
		id  string
		idx []int // into events, in order
	}
	for _, p := range e.projections {
		var docs []*docEvents
		byID := map[string]*docEvents{}
		for i := range events {
			id, ok := p.DocumentID(decoded[i])
			if !ok {
				continue
			}
			d := byID[id]
			if d == nil {
				d = &docEvents{id: id}
				byID[id] = d
				docs = append(docs, d)
			}
			d.idx = append(d.idx, i)
		}
		if len(docs) == 0 {
			continue
		}
		// A document whose first event here creates it is most likely new: it
		// is not read, and it is written with an insert, which fails if it
		// exists after all (a redelivery), and then its events go through the
		// gate. The others are read with one query.
		ids := make([]string, 0, len(docs))
		for _, d := range docs {
			if !p.creates(decoded[d.idx[0]]) {
				ids = append(ids, d.id)
			}
		}
		loaded := map[string]Loaded{}
		var err error
		if len(ids) > 0 {
			loaded, err = bs.LoadMany(ctx, p.Collection(), ids, p.newState)
		}
		if err != nil {
			e.logger.Warn("batch read failed: its documents go through the gate one event at a time",
				"projection", p.Name(), "documents", len(ids), "err", err)
			for _, d := range docs {
				b.slowDoc(ctx, p, d.id, d.idx)
			}
			continue
		}
		var writes []Write
		var writeDocs []*docEvents
		for _, d := range docs {
			cur, found := loaded[d.id]
			state, rev := cur.State, cur.Revision
			results := make([]Result, 0, len(d.idx))
			fallback, changed := false, false
			var insert bool
			for _, i := range d.idx {
				ev := decoded[i]
				n := ev.StreamRevision
				switch {
				case found && n <= rev:
					results = append(results, Result{Projection: p.Name(), Document: d.id, Outcome: Duplicate})
					continue
				case found && p.creates(ev):
					// A second creation: the gate refuses it
					// (ErrAlreadyCreated) under the failure policy.
					fallback = true
				case p.creates(ev):
					next, err := p.applyTo(nil, ev)
					if err != nil {
						fallback = true
						break
					}
					state, rev, found, insert, changed = next, n, true, true, true
				case found && n == rev+1:
					next, err := p.applyTo(state, ev)
					if err != nil {
						fallback = true
						break
					}
					state, rev, changed = next, n, true
				default:
					fallback = true // a predecessor is missing: the gate waits for it
				}
				if fallback {
					break
				}
				results = append(results, Result{Projection: p.Name(), Document: d.id, Outcome: Applied})
			}
			if fallback {
				b.slowDoc(ctx, p, d.id, d.idx)
				continue
			}
			if !changed {
				if cur.Cached {
					// Every event a duplicate, by the cache's word only: the
					// gate reads the server. (A document deleted or rebuilt
					// under the projector would otherwise lose them.)
					b.slowDoc(ctx, p, d.id, d.idx)
					continue
				}
				for k, i := range d.idx {
					out[i] = append(out[i], results[k])
				}
				continue
			}
			w := Write{ID: d.id, Insert: insert, From: cur.Revision, Revision: rev, State: state}
			writes = append(writes, w)
			writeDocs = append(writeDocs, d)
			for k, i := range d.idx {
				out[i] = append(out[i], results[k])
			}
		}
		if len(writes) == 0 {
			continue
		}
		ok, err := bs.WriteMany(ctx, p.Collection(), writes)
		if err != nil {
			e.logger.Warn("batch write failed: its documents go through the gate one event at a time",
				"projection", p.Name(), "documents", len(writes), "err", err)
		}
		for k, d := range writeDocs {
			if err == nil && ok[k] {
				continue
			}
			// The write missed: drop this document's batch results and let
			// the gate handle its events one by one.
			for _, i := range d.idx {
				out[i] = slices.DeleteFunc(out[i], func(r Result) bool { return r.Projection == p.Name() })
			}
			b.slowDoc(ctx, p, d.id, d.idx)
		}
	}
	return out
}

// batchRun is one HandleBatch call: its events, their results, and whether
// one has failed.
type batchRun struct {
	*Engine
	events  []Event
	decoded []Event // the events with their payloads decoded, once they all decode
	out     [][]Result
	failed  bool
}

// handle handles event i alone, through Handle, unless an event has failed.
func (b *batchRun) handle(ctx context.Context, i int) {
	if b.failed {
		b.out[i] = []Result{{Outcome: Failed, Err: ErrNotHandled}}
		return
	}
	b.out[i], _ = b.Handle(ctx, b.events[i])
	b.note(b.out[i]...)
}

// slowDoc handles the events idx of document id of p through the gate, in
// order, until an event fails.
func (b *batchRun) slowDoc(ctx context.Context, p Definition, id string, idx []int) {
	for _, i := range idx {
		res := Result{Projection: p.Name(), Document: id, Outcome: Failed, Err: ErrNotHandled}
		if !b.failed {
			res = b.gate(ctx, p, id, b.decoded[i], nil)
			b.note(res)
		}
		b.out[i] = append(b.out[i], res)
	}
}

func (b *batchRun) note(results ...Result) {
	for _, r := range results {
		if r.Outcome == Failed {
			b.failed = true
		}
	}
}

// handledOnly returns the results of an event without those HandleBatch left
// alone ([ErrNotHandled]), and whether there were any.
func handledOnly(results []Result) (handled []Result, left bool) {
	handled = make([]Result, 0, len(results))
	for _, r := range results {
		if r.Outcome == Failed && errors.Is(r.Err, ErrNotHandled) {
			left = true
			continue
		}
		handled = append(handled, r)
	}
	return handled, left
}
