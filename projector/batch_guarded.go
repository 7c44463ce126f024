package projector

import (
	"context"
	"slices"
	"strings"

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

// projectGuarded handles the batch's events of projection p, whose
// documents are versioned (fed by many streams, under RevisionMap,
// GlobalPosition or HandledIDs): the documents are read with one query,
// each one's events of the batch folded in memory as the strategy would
// apply them one by one, and the changed documents written with one bulk
// write, each conditional on the version read. An event that the strategy
// would not simply apply or pass over (a predecessor missing, as after an
// event of its stream routed to another document; a second creation; a
// step that fails), or whose payload does not decode (under block and
// hold; under skip and park the fold passes over it, recorded first),
// costs its document a split: its events before it are folded, it goes
// alone through the per-event path (its wait, its failure policy), and its
// events after it are folded in another round. A document whose write misses (another
// writer moved it) has its events handled one by one.
func (b *batchRun) projectGuarded(ctx context.Context, p Definition, ids []string) {
	b.firstOf = func(ev Event, revs map[string]uint64) bool { return b.firstOfStream(p, ev, revs) }
	b.failAt = nil
	for docs := b.documents(ids); len(docs) > 0; {
		docs = b.guardedRound(ctx, p, docs)
		if b.failed {
			// Stopped at a failure: the rest is left alone.
			for _, d := range docs {
				b.slowDoc(ctx, p, d)
			}
			return
		}
	}
}

// guardedRound is one round of projectGuarded over docs; rest is, for each
// document split at an event that does not decode, its events after it.
func (b *batchRun) guardedRound(ctx context.Context, p Definition, docs []*docEvents) (rest []*docEvents) {
	r := b.beginRound()
	var through, keep []*docEvents
	for _, d := range docs {
		if b.holding(ctx, target{p, d.id}) && b.heldHere(ctx, p, d) {
			through = append(through, d)
			continue
		}
		k := b.firstUndecodable(d)
		if k >= 0 && b.movesPast(p) {
			// Under skip and park the fold passes over an event that does
			// not decode (foldVersioned): no handler runs on it. Each of
			// the others is decoded first, so that the fold knows every
			// one that does not.
			for _, i := range d.idx[k+1:] {
				b.decode(i)
			}
			k = -1
		}
		if k < 0 {
			keep = append(keep, d)
			continue
		}
		if k > 0 {
			keep = append(keep, &docEvents{id: d.id, idx: d.idx[:k]})
		}
		through = append(through, &docEvents{id: d.id, idx: d.idx[k : k+1]})
		if k+1 < len(d.idx) {
			rest = append(rest, &docEvents{id: d.id, idx: d.idx[k+1:]})
		}
	}
	unlock := b.lockDocs(p, keep)
	slow, stopped := b.foldGuarded(ctx, p, keep)
	unlock()
	through = append(through, slow...)
	through, rest = splitAt(docs, stopped, through, rest)
	r.folded(ctx, p, docs, through, nil)
	r.end()
	// In the batch's order, so that a document's events go in their order.
	slices.SortFunc(through, func(x, y *docEvents) int { return x.idx[0] - y.idx[0] })
	for _, d := range through {
		b.slowDoc(ctx, p, d)
	}
	return rest
}

// splitAt moves to the next round (rest) every event of a document of docs
// from the first one after its fold stopped (stopped: the event's index in
// the batch, by document), where an event whose payload does not decode
// may have put later events of it already (through, at the undecodable
// event, and rest, after it): they come after the fold's stop, in the
// document's order.
func splitAt(docs []*docEvents, stopped map[string]int, through, rest []*docEvents) ([]*docEvents, []*docEvents) {
	if len(stopped) == 0 {
		return through, rest
	}
	after := func(d *docEvents) bool { at, ok := stopped[d.id]; return ok && d.idx[0] > at }
	through = slices.DeleteFunc(through, after)
	rest = slices.DeleteFunc(rest, after)
	for _, d := range docs {
		at, ok := stopped[d.id]
		if !ok {
			continue
		}
		if k := slices.Index(d.idx, at); k+1 < len(d.idx) {
			rest = append(rest, &docEvents{id: d.id, idx: d.idx[k+1:]})
		}
	}
	return through, rest
}

// firstUndecodable decodes the events of d and returns the place in d of
// the first whose payload does not decode, -1 when they all decode.
func (b *batchRun) firstUndecodable(d *docEvents) int {
	for k, i := range d.idx {
		if _, err := b.decode(i); err != nil {
			return k
		}
	}
	return -1
}

// lockDocs takes the locks of docs, in the order of their ids: what the
// per-event path holds for one attempt, a batch holds while it reads, folds
// and writes.
func (b *batchRun) lockDocs(p Definition, docs []*docEvents) (unlock func()) {
	sorted := slices.Clone(docs)
	slices.SortFunc(sorted, func(x, y *docEvents) int { return strings.Compare(x.id, y.id) })
	unlocks := make([]func(), len(sorted))
	for i, d := range sorted {
		unlocks[i] = b.locks.lock(docKey{p.Collection(), d.id})
	}
	return func() {
		for _, u := range unlocks {
			u()
		}
	}
}

// foldGuarded reads docs with one query, folds each one's events and
// writes the changed ones with one bulk write; it sets the results of the
// events it settles, and returns the documents whose events must go
// through the per-event path (nothing written of them). A document whose
// fold stopped at an event is written up to it, the event goes through,
// and stopped has its index in the batch: its events after it are not
// handled here.
func (b *batchRun) foldGuarded(ctx context.Context, p Definition, docs []*docEvents) (through []*docEvents, stopped map[string]int) {
	if len(docs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.id
	}
	loaded, err := b.docsOf(p).LoadGuardedMany(ctx, p.Collection(), ids, p.newState)
	if err != nil {
		b.logger.Warn("batch read failed: its documents' events go through one at a time", "projection", p.Name(), "documents", len(ids), "err", err)
		return docs, nil
	}
	var puts []driver.Put
	var putDocs []*docEvents
	var putResults [][]Result
	for _, d := range docs {
		cur, found := loaded[d.id]
		limit := -1
		if at, ok := b.failAt[d.id]; ok {
			// A step failed at this event in the round before: folded up
			// to it, on the document read again.
			delete(b.failAt, d.id)
			limit = slices.Index(d.idx, at)
		}
		put, results, stop, failed, passed := foldVersioned(b.keeperOf(p), p, d.id, b.decoded, d.idx, cur, found, b.firstOf, limit, b.movesPast(p))
		if failed > 0 {
			// A step failed at this event, after handlers changed the
			// state read: the document's events go to the next round, on
			// the document read again, folded up to it.
			if b.failAt == nil {
				b.failAt = map[string]int{}
			}
			b.failAt[d.id] = d.idx[failed]
			if stopped == nil {
				stopped = map[string]int{}
			}
			stopped[d.id] = d.idx[0] - 1 // all of them, in their order
			continue
		}
		if failed == 0 {
			stop = 0
		}
		if stop >= 0 {
			// Its events before the stop are folded (put, results); the
			// stop goes through.
			if stopped == nil {
				stopped = map[string]int{}
			}
			stopped[d.id] = d.idx[stop]
			through = append(through, &docEvents{id: d.id, idx: d.idx[stop : stop+1]})
			if stop == 0 {
				continue
			}
			d = &docEvents{id: d.id, idx: d.idx[:stop]}
		}
		switch {
		case put == nil && cur.Cached:
			// Through the per-event path. (A document whose events are all
			// duplicates by the cache's word only is read from the server
			// there.)
			through = append(through, d)
		case put == nil:
			b.settleDoc(d, results)
		case !b.passOver(ctx, p, d, results, passed):
			through = append(through, d) // nothing written of it
		default:
			puts, putDocs, putResults = append(puts, *put), append(putDocs, d), append(putResults, results)
		}
	}
	return append(through, b.putGuarded(ctx, p, puts, putDocs, putResults)...), stopped
}

// passOver records the events of d that the fold passed over (passed:
// their places in results, which hold their errors), under park, before
// the write that moves the document past them (a record is never missing
// for a document that moved), and gives them their results; false when a
// record could not be written.
func (b *batchRun) passOver(ctx context.Context, p Definition, d *docEvents, results []Result, passed []int) bool {
	t := target{p, d.id}
	for _, j := range passed {
		ev, cause := b.decoded[d.idx[j]], results[j].Err
		if err := b.park(ctx, t, ev, cause, 1); err != nil {
			b.logger.Warn("parking an event the batch passed over failed: its document's events go through one at a time",
				"projection", p.Name(), "document", d.id, "err", err)
			return false
		}
		results[j] = b.result(t, ev, Applied, 0, cause)
	}
	return true
}

// putGuarded writes puts with one bulk write; the events of the documents
// written get their results, the others go through the per-event path.
func (b *batchRun) putGuarded(ctx context.Context, p Definition, puts []driver.Put, docs []*docEvents, results [][]Result) (missed []*docEvents) {
	if len(puts) == 0 {
		return nil
	}
	ok, err := b.docsOf(p).PutGuardedMany(ctx, p.Collection(), puts)
	if err != nil {
		b.logger.Warn("batch write failed: its documents' events go through one at a time", "projection", p.Name(), "documents", len(puts), "err", err)
	}
	for k, d := range docs {
		if err == nil && ok[k] {
			b.settleDoc(d, results[k])
		} else {
			missed = append(missed, d)
		}
	}
	return missed
}

// settleDoc gives the events of d their results.
func (b *batchRun) settleDoc(d *docEvents, results []Result) {
	for k, i := range d.idx {
		b.out[i] = append(b.out[i], results[k])
	}
}

// foldVersioned folds events idx of versioned document id on what was read
// of it (cur; found: it exists), as the strategy k would apply them one by
// one: the put that writes them (nil when none changes it: all
// duplicates), and their results. stop is the place in idx of the first
// event the strategy would not simply apply or pass over (a predecessor
// missing, a second creation; or limit, when set), and then put and
// results are those of the events before it; -1 when there is none.
// failed is the place of an event whose step fails, with nothing folded
// (-1: none). firstOf says whether an event is its stream's first for the
// document (see firstHere).
func foldVersioned(k keeper, p Definition, id string, events []Event, idx []int, cur driver.Guarded, found bool,
	firstOf func(Event, map[string]uint64) bool, limit int, passOver bool) (put *driver.Put, results []Result, stop, failed int, passed []int) {
	// The stop first, by the strategy's check alone, so that the handlers
	// run once, on the events before it: a handler may change the state it
	// is given in place (a map's entry), which then holds what it applied.
	verdicts, stop := checkStop(k, p, events, idx, cur, found, firstOf)
	if limit >= 0 && (stop < 0 || limit < stop) {
		stop = limit
	}
	folded := idx
	if stop >= 0 {
		folded = idx[:stop]
	}
	t := tallyOf(k, stored{found: found, meta: cur.Meta})
	var state any
	if found {
		state = cur.State
	}
	changed := false
	for j, i := range folded {
		ev, v := events[i], verdicts[j]
		if v == duplicate {
			results = append(results, Result{Projection: p.Name(), Document: id, Outcome: Duplicate})
			continue
		}
		from := state
		if v == create {
			from = nil
		}
		next, err := p.applyTo(from, ev)
		switch {
		case err != nil && passOver && ev.Payload == nil && ev.undecodable != nil:
			// It does not decode, and no handler ran: under skip and park
			// the document moves past it with its state as it is (the
			// zero state for a creation), as the gate moves it.
			if v == create || state == nil {
				state = p.newState()
			}
			changed = true
			t.record(ev)
			passed = append(passed, len(results))
			results = append(results, Result{Projection: p.Name(), Document: id, Outcome: Skipped, Err: err})
			continue
		case err != nil:
			// Under its failure policy, one at a time; nothing folded here,
			// for the steps before it may have changed the state read.
			return nil, nil, -1, j, nil
		}
		state, changed = next, true
		t.record(ev)
		results = append(results, Result{Projection: p.Name(), Document: id, Outcome: Applied})
	}
	if !changed {
		return nil, results, stop, -1, nil
	}
	expected := int64(-1)
	if found {
		expected = cur.Meta.Version
	}
	meta := t.meta()
	meta.Version = cur.Meta.Version + 1
	return &driver.Put{ID: id, Expected: expected, Meta: meta, State: state}, results, stop, -1, passed
}

// checkStop returns the verdicts of strategy k, by its check alone, on the
// events of document cur up to stop, the place in idx of the first it
// would not simply apply or pass over (a predecessor missing, a second
// creation); -1 when there is none. firstOf is as foldVersioned takes it.
func checkStop(k keeper, p Definition, events []Event, idx []int, cur driver.Guarded, found bool,
	firstOf func(Event, map[string]uint64) bool) (verdicts []verdict, stop int) {
	t := tallyOf(k, stored{found: found, meta: cur.Meta})
	verdicts = make([]verdict, 0, len(idx))
	for j, i := range idx {
		ev := events[i]
		v, err := t.check(ev, p.creates(ev))
		if err == nil && v == wait && firstHere(t, ev, firstOf) {
			v = apply
		}
		switch {
		case err != nil, v != apply && v != create && v != duplicate:
			return verdicts, j
		case v != duplicate:
			t.record(ev)
		}
		verdicts = append(verdicts, v)
	}
	return verdicts, -1
}

// firstHere reports whether ev, which waits for its stream's previous
// event, is the first of its stream for the document of tally t, as it
// folds: firstOf (the engine's firstOfStream) on the revisions the tally
// holds.
func firstHere(t tally, ev Event, firstOf func(Event, map[string]uint64) bool) bool {
	rt, ok := t.(*revisionTally)
	return ok && firstOf != nil && firstOf(ev, rt.d.meta.Revisions)
}

// batchesWith reports whether a batch can fold the documents of every
// projection on store: gated ones with a [driver.BatchStore], versioned
// ones of the strategies [guardedBatches] names with a
// [driver.GuardedBatchStore].
func batchesWith(store driver.Store, keepers map[string]keeper) bool {
	_, bulk := store.(driver.BatchStore)
	_, guarded := store.(driver.GuardedBatchStore)
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

// firstOfStream reports whether ev, which waits for its stream's previous
// event in a document of p whose revision map is revs, follows on from what
// the document has of the stream: the engine saw each of the stream's
// revisions between them (from the first, when the document has not seen
// the stream) declined by p's router and of a type p has no handler for
// (noteSeen), which the document moves past. The batch (firstHere) and the
// per-event path ask it alike. The per-event path would otherwise move past
// such a hole after reading the stream (hole.notOurs), one event at a time:
// a summary whose streams interleave events it handles with events it does
// not (an order's fills between its refill requests) was read and written
// event by event, tens of times slower.
func (e *Engine) firstOfStream(p Definition, ev Event, revs map[string]uint64) bool {
	if _, ok := e.keeperOf(p).(revisionMap); !ok || ev.StreamRevision == 0 {
		return false
	}
	kept, ok := e.follows.Peek(followKey{p.Name(), ev.StreamID, ev.StreamRevision})
	if !ok {
		return false
	}
	have, seen := revs[streamKey(ev.StreamID)]
	if !seen {
		return kept < 0
	}
	return kept <= int64(have)
}

// streamSeen is how far the engine has seen a stream routed for a
// projection: next, the revision after the last one seen in order, and
// kept, the last of them not to be passed over (-1: none).
type streamSeen struct {
	next uint64
	kept int64
}

// followKey names an event of a stream, for a projection.
type followKey struct {
	projection, stream string
	revision           uint64
}

// noteSeen notes ev as p's router routed it (declined: it names no
// document), when p is under RevisionMap, in the order of its stream's
// revisions: an event declined and of a type p has no handler for (and
// does not fail) can be passed over; any other, and any revision not seen
// (the engine saw the stream from a later one, or out of order), cannot.
// Of an event that cannot, it keeps the last revision before it that
// cannot either: a document of p that has the stream up to that one (or
// has not seen the stream, when there is none) then takes the event as
// following on (firstOfStream), as the per-event path does once it has
// read the stream (a trip's request, which names no driver, before its
// acceptance, which does: every trip's, in a driver summary). Each event is
// routed twice where a runner spreads events by document (by its reader,
// then by the batch): the second time it is seen already. A declined event
// of a tied stream is noted for its tie too (noteDeclined), under any
// strategy.
func (e *Engine) noteSeen(p Definition, ev Event, declined bool) {
	if declined {
		e.noteDeclined(p, ev)
	}
	if _, ok := e.keeperOf(p).(revisionMap); !ok {
		return
	}
	k, n := tieKey{p.Name(), ev.StreamID}, ev.StreamRevision
	st, ok := e.streamsSeen.Peek(k)
	if !ok {
		st = streamSeen{kept: -1}
	}
	if n < st.next {
		return // seen
	}
	if n > st.next {
		st.kept = int64(n) - 1 // revisions not seen cannot be passed over
	}
	if !declined || handlesType(p, ev.Payload) || failsUnhandled(p, ev) {
		e.follows.Add(followKey{p.Name(), ev.StreamID, n}, st.kept)
		st.kept = int64(n)
	}
	st.next = n + 1
	e.streamsSeen.Add(k, st)
}
