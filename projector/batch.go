package projector

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/revgate/projector/projector/driver"
)

// batchable reports whether HandleBatch can fold events of every projection
// (found once by [NewEngine]): gated documents on a store that writes in
// bulk, versioned ones of a strategy whose check is a pure function of the
// document's meta ([guardedBatches]).
func (e *Engine) batchable() bool { return e.batching }

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
// A node's record about a stream (a deletion), an event whose payload does
// not decode and an event a projection cannot route are handled alone,
// through the gate and its policies, between the batches of the events
// before and after it; except an event that does not decode of a document
// fed by many streams under [Skip] or [Park], which its document's fold
// passes over (recorded first), as the gate would.
//
// A failed event stops a runner, so once one fails, the events still to go
// through the gate are left alone, with results that are [Failed] with
// [ErrNotHandled], instead of each waiting out its retry policy for a
// predecessor that will not come.
func (e *Engine) HandleBatch(ctx context.Context, events []Event) [][]Result {
	return e.handleBatch(ctx, events, nil)
}

// handleBatch is HandleBatch with the documents events were routed to when
// they were spread over workers (routes[i], "" where not; see
// partitionKey), so that they are not routed again. routes may be nil.
func (e *Engine) handleBatch(ctx context.Context, events []Event, routes []string) [][]Result {
	out := make([][]Result, len(events))
	defer func() {
		for i, ev := range events {
			e.countAhead(ev, out[i])
		}
	}()
	ctx, span := e.startBatch(ctx, len(events))
	defer span.End()
	b := &batchRun{Engine: e, events: events, out: out}
	if !e.batchable() || len(events) < 2 {
		b.handleEach(ctx)
		return out
	}
	if records := deletionRecords(events); len(records) > 0 {
		if i, ok := writtenAgain(events, records); ok {
			// A stream deleted and written again within the batch: the
			// record between its events splits the batch.
			e.handleAround(ctx, events, routes, i, out)
			return out
		}
		e.handleRecordsAfter(ctx, events, routes, records, out)
		return out
	}
	b.decoded, b.ready = slices.Clone(events), make([]bool, len(events))
	b.ids = make([][]string, len(e.projections))
	for k, p := range e.projections {
		b.ids[k] = make([]string, len(events))
		folds := b.streamFolds(p)
		for i := range events {
			if routes != nil && routes[i] != "" {
				b.ids[k][i] = routes[i] // an engine that spreads by document has one projection
				continue
			}
			if folds {
				// An event a stream fold read routes where it did then:
				// no need to decode it (most events of a catch-up are).
				if id, ok := b.known.route(p.Collection(), events[i].StreamID, events[i].StreamRevision); ok {
					b.ids[k][i] = id
					continue
				}
			}
			ev, err := b.decode(i)
			if err != nil {
				// A payload that does not decode: through the gate, which
				// applies the failure policy; except for a document fed by
				// many streams under skip or park, whose fold passes over
				// it (foldVersioned), where its router sends it without
				// reading it (as when a runner routed it).
				_, gated := e.keeperOf(p).(streamRevision)
				id, ok, rerr := e.targetUndecoded(ctx, p, events[i], ev)
				if gated || !e.movesPast(p) || rerr != nil {
					e.handleAround(ctx, events, routes, i, out)
					return out
				}
				if ok {
					b.ids[k][i] = id
				}
				continue
			}
			id, ok, err := e.route(ctx, p, ev)
			if err != nil {
				// An event a projection cannot route: through the gate,
				// which applies the failure policy.
				e.handleAround(ctx, events, routes, i, out)
				return out
			}
			if ok {
				b.ids[k][i] = id
			}
			e.noteSeen(p, ev, !ok)
		}
	}
	for k, p := range e.projections {
		b.project(ctx, p, b.ids[k])
	}
	return out
}

// deletionRecords returns the places of the node's records about deleted
// streams in events.
func deletionRecords(events []Event) []int {
	var records []int
	for i, ev := range events {
		if isDeletionRecord(ev) {
			records = append(records, i)
		}
	}
	return records
}

// writtenAgain returns the first of records whose deleted stream has events
// after it in events (written again after a soft delete).
func writtenAgain(events []Event, records []int) (int, bool) {
	for _, i := range records {
		d, ok := deletionOf(events[i])
		if !ok {
			continue
		}
		for _, ev := range events[i+1:] {
			if ev.StreamID == d.stream && !isDeletionRecord(ev) {
				return i, true
			}
		}
	}
	return 0, false
}

