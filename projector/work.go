package projector

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/revgate/projector/projector/driver"
)

// work handles the events of one partition in order, in batches of what has
// queued up: large while the source is behind its head (catching up, a
// rebuild), and at the head while the worker is behind the events (a burst
// of appends); one event at a time otherwise.
func (x *run) work(ctx context.Context, part <-chan item, head <-chan struct{}, busy *atomic.Int64) {
	r := x.r
	batching := r.batch > 1 && r.engine.batchable()
	for it := range part {
		batch := []item{it}
		if batching && it.d.Settle == nil {
			batch = x.fill(batch, part, head)
		}
		busy.Store(time.Now().UnixNano())
		if len(batch) == 1 {
			x.handle(ctx, it)
		} else {
			x.handleBatch(ctx, batch)
		}
		busy.Store(0)
		r.inFlight.Add(-int64(len(batch)))
		x.settled()
	}
}

// fill adds to batch what the partition has queued, up to the batch's
// bounds (see batchBounds) and its bytes.
// While the source is behind its head it waits for more: up to the gap for
// each next event, up to the hold in all, and no longer once the source
// reaches its head. At the head it waits only while the worker is behind:
// when the batch's first event waited in the queue longer than the window
// (a burst of appends coming faster than the worker writes them one by
// one), it waits up to the window for each next event, and no longer in
// all than that event has waited (at most 10 windows), so that the burst is
// written in batches, as a catch-up is, rather than a write per event, and
// a worker that is behind at most doubles how late it is. The wait is what
// that lateness already costs: once the worker keeps up, the events it
// takes waited less than the window, and are written at once.
func (x *run) fill(batch []item, part <-chan item, head <-chan struct{}) []item {
	r := x.r
	b := x.bounds
	wait := r.window > 0
	if r.caughtUp.Load() {
		b, wait = atHead(b, time.Since(batch[0].queued), r.window)
		head = nil // reached: it no longer ends a wait
	}
	var hold <-chan time.Time
	var gap *time.Timer
	if wait {
		t := time.NewTimer(b.hold)
		defer t.Stop()
		hold = t.C
		gap = time.NewTimer(b.gap)
		defer gap.Stop()
	}
	size := 0
	var docs map[string]struct{}
	if b.documents > 0 {
		docs = make(map[string]struct{}, b.documents)
	}
	add := func(it item) {
		batch, size = append(batch, it), size+eventBytes(it)
		if docs != nil {
			docs[it.key] = struct{}{}
		}
	}
	for _, it := range batch {
		size += eventBytes(it)
		if docs != nil {
			docs[it.key] = struct{}{}
		}
	}
	for len(batch) < b.events && size < r.batchBytes && (docs == nil || len(docs) < b.documents) {
		select {
		case it, ok := <-part:
			if !ok {
				return batch
			}
			add(it)
			continue
		default:
		}
		if !wait {
			return batch
		}
		gap.Reset(b.gap)
		select {
		case it, ok := <-part:
			if !ok {
				return batch
			}
			add(it)
		case <-gap.C:
			return batch
		case <-hold:
			return batch
		case <-head:
			return batch
		}
	}
	return batch
}

// atHead returns the bounds of a batch at the head whose first event
// waited late in its queue, the batch window being window, and whether it
// waits for more: only when late by more than the window, for up to the
// window for each next event and no longer in all than it is late (at
// most holdWindows windows), so that a worker behind at most doubles how
// late it is, and one that keeps up writes events as they come.
func atHead(b batchBounds, late, window time.Duration) (batchBounds, bool) {
	b.gap, b.hold = window, min(late, holdWindows*window)
	return b, window > 0 && late > window
}

// batchBounds bound a worker's batch: at most events events of at most
// documents documents (0: not counted), gathered while behind the head for
// up to hold, waiting up to gap for each next event.
type batchBounds struct {
	events, documents int
	gap, hold         time.Duration
}

// versionedHold is how many batch windows a batch of versioned documents
// is held while catching up, and versionedEvents how many times the batch
// size it may hold in events.
const (
	versionedHold   = 100
	versionedEvents = 20
)

