package projector

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
)

// StreamHistory is a [StreamReader] that also reads a stream's events. With
// one ([WithStreamReader]), batched catch-up folds a document under the
// revision gate from its stream's whole history the first time a batch
// meets it: the events after the batch's are read from the stream (which the
// event store indexes) and folded in memory, and the document is written
// once, at the stream's last revision. The engine remembers that revision,
// so the later events of the stream that the catch-up passes over are
// duplicates without a read or a write. However the streams interleave in
// the log, each document is then written about once. An event delivered
// before its predecessors (out of order, to competing consumers) has them
// read from its stream and folded with it, instead of waiting for them,
// where each would simply apply; they count as applied when they come.
// That is so under the revision gate and under [RevisionMap] (the events of
// the stream between the revision the document has of it and the event).
type StreamHistory interface {
	StreamReader
	// ReadStream calls each with the events of stream from revision from
	// on, in order, until the stream's end or until each returns an error:
	// [ErrStopRead] ends the read without an error; any other is returned.
	// A stream with no events to read (never written, deleted, tombstoned)
	// ends the read with no events or with an error that wraps
	// [ErrStreamDeleted]. An event's Position may be unknown (0, or
	// 2^64-1 as a node's stream reads give it).
	ReadStream(ctx context.Context, stream string, from uint64, each func(Event) error) error
}

// ErrStopRead, returned by the callback of [StreamHistory.ReadStream], ends
// the read early without an error.
var ErrStopRead = errors.New("stop reading")

// defaultKnownDocuments is how many documents' written revisions an engine
// remembers (see [StreamHistory]); about 100 bytes each.
const defaultKnownDocuments = 1 << 16

// WithKnownDocuments sets how many documents' written revisions (and the
// stretches of their streams the folds read) the engine remembers
// (65,536 by default, about 100 bytes each): the memory of stream folds is
// bounded by it, not by the number of documents. A document it forgot has
// the catch-up's later events of its stream read and decoded again, and
// counted as duplicates. Under [RevisionMap] an entry is a document and
// one of its streams, noted where an event came before its predecessors
// (see [StreamHistory]); it also bounds, under RevisionMap, the streams and
// routed events the engine remembers the declined revisions of, so that a
// document passes over them without reading its stream (past the bound,
// such a hole is read from the stream, as before). 0 is the default;
// [NewEngine] refuses less.
func WithKnownDocuments(n int) Option { return func(e *Engine) { e.knownSize = n } }

// WithoutStreamFolds turns folding from a stream's history off: batches fold
// only the events they hold (for comparisons, and for a store that others
// edit under the projector).
func WithoutStreamFolds() Option { return func(e *Engine) { e.noFolds = true } }

// StreamsFolded says how many documents batches have folded from their
// streams' histories (read from the event store) since the engine was made.
func (e *Engine) StreamsFolded() uint64 { return e.folded.Load() }

// streamFolds reports whether batches fold p's documents from their
// streams. A projection that removes the documents of deleted streams
// ([RemoveDocument]) folds only what its batches hold: a stream soft-deleted
// and written again reads on from its old events to its new ones, with
// nothing of the deletion between them, where the document must be removed
// and the new events fold on nothing.
func (e *Engine) streamFolds(p Definition) bool {
	_, gated := e.keeperOf(p).(streamRevision)
	return !e.unordered && gated && e.fillsGaps(p)
}

// fillsGaps reports whether an event of p delivered before its predecessors
// has them read from its stream and folded with it ([Engine.fillGap],
// [Engine.fillGapGuarded]): a stream fold that needs no log order, so also
// for deliveries out of it; under the revision gate, and under a revision
// map, which gates each stream as the gate does.
func (e *Engine) fillsGaps(p Definition) bool {
	if e.streamHistory() == nil || e.noFolds || p.deletionPolicy() == RemoveDocument {
		return false
	}
	switch e.keeperOf(p).(type) {
	case streamRevision, revisionMap:
		return true
	}
	return false
}