// handleRecordsAfter handles the batch's events but its deletion records
// (records) as a batch, then each record through the gate, which applies
// the projections' deletion policies: a record is about its stream's
// documents only, whose events in the batch all come before it, so the
// rest of the batch need not wait for it. Once an event fails, the records
// are left alone ([ErrNotHandled]), to come again.
func (e *Engine) handleRecordsAfter(ctx context.Context, events []Event, routes []string, records []int, out [][]Result) {
	rest := make([]Event, 0, len(events)-len(records))
	var restRoutes []string
	at := make([]int, 0, len(rest)) // rest[j] is events[at[j]]
	for i, ev := range events {
		if slices.Contains(records, i) {
			continue
		}
		rest, at = append(rest, ev), append(at, i)
		if routes != nil {
			restRoutes = append(restRoutes, routes[i])
		}
	}
	results := e.handleBatch(ctx, rest, restRoutes)
	for j, i := range at {
		out[i] = results[j]
	}
	failed := anyFailed(results...)
	for _, i := range records {
		if failed {
			out[i] = []Result{{Outcome: Failed, Err: ErrNotHandled}}
			continue
		}
		out[i], _ = e.Handle(ctx, events[i])
		failed = anyFailed(out[i])
	}
}

// handleAround handles events[i] alone, through Handle, between
// events[:i] and events[i+1:] handled as batches, in that order: one
// event the batch path cannot take (a deletion record, a payload that does
// not decode, an event a projection cannot route) costs a split of the
// batch, not the batch one event at a time. Once an event fails, those
// after it are left alone ([ErrNotHandled]), as HandleBatch leaves them.
func (e *Engine) handleAround(ctx context.Context, events []Event, routes []string, i int, out [][]Result) {
	var before, after []string
	if routes != nil {
		before, after = routes[:i], routes[i+1:]
	}
	copy(out, e.handleBatch(ctx, events[:i], before))
	failed := anyFailed(out[:i]...)
	if !failed {
		out[i], _ = e.Handle(ctx, events[i])
		failed = anyFailed(out[i])
	}
	rest := out[i+1:]
	if failed {
		if !anyFailed(out[i]) {
			rest = out[i:]
		}
		for j := range rest {
			rest[j] = []Result{{Outcome: Failed, Err: ErrNotHandled}}
		}
		return
	}
	copy(rest, e.handleBatch(ctx, events[i+1:], after))
}

// anyFailed reports whether any of the results lists has a failed result.
func anyFailed(lists ...[]Result) bool {
	for _, rs := range lists {
		for _, r := range rs {
			if r.Outcome == Failed {
				return true
			}
		}
	}
	return false
}

// batchRun is one HandleBatch call: its events, their results, and whether
// one has failed.
type batchRun struct {
	*Engine
	events  []Event
	decoded []Event                             // the events, with their payloads decoded where ready
	ready   []bool                              // which of decoded have their payloads (see decode)
	ids     [][]string                          // per projection, the document of each event ("": none)
	firstOf func(Event, map[string]uint64) bool // of the projection being folded (firstHere)
	failAt  map[string]int                      // by document, the event whose step failed in the round before
	out     [][]Result
	failed  bool
	clock   *storeClock // of the round of a projection's documents in progress, when traced
}

// heldHere reports whether d's document may be held ([Hold]): its events
// then go through the gate. A failed look counts as held: the gate looks
// again, and fails the events.
func (b *batchRun) heldHere(ctx context.Context, p Definition, d *docEvents) bool {
	held, err := b.maybeHeld(ctx, target{p, d.id})
	return held || err != nil
}

// decode returns the batch's event i with its payload decoded, decoding it
// the first time. An event that does not decode comes back with the zero
// value of its type as its payload, as the gate takes it.
func (b *batchRun) decode(i int) (Event, error) {
	if b.ready[i] {
		return b.decoded[i], nil
	}
	d, err := b.registry.Decode(b.events[i])
	if err != nil {
		// Kept as Decode gives it (no payload, its failure), for a fold
		// that passes over it (foldVersioned) to fail its step as the gate
		// does; returned with the zero value of its type as its payload.
		b.decoded[i] = d
		d.Payload, _ = b.registry.zero(d)
		return d, err
	}
	b.decoded[i], b.ready[i] = d, true
	return d, nil
}

// decodeAll decodes the events of d, and reports whether they all decode.
func (b *batchRun) decodeAll(d *docEvents) bool { return b.firstUndecodable(d) < 0 }

// docEvents are the events of a batch that feed one document, in order.
type docEvents struct {
	id  string
	idx []int // into the batch's events
	// behind is the failure of an event of the document in flight before
	// the batch's (enter): its first event fails with it.
	behind error
}