// boundsOf returns a runner's batch bounds. A batch of documents under the
// revision gate holds up to the batch size in events: its stream folds
// write each document once for the events of its whole stream. A document
// fed by many streams is read and written once for the events of it that
// one batch holds, so an engine whose events go to workers by document
// (Engine.byDocument) holds up to the batch size in documents while
// catching up, up to 20 times that in events, for up to 100 windows
// without a gap (2 s by default): the reader's pauses, while another
// worker writes, do not end it. A worker writes each of its documents once
// a batch, so the larger the batch in events the fewer its writes; a held
// event weighs about 2 KiB in memory, so 20,000 of them about 40 MiB a
// worker, and a worker queues up to as many more while it writes.
func (r *Runner) boundsOf() batchBounds {
	if !r.engine.byDocument() {
		return batchBounds{events: r.batch, gap: r.window, hold: holdWindows * r.window}
	}
	hold := versionedHold * r.window
	return batchBounds{events: r.batch * versionedEvents, documents: r.batch, gap: hold, hold: hold}
}

// eventBytes is what an event weighs in a batch: its data and metadata.
func eventBytes(it item) int {
	if it.d.Event == nil {
		return 0
	}
	return len(it.d.Event.Data) + len(it.d.Event.Metadata)
}

func (x *run) handle(ctx context.Context, it item) {
	if x.halt.Load() {
		x.r.counts.abandoned.Add(1)
		return // left for the next run: the checkpoint stays before it
	}
	results, err := x.engine.Handle(ctx, *it.d.Event)
	x.settle(ctx, it, results, err)
}

// handleBatch handles the events of batch together. Each is settled once
// the batch's writes are done, so that a persistent group's
// acknowledgements cover durable effects only.
func (x *run) handleBatch(ctx context.Context, batch []item) {
	if x.halt.Load() {
		x.r.counts.abandoned.Add(uint64(len(batch)))
		return
	}
	events := make([]Event, len(batch))
	var routes []string
	for i, it := range batch {
		events[i] = *it.d.Event
		if id, ok := routedTo(it.key); ok {
			if routes == nil {
				routes = make([]string, len(batch))
			}
			routes[i] = id
		}
	}
	x.r.counts.batches.Add(1)
	x.r.counts.batched.Add(uint64(len(batch)))
	e := x.engine
	if batch[0].d.Settle != nil {
		e = e.outOfOrder() // a persistent group's
	} else if x.holdsBack(batch) {
		ctx = driver.HoldBack(ctx) // written at the next checkpoint (see behindSave)
	}
	all := e.handleBatch(ctx, events, routes)
	for i, it := range batch {
		results, left := handledOnly(all[i])
		if err := joinFailures(results); err != nil || !left {
			x.settle(ctx, it, results, err)
			continue
		}
		if it.d.Settle != nil {
			// Left alone after another event of the batch failed; but a
			// source that settles its deliveries owns their failures, and
			// the run goes on: the event is handled on its own.
			x.handle(ctx, it)
			continue
		}
		// Left alone (in some projection) after an earlier event failed: the
		// run stops, and the checkpoint stays before this event.
		x.r.counts.abandoned.Add(1)
	}
}

// holdsBack reports whether the writes of batch may be held back in the
// engine's store (a flusher): its events were delivered before the
// source reached its head, and the run flushes before it says it has
// caught up (settled), once they are handled.
func (x *run) holdsBack(batch []item) bool {
	if !x.engine.holdsBack() {
		return false
	}
	if !x.r.caughtUp.Load() {
		return true
	}
	last := batch[len(batch)-1]
	at := x.headAt.Load()
	return last.tracked && at > 0 && last.seq < at
}

// settle counts an event's results and completes it, or fails the run.
func (x *run) settle(ctx context.Context, it item, results []Result, err error) {
	r := x.r
	if ctx.Err() != nil || (x.halt.Load() && stoppedWaiting(results)) {
		r.counts.abandoned.Add(1)
		return // abandoned at the drain timeout, or waiting when the run stopped: not a failure of the event
	}
	if created := it.d.Event.Created; !created.IsZero() {
		for ns := created.UnixNano(); ; {
			old := r.latest.Load()
			if old >= ns || r.latest.CompareAndSwap(old, ns) {
				break
			}
		}
	}
	if len(results) == 0 {
		r.counts.unrouted.Add(1)
	}
	r.unknown.note(x.engine.registry, *it.d.Event, results, r.logger)
	if driver.HeldBack(ctx) {
		r.count(*it.d.Event, results, &x.heldApplied)
	} else {
		r.count(*it.d.Event, results, &r.counts.applied)
	}
	if it.d.Settle != nil {
		x.settleDelivery(it, results)
		err = nil // the source owns the failure
	}
	if err != nil {
		x.fail(err)
		return
	}
	if it.tracked {
		x.completed(it.seq)
	}
}