// aheadKey is where [known] notes the revisions of stream that a gap's
// fill applied to document id of p before their delivery: under the
// revision gate the document's own key (one stream a document); under a
// revision map, one for the document and the stream, as each of its
// streams has revisions of its own.
func (e *Engine) aheadKey(p Definition, id, stream string) docKey {
	if _, ok := e.keeperOf(p).(revisionMap); ok {
		return docKey{p.Collection(), id + "\x00" + stream}
	}
	return docKey{p.Collection(), id}
}

// known is the revisions the engine wrote documents at, by stream folds: a
// bounded cache (the least recently used are forgotten, and their events go
// through the batch's read again). With each it keeps how far the
// catch-up has delivered the document's events: the events the fold applied
// ahead of their delivery are applied when they come, the others
// (delivered again) duplicates.
//
// With each document it keeps the span of its stream the fold read: every
// event of that span routes to the document (the fold stopped at the first
// that did not), so a batch routes them again without decoding their
// payloads.
type known struct {
	// mu makes reading a document's entry, passing its events over and
	// noting their delivery one step: a batch and an event handled alone (a
	// redelivery to another consumer on the same engine) passing the same
	// event at once must not both find it undelivered and both say it was
	// applied.
	mu    sync.Mutex
	cache *lru.Cache[docKey, knownAt]
	spans *lru.Cache[spanKey, span]
}

// spanKey is a stream as a projection's collection sees it.
type spanKey struct{ collection, stream string }

// span is a stretch of a stream's revisions, from to to, whose events all
// route to document id.
type span struct {
	id       string
	from, to uint64
}

// knownAt is a document's written revision, and the last revision of its
// stream the catch-up delivered; ahead are stretches below delivered that a
// gap's fill applied before their delivery (see [Engine.fillGap]).
type knownAt struct {
	wrote, delivered uint64
	ahead            []revRange
}

// revRange is the revisions from to to of a stream.
type revRange struct{ from, to uint64 }

// take removes r from the ranges, and reports whether one held it.
func take(ranges []revRange, r uint64) ([]revRange, bool) {
	for i, g := range ranges {
		switch {
		case r < g.from || r > g.to:
			continue
		case g.from == g.to:
			return append(ranges[:i:i], ranges[i+1:]...), true
		case r == g.from:
			ranges[i].from++
		case r == g.to:
			ranges[i].to--
		default:
			rest := append([]revRange{{from: g.from, to: r - 1}, {from: r + 1, to: g.to}}, ranges[i+1:]...)
			return append(ranges[:i:i], rest...), true
		}
		return ranges, true
	}
	return ranges, false
}

func newKnown(size int) *known {
	c, _ := lru.New[docKey, knownAt](max(size, 1))
	sp, _ := lru.New[spanKey, span](max(size, 1))
	return &known{cache: c, spans: sp}
}

// route returns the document the event at revision rev of stream routes to
// in the projection of collection, if a stream fold read that event.
func (n *known) route(collection, stream string, rev uint64) (string, bool) {
	sp, ok := n.spans.Peek(spanKey{collection, stream})
	if !ok || rev < sp.from || rev > sp.to {
		return "", false
	}
	return sp.id, true
}

// folded notes that a stream fold read revisions from to to of stream, all
// routed to document id.
func (n *known) folded(collection, stream, id string, from, to uint64) {
	n.spans.Add(spanKey{collection, stream}, span{id: id, from: from, to: to})
}

// wrote notes that document k was written at revision rev, its events
// delivered up to delivered.
func (n *known) wrote(k docKey, rev, delivered uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, _ := n.cache.Peek(k)
	n.cache.Add(k, knownAt{wrote: rev, delivered: delivered, ahead: at.ahead})
}