// folded is a document's events folded in memory: the write that stores
// them, and their results; fallback when they must go through the gate.
type folded struct {
	write    driver.Write
	changed  bool
	results  []Result
	fallback bool
}

// project handles the batch's events of projection p: one read, a fold per
// document, one bulk write.
func (b *batchRun) project(ctx context.Context, p Definition, ids []string) {
	if _, gated := b.keeperOf(p).(streamRevision); !gated {
		b.projectGuarded(ctx, p, ids)
		return
	}
	docs := b.documents(ids)
	if b.streamFolds(p) {
		docs = b.skipKnown(ctx, p, docs)
	}
	if len(docs) == 0 {
		return
	}
	r := b.beginRound()
	// The documents go through the gate's queue, in the order of their ids
	// (so that two batches never wait for each other in a circle): an event
	// of the same document with a lower revision in flight elsewhere in
	// this engine, from Handle or another batch, is done before this batch
	// reads the document. Then the batch takes the documents' locks, which
	// every read-decide-write of the gate takes too, while it reads, folds
	// and writes them: an event with a higher revision in flight (a
	// redelivery, or one waiting for its predecessor) cannot write the
	// document from the revision the batch read.
	held, slow := b.enter(ctx, p, docs)
	var through []*docEvents // to go through the gate once the batch has let go
	defer func() {
		passedOn := make(map[string]bool, len(through))
		for _, d := range through {
			passedOn[d.id] = true
		}
		for id, tk := range held {
			if passedOn[id] {
				// Its events go through the gate, each with a ticket of
				// its own: the batch's says nothing of the document.
				b.queue.leave(tk, false, errPassedOn)
			} else {
				b.queue.leave(tk, true, nil)
			}
		}
		for _, d := range append(slow, through...) {
			b.slowDoc(ctx, p, d)
		}
	}()
	defer r.end() // before the gate takes the documents passed on
	keep := docs[:0]
	for _, d := range docs {
		switch {
		case held[d.id] == nil:
		case b.holding(ctx, target{p, d.id}) && b.heldHere(ctx, p, d):
			through = append(through, d) // the gate holds its events
			continue
		case !b.decodeAll(d):
			// Routed by a stream fold, which decoded them, but they do not
			// decode now: through the gate, with its failure policy.
			through = append(through, d)
		default:
			keep = append(keep, d)
		}
	}
	docs = keep
	if len(docs) == 0 {
		return
	}
	unlock := b.lockDocs(p, docs)
	through = append(through, b.foldGated(ctx, p, docs, r)...)
	unlock()
}

// foldGated reads docs with one query, folds each one's events (and the
// events of its stream after them, when the engine folds streams) and
// writes the changed ones with one bulk write, under the documents' locks;
// it sets the results of the events it settles, and returns the documents
// whose events must go through the gate (nothing written of them).
func (b *batchRun) foldGated(ctx context.Context, p Definition, docs []*docEvents, r round) (through []*docEvents) {
	loaded, read, err := b.load(ctx, p, docs)
	if err != nil {
		b.logger.Warn("batch read failed: its documents go through the gate one event at a time",
			"projection", p.Name(), "documents", read, "err", err)
		return docs
	}
	folds := make([]*folder, len(docs))
	var extend []*folder
	for j, d := range docs {
		cur, found := loaded[d.id]
		fd := b.fold(p, d, cur, found)
		folds[j] = fd
		if !fd.f.fallback && fd.f.changed && b.streamFolds(p) {
			extend = append(extend, fd)
		}
	}
	b.extend(ctx, p, extend)
	var writes []driver.Write
	var writeDocs []*docEvents
	for j, d := range docs {
		cur := loaded[d.id]
		fd := folds[j]
		f := fd.done()
		switch {
		case f.fallback, fd.broken, !f.changed && cur.Cached:
			// Through the gate. (A document whose events are all
			// duplicates by the cache's word only is read from the server
			// there: one deleted or rebuilt under the projector would
			// otherwise lose them.)
			through = append(through, d)
			continue
		case f.changed:
			writes, writeDocs = append(writes, f.write), append(writeDocs, d)
		}
		for k, i := range d.idx {
			b.out[i] = append(b.out[i], f.results[k])
		}
	}
	missed := b.write(ctx, p, writes, writeDocs)
	through = append(through, missed...)
	r.folded(ctx, p, docs, through, folds)
	for j, d := range docs {
		switch fd := folds[j]; {
		case fd.extended > 0 && !fd.broken && !slices.Contains(missed, d):
			b.known.wrote(docKey{p.Collection(), d.id}, fd.rev, b.highest(d))
			b.known.folded(p.Collection(), fd.f.write.Stream, d.id, fd.readFrom, fd.rev)
		case b.streamFolds(p):
			b.knowAhead(p, d, loaded, fd)
		}
	}
	return through
}