// settleDelivery settles a delivery its source settles (a persistent
// group's) with its results. One that cannot be settled, its subscription
// dropped most likely (the server delivers it again, and the others it was
// handling with it), is logged the first time; the others are summed when
// the drop is noted (noteUnsettled), not logged each.
func (x *run) settleDelivery(it item, results []Result) {
	if err := it.d.Settle(results); err != nil && x.unsettled.Add(1) == 1 {
		x.r.logger.Warn("settling an event", "stream", it.d.Event.StreamID, "revision", it.d.Event.StreamRevision, "err", err)
	}
}

// stopping marks the run as stopping: queued events are left for the next
// run, and the runner is no longer caught up.
func (x *run) stopping() {
	x.r.halting.Store(true)
	x.halt.Store(true)
	x.r.ready.Store(false)
	x.stopWaits() // a wait for a predecessor ends: its event is left for the next run
}

// fail stops the run at its first failed event; the events that fail in
// other workers as it stops are noted too (nameAlsoFailed).
func (x *run) fail(err error) {
	first := false
	x.failOnce.Do(func() {
		first = true
		x.failure = fmt.Errorf("projector: runner %q stops: %w", x.r.name, err)
		x.stopping()
		x.stopRead()
	})
	if !first {
		x.failMu.Lock()
		defer x.failMu.Unlock()
		// The same failure said again (a loss of writes held back, which
		// every flush of its collection reports until the run ends) is
		// named once.
		line, _, _ := strings.Cut(err.Error(), "\n")
		if strings.Contains(x.failure.Error(), line) {
			return
		}
		for _, also := range x.alsoFailed {
			if strings.Contains(also.Error(), line) {
				return
			}
		}
		x.alsoFailed = append(x.alsoFailed, err)
	}
}

// maxAlsoFailed bounds how many other failures a run's error names.
const maxAlsoFailed = 5

// nameAlsoFailed adds to the run's failure, on its one line, the first line
// of each event that failed after it as the run stopped (called once the
// workers are done).
func (x *run) nameAlsoFailed() {
	x.failMu.Lock()
	defer x.failMu.Unlock()
	if x.failure == nil || len(x.alsoFailed) == 0 {
		return
	}
	var more strings.Builder
	for i, err := range x.alsoFailed[:min(len(x.alsoFailed), maxAlsoFailed)] {
		if i > 0 {
			more.WriteString("; ")
		}
		line, _, _ := strings.Cut(err.Error(), "\n")
		more.WriteString(line)
	}
	if n := len(x.alsoFailed) - maxAlsoFailed; n > 0 {
		fmt.Fprintf(&more, "; and %d more", n)
	}
	x.failure = &alsoFailed{first: x.failure, more: more.String()}
}

// alsoFailed is a run's first failure with the others named on its first
// line, before what follows that line (a panic's stack).
type alsoFailed struct {
	first error
	more  string
}

func (a *alsoFailed) Error() string {
	line, rest, multi := strings.Cut(a.first.Error(), "\n")
	line += " (and, as it stopped, " + a.more + ")"
	if multi {
		return line + "\n" + rest
	}
	return line
}

func (a *alsoFailed) Unwrap() error { return a.first }

// count counts the outcomes of ev's results, those applied into applied
// (the runner's count, or, for an event whose writes may be held back, the
// run's count of those it adds once they are written). An event set aside
// (skipped with no document, or parked) and delivered again counts as a
// duplicate.
func (r *Runner) count(ev Event, results []Result, applied *atomic.Uint64) {
	for _, res := range results {
		r.counts.waits.Add(uint64(res.Waits))
		switch res.Outcome {
		case Applied:
			applied.Add(1)
		case Duplicate:
			r.counts.duplicates.Add(1)
		case Skipped:
			if res.Document == "" && !r.setAside.first(res.Projection+"\x00"+eventKey(ev)) {
				// Delivered again: no document moved past it to say it is
				// a duplicate, but it is one.
				r.counts.duplicates.Add(1)
				break
			}
			r.counts.skipped.Add(1)
		case Parked:
			if !r.setAside.first(res.Projection + "\x00" + eventKey(ev)) {
				// Parked again (a stray its document refuses at each
				// delivery): the same record, counted once.
				r.counts.duplicates.Add(1)
				break
			}
			r.counts.parked.Add(1)
		case Held:
			r.counts.held.Add(1)
		case Failed:
			r.counts.failed.Add(1)
		}
	}
}