// countAhead makes the outcome of ev Applied in each result rs that found
// it a duplicate where a gap's fill applied it before it came (see
// [Engine.fillGap]): this is its first delivery. It runs once per delivery,
// on the results [Engine.Handle] and a batch return, so that a result the
// engine worked out and then set aside (a document sent through the gate
// after its batch's fold) takes nothing.
func (e *Engine) countAhead(ev Event, rs []Result) {
	if isDeletionRecord(ev) {
		return
	}
	for i := range rs {
		if rs[i].Outcome != Duplicate || rs[i].Document == "" {
			continue
		}
		if p := e.projection(rs[i].Projection); p != nil && e.known.takeAhead(e.aheadKey(p, rs[i].Document, ev.StreamID), ev.StreamRevision) {
			rs[i].Outcome = Applied
		}
	}
}

// takeAhead reports whether a gap's fill applied revision rev of document k
// before its delivery, and notes this one as that delivery: the outcome of
// an event found a duplicate is then Applied.
func (n *known) takeAhead(k docKey, rev uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, ok := n.cache.Peek(k)
	if !ok || len(at.ahead) == 0 {
		return false
	}
	var took bool
	if at.ahead, took = take(at.ahead, rev); took {
		n.cache.Add(k, at)
	}
	return took
}

// filled notes that document k was written at revision rev, delivered,
// with the revisions from to rev-1 applied before their delivery (a gap's
// fill): each counts as applied on its first delivery.
// What a stream fold applied ahead and was not delivered yet (past its
// delivered mark, up to what it wrote) stays to be counted so too.
func (n *known) filled(k docKey, from, rev uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, had := n.cache.Get(k)
	at.ahead = slices.Clone(at.ahead)
	if had && at.delivered < at.wrote && at.wrote < from {
		at.ahead = append(at.ahead, revRange{from: at.delivered + 1, to: at.wrote})
	}
	if from < rev {
		at.ahead = append(at.ahead, revRange{from: from, to: rev - 1})
	}
	at.wrote, at.delivered = max(at.wrote, rev), max(at.delivered, rev)
	n.cache.Add(k, at)
}

// pass gives out(j, o) the outcome of the delivery of each revision rev(j),
// j < count, of document k that a stream fold wrote it past: applied on its
// first delivery (the fold applied it ahead), a duplicate after; and it
// notes the deliveries. It returns the revision the fold wrote (out is not
// called for a revision past it: the caller handles that one), and false
// when nothing is known of k. Reading, passing and noting are one step.
func (n *known) pass(k docKey, count int, rev func(j int) uint64, out func(j int, o Outcome)) (wrote uint64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, ok := n.cache.Get(k)
	if !ok {
		return 0, false
	}
	delivered, changed := at.delivered, false
	for j := range count {
		var ahead bool
		switch r := rev(j); {
		case r > at.wrote:
		case r > delivered:
			delivered, changed = r, true
			out(j, Applied)
		default:
			if at.ahead, ahead = take(at.ahead, r); ahead {
				changed = true
				out(j, Applied)
				continue
			}
			out(j, Duplicate)
		}
	}
	if changed {
		at.delivered = delivered
		n.cache.Add(k, at)
	}
	return at.wrote, true
}

func (n *known) forget(k docKey) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cache.Remove(k)
}

// skipKnown gives the events of docs that the engine is known to have
// written their results: applied for an event the stream fold applied
// before it came (its first delivery), a duplicate for one delivered
// before. It returns the documents with events left (past the revision
// known), with those events only.
func (b *batchRun) skipKnown(ctx context.Context, p Definition, docs []*docEvents) []*docEvents {
	keep := docs[:0]
	passed := 0
	for _, d := range docs {
		wrote, ok := b.known.pass(docKey{p.Collection(), d.id}, len(d.idx),
			func(j int) uint64 { return b.events[d.idx[j]].StreamRevision },
			func(j int, o Outcome) {
				i := d.idx[j]
				b.out[i] = append(b.out[i], Result{Projection: p.Name(), Document: d.id, Outcome: o})
			})
		if !ok {
			keep = append(keep, d)
			continue
		}
		rest := make([]int, 0, len(d.idx))
		for _, i := range d.idx {
			if b.events[i].StreamRevision > wrote {
				// Appended after the fold read the stream: the batch
				// folds it.
				rest = append(rest, i)
				continue
			}
			passed++
		}
		if len(rest) > 0 {
			d.idx = rest
			keep = append(keep, d)
		}
	}
	b.tracePassed(ctx, p, passed)
	return keep
}