// knowAhead notes a document the server holds past every event of d the
// batch has (all duplicates): a stream fold wrote it ahead of its events'
// delivery, in an earlier run or another process (a segment taken over).
// Its stream's later events up to that revision then pass as duplicates
// (skipKnown) instead of each reading it again through the gate.
func (b *batchRun) knowAhead(p Definition, d *docEvents, loaded map[string]driver.Loaded, fd *folder) {
	cur, found := loaded[d.id]
	if !found || cur.Cached || fd.f.changed || fd.f.fallback || fd.broken ||
		cur.Stream != b.events[d.idx[0]].StreamID || cur.Revision <= b.highest(d) {
		return
	}
	b.known.wrote(docKey{p.Collection(), d.id}, cur.Revision, cur.Revision)
}

// enter takes the batch's place in the queue of each document, in the order
// of their ids, waiting for what is in flight before it. A document behind
// an event that failed in flight is not held: it is slow, with the failure
// (behind), which its first event fails with (slowDoc).
func (b *batchRun) enter(ctx context.Context, p Definition, docs []*docEvents) (held map[string]*ticket, slow []*docEvents) {
	sorted := slices.Clone(docs)
	slices.SortFunc(sorted, func(x, y *docEvents) int { return strings.Compare(x.id, y.id) })
	held = make(map[string]*ticket, len(docs))
	for _, d := range sorted {
		tk := b.queue.enter(docKey{p.Collection(), d.id}, b.lowest(d))
		if err := b.queue.wait(ctx, b.stop, tk); err != nil {
			b.queue.leave(tk, false, err) // what is behind it learns of the failure too
			slow = append(slow, &docEvents{id: d.id, idx: d.idx, behind: err})
			continue
		}
		held[d.id] = tk
	}
	return held, slow
}

// documents groups the batch's events of a projection by document, in
// order, given the document of each event ("": none).
func (b *batchRun) documents(ids []string) []*docEvents {
	var docs []*docEvents
	byID := map[string]*docEvents{}
	for i, id := range ids {
		if id == "" {
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
	return docs
}

// load reads the documents of docs with one query, but those whose first
// event here creates them: most likely new, they are not read, and are
// written with an insert, which fails if they exist after all (a
// redelivery), and then their events go through the gate.
// It returns how many documents it read.
func (b *batchRun) load(ctx context.Context, p Definition, docs []*docEvents) (map[string]driver.Loaded, int, error) {
	ids := make([]string, 0, len(docs))
	for _, d := range docs {
		if !p.creates(b.decoded[d.idx[0]]) {
			ids = append(ids, d.id)
		}
	}
	if len(ids) == 0 {
		return map[string]driver.Loaded{}, 0, nil
	}
	loaded, err := b.docsOf(p).LoadMany(ctx, p.Collection(), ids, p.newState)
	return loaded, len(ids), err
}

// fold folds the events of document d on cur (found: it was read), as the
// gate would apply them one by one (the strategy's check: the revision
// gate, [decide]); any event the gate would not simply apply or skip sends
// the document through the gate.
func (b *batchRun) fold(p Definition, d *docEvents, cur driver.Loaded, found bool) *folder {
	fd := newFolder(b.keeperOf(p), p, d.id, cur, found)
	for _, i := range d.idx {
		switch fd.step(b.decoded[i]) {
		case duplicate:
			fd.f.results = append(fd.f.results, Result{Projection: p.Name(), Document: d.id, Outcome: Duplicate})
		case apply:
			fd.f.results = append(fd.f.results, Result{Projection: p.Name(), Document: d.id, Outcome: Applied})
		default:
			fd.f.fallback = true
			return fd
		}
	}
	return fd
}

// folder folds events on one document in memory, as the gate would apply
// them.
type folder struct {
	k     keeper
	p     Definition
	f     folded
	state any
	rev   uint64
	found bool
	// extended counts the events folded from the stream after the batch's
	// ([StreamHistory]), read from revision readFrom on; broken: that read
	// failed half-way, with readErr. ahead: those of them whose metadata
	// carries a trace context, while tracing (the fold's span links them).
	extended int
	ahead    []aheadEvent
	readFrom uint64
	broken   bool
	readErr  error
	// spoiled: a handler failed on the state, which it may have changed in
	// place: nothing folded here may be written.
	spoiled bool
}

func newFolder(k keeper, p Definition, id string, cur driver.Loaded, found bool) *folder {
	return &folder{k: k, p: p, f: folded{write: driver.Write{ID: id, From: cur.Revision, Stream: cur.Stream}},
		state: cur.State, rev: cur.Revision, found: found}
}

// step folds ev: apply (applied, a creation included), duplicate (nothing
// to do), or wait for anything the gate would not simply apply (a missing
// predecessor, a second creation, a failing step): the document then goes
// through the gate.
func (fd *folder) step(ev Event) verdict {
	read := stored{found: fd.found, rev: fd.rev, stream: fd.f.write.Stream}
	v, _ := fd.k.check(read, ev, fd.p.creates(ev))
	switch v {
	case duplicate:
		return duplicate
	case create:
		next, err := fd.p.applyTo(nil, ev)
		if err != nil {
			fd.spoiled = true
			return wait
		}
		fd.state, fd.found, fd.f.write.Insert = next, true, true
	case apply:
		next, err := fd.p.applyTo(fd.state, ev)
		if err != nil {
			fd.spoiled = true
			return wait
		}
		fd.state = next
	default:
		// A predecessor is missing (the gate waits for it), or a second
		// creation (ErrAlreadyCreated, under the failure policy).
		return wait
	}
	to := fd.k.record(read, ev)
	fd.rev, fd.f.write.Stream, fd.f.changed = to.rev, to.stream, true
	return apply
}

// done is the fold's write and results.
func (fd *folder) done() folded {
	fd.f.write.Revision, fd.f.write.State = fd.rev, fd.state
	return fd.f
}

// write writes the folded documents with one bulk write, and returns those
// whose write missed (another writer moved them), with their batch results
// dropped: their events go through the gate.
func (b *batchRun) write(ctx context.Context, p Definition, writes []driver.Write, docs []*docEvents) (missed []*docEvents) {
	if len(writes) == 0 {
		return nil
	}
	ok, err := b.docsOf(p).WriteMany(ctx, p.Collection(), writes)
	if err != nil {
		b.logger.Warn("batch write failed: its documents go through the gate one event at a time",
			"projection", p.Name(), "documents", len(writes), "err", err)
	}
	for k, d := range docs {
		if err == nil && ok[k] {
			continue
		}
		for _, i := range d.idx {
			b.out[i] = slices.DeleteFunc(b.out[i], func(r Result) bool { return r.Projection == p.Name() })
		}
		missed = append(missed, d)
	}
	return missed
}

// handleEach handles every event alone, through Handle, until one fails.
func (b *batchRun) handleEach(ctx context.Context) {
	for i := range b.events {
		if b.failed {
			b.out[i] = []Result{{Outcome: Failed, Err: ErrNotHandled}}
			continue
		}
		b.out[i], _ = b.Handle(ctx, b.events[i])
		b.note(b.out[i]...)
	}
}

// slowDoc handles the events of document d of p one by one (through the
// gate, or its strategy's read-decide-write), in order, until an event fails.
func (b *batchRun) slowDoc(ctx context.Context, p Definition, d *docEvents) {
	t := target{p, d.id}
	if !b.failed && d.behind == nil && b.holdsAll(ctx, t, d) {
		return
	}
	for k, i := range d.idx {
		res := Result{Projection: p.Name(), Document: d.id, Outcome: Failed, Err: ErrNotHandled}
		switch {
		case b.failed:
		case k == 0 && d.behind != nil:
			ev, _ := b.decode(i)
			res = b.tracedResult(ctx, t, ev, b.fail(t, ev, failure{err: d.behind, wanted: -1, seen: -1}))
			b.note(res)
		default:
			ev, err := b.decode(i)
			if err != nil && !handlesType(p, ev.Payload) {
				err = nil // not read here: passed over, as in Handle
			}
			res = b.traced(ctx, t, ev, func(ctx context.Context, e *Engine) Result { return e.handleOne(ctx, t, ev, err) })
			b.note(res)
		}
		b.out[i] = append(b.out[i], res)
	}
}

// holdsAll holds every event of d behind the event that holds its
// document, a summary's, at once ([Engine.holdAllBehind]), and reports
// whether it did.
func (b *batchRun) holdsAll(ctx context.Context, t target, d *docEvents) bool {
	evs := make([]Event, len(d.idx))
	for k, i := range d.idx {
		evs[k], _ = b.decode(i)
	}
	results, ok := b.holdAllBehind(ctx, t, evs)
	if !ok {
		return false
	}
	for k, i := range d.idx {
		b.out[i] = append(b.out[i], results[k])
		b.note(results[k])
	}
	return true
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