// knownResult is the result of ev in document t when a stream fold wrote
// the document past it: applied on its first delivery (the fold applied it
// ahead), a duplicate after. ok is false when the engine does not know.
// (The one-event path: a batch passes over such events in skipKnown.)
func (e *Engine) knownResult(t target, ev Event) (Result, bool) {
	if !e.streamFolds(t.p) {
		return Result{}, false
	}
	var r Result
	wrote, ok := e.known.pass(t.key(), 1, func(int) uint64 { return ev.StreamRevision },
		func(_ int, o Outcome) { r = Result{Projection: t.p.Name(), Document: t.id, Outcome: o} })
	if !ok || ev.StreamRevision > wrote {
		return Result{}, false
	}
	return r, true
}

// highest is the highest stream revision of d's events in the batch. (A
// redelivered event may come after later ones: the last event is not
// always the highest.)
func (b *batchRun) highest(d *docEvents) uint64 {
	var rev uint64
	for _, i := range d.idx {
		rev = max(rev, b.events[i].StreamRevision)
	}
	return rev
}

// lowest is the lowest stream revision of d's events in the batch: its
// place in the document's queue.
func (b *batchRun) lowest(d *docEvents) uint64 {
	rev := uint64(math.MaxUint64)
	for _, i := range d.idx {
		rev = min(rev, b.events[i].StreamRevision)
	}
	return rev
}

// foldLimit bounds the stream reads a batch runs at once.
const foldLimit = 8

// extend folds, for each folder, the events of its document's stream after
// the batch's, read from the event store, up to the stream's end or the
// first event the gate would not simply apply (that one and the rest come
// through the catch-up as usual). A read that fails leaves the fold as the
// batch made it.
func (b *batchRun) extend(ctx context.Context, p Definition, folders []*folder) {
	if len(folders) == 0 {
		return
	}
	ctx, span := b.startFoldReads(ctx, p, len(folders))
	defer endFoldReads(span, folders)
	sem := make(chan struct{}, foldLimit)
	var wg sync.WaitGroup
	for _, fd := range folders {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			b.extendOne(ctx, p, fd)
		})
	}
	wg.Wait()
}

func (b *batchRun) extendOne(ctx context.Context, p Definition, fd *folder) {
	stream, id := fd.f.write.Stream, fd.f.write.ID
	if stream == "" {
		return
	}
	fd.readFrom = fd.rev + 1
	tracing := b.tracing()
	err := b.streamHistory().ReadStream(ctx, stream, fd.rev+1, func(ev Event) error {
		decoded, err := b.registry.Decode(ev)
		if err != nil {
			return ErrStopRead
		}
		if to, ok, err := b.route(ctx, p, decoded); err != nil || !ok || to != id {
			return ErrStopRead
		}
		if fd.step(decoded) != apply {
			// A handler that failed may have changed the state in place:
			// the document goes through the gate, as after a failed read.
			fd.broken = fd.spoiled
			return ErrStopRead
		}
		if tracing {
			fd.noteAhead(ev)
		}
		fd.extended++
		return nil
	})
	fd.readErr = err
	switch {
	case err != nil:
		// A projection's step may change the state in place: what was
		// folded cannot be undone, so the document goes through the gate.
		fd.broken = true
		b.logger.Debug("reading a stream to fold it failed; its events go through the gate", "projection", p.Name(),
			"stream", stream, "folded", fd.extended, "err", err)
	case fd.broken:
		b.logger.Debug("a step failed in a stream's fold; its events go through the gate", "projection", p.Name(),
			"stream", stream, "folded", fd.extended)
	default:
		b.folded.Add(1)
	}
}
