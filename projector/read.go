package projector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/revgate/projector/internal/pace"
	"github.com/revgate/projector/retry"
)

// read subscribes, and subscribes again after every drop, until ctx is done.
// A failed subscribe is retried under the reconnect policy, whose end is
// Run's error; a subscription that drops before delivering anything is
// followed by the next after a wait that grows with each such drop in a row
// (the policy's schedule), for up to the policy's MaxElapsed.
func (x *run) read(ctx context.Context) error {
	r := x.r
	pacer := pace.New(r.reconnect)
	for {
		if err := pacer.Wait(ctx); errors.Is(err, pace.ErrExhausted) {
			return fmt.Errorf("every subscription for %v dropped before delivering anything", r.reconnect.MaxElapsed)
		} else if err != nil {
			return nil // ctx is done
		}
		sub, err := retry.DoValue(ctx, r.reconnect, func(ctx context.Context) (Subscription, error) {
			return r.source.Subscribe(ctx, x.resumeFrom())
		})
		if ctx.Err() != nil {
			if sub != nil {
				sub.Close()
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("subscribing: %w", err)
		}
		n, stopped := x.follow(ctx, sub)
		switch {
		case stopped:
			return nil
		case n == 0:
			pacer.Failed()
		default:
			pacer.Reset()
		}
	}
}

// follow consumes sub until it drops (it returns how many deliveries it
// had) or ctx is done (stopped: sub is left open for the drain).
func (x *run) follow(ctx context.Context, sub Subscription) (n int, stopped bool) {
	r := x.r
	r.counts.subscriptions.Add(1)
	r.connected.Store(true)
	n, err := x.consume(ctx, sub)
	if ctx.Err() != nil {
		x.open = sub // closed after the drain
		return n, true
	}
	sub.Close()
	x.dropped()
	if !x.settling {
		// A source that settles its deliveries (a persistent group) has
		// the server deliver again what was not settled: nothing to wait
		// for, and their acks could not go out on the closed subscription.
		x.quiesce(ctx)
	}
	if err := x.save(ctx); err != nil {
		r.logger.Warn("storing the checkpoint after a drop", "err", err)
	}
	r.logger.Warn("subscription dropped; subscribing again", "from", checkpointAttr(x.resumeFrom()), "delivered", n, "err", err)
	return n, false
}

// dropped notes that the subscription has ended: the runner is behind again.
func (x *run) dropped() {
	r := x.r
	x.noteUnsettled()
	r.connected.Store(false)
	r.counts.drops.Add(1)
	r.caughtUp.Store(false)
	x.headAt.Store(0)
	x.untracked = false
	r.ready.Store(false)
	x.staleHeads()
}

// noteUnsettled says how many deliveries could not be settled since it
// last did, when more than the one logged (see settle).
func (x *run) noteUnsettled() {
	if n := x.unsettled.Swap(0); n > 1 {
		x.r.logger.Warn("events not settled, their subscription gone: the server delivers them again", "events", n)
	}
}

// staleHeads takes the head signals the workers did not take: behind again,
// they are stale.
func (x *run) staleHeads() {
	for _, h := range x.heads {
		select {
		case <-h:
		default:
		}
	}
}

// quiesce waits, after a drop, for the events in flight to be handled
// (bounded by the drain timeout; the workers write their batches now), so
// that the checkpoint stored before the next subscription covers them. A
// source that drops faster than its events are handled would otherwise
// deliver them again and again, behind their own copies still queued, and
// the checkpoint would not move.
func (x *run) quiesce(ctx context.Context) {
	r := x.r
	for _, h := range x.heads {
		select {
		case h <- struct{}{}:
		default:
		}
	}
	defer x.staleHeads()
	deadline := time.Now().Add(r.drain)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for r.inFlight.Load() > 0 && time.Now().Before(deadline) && !x.halt.Load() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// resumeFrom is where a new subscription starts: the stored checkpoint, or,
// with no checkpoint store, the furthest handled prefix.
func (x *run) resumeFrom() *Checkpoint {
	if x.r.checkpoints == nil {
		mark, _ := x.tr.peek()
		return mark
	}
	x.r.savedMu.Lock()
	defer x.r.savedMu.Unlock()
	if x.r.saved == nil {
		return nil
	}
	c := *x.r.saved
	return &c
}

// consume hands every delivery of sub to the workers until sub ends. A
// goroutine of its own receives them, up to readAhead ahead, so that
// receiving the next one (decoding it off the wire) overlaps with routing
// and dispatching this one (decoding its payload, when the engine spreads
// by document). Deliveries received ahead and not dispatched when ctx ends
// are not the tracker's: the checkpoint stays before them, and a source
// that settles its deliveries has the server deliver them again.
func (x *run) consume(ctx context.Context, sub Subscription) (int, error) {
	type received struct {
		d   Delivery
		err error
	}
	rctx, cancel := context.WithCancel(ctx)
	ahead := make(chan received, readAhead)
	go func() {
		defer close(ahead)
		for {
			d, err := sub.Next(rctx)
			select {
			case ahead <- received{d, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range ahead { // the receiver is done with sub before it is closed
		}
	}()
	n := 0
	defer x.handOver()
	for next := range ahead {
		if next.err != nil {
			return n, next.err
		}
		n++
		if !x.dispatch(ctx, next.d, len(ahead) > 0) {
			return n, ctx.Err()
		}
	}
	return n, ctx.Err()
}

// readAhead is how many deliveries consume receives ahead of dispatching.
const readAhead = 256

// dispatch hands d to the workers, or, for a delivery its source settles,
// to the batch of those received together (handleApart), which goes once
// none is received behind it (more is false) or it is full.
func (x *run) dispatch(ctx context.Context, d Delivery, more bool) bool {
	if d.Settle == nil || d.Event == nil {
		x.handOver()
	}
	ok := x.dispatchEvent(ctx, d, more)
	// At the head once the delivery that reaches it is in flight: ready
	// once that is handled too, not before.
	if r := x.r; ok && d.CaughtUp && !r.caughtUp.Load() {
		// Every delivery so far is in the tracker (an event without a
		// checkpoint, this one too, made it untracked): ready once those
		// are handled. A delivery that says so with no event and no
		// checkpoint (the head had nothing past the last event) counts as
		// well: otherwise readiness waited for nothing in flight, which
		// steady appends, each a while to write, never leave.
		if !x.untracked {
			x.headAt.Store(x.tr.next())
		}
		r.caughtUp.Store(true)
		r.logger.Info("subscription reached the head", "queued", r.inFlight.Load())
		for _, h := range x.heads {
			select {
			case h <- struct{}{}: // a batch filling need not wait for more
			default:
			}
		}
		x.settled()
	}
	return ok
}

// dispatchEvent is dispatch's hand-over of d.
func (x *run) dispatchEvent(ctx context.Context, d Delivery, more bool) bool {
	r := x.r
	if d.Event == nil {
		r.counts.checkpoints.Add(1)
		if d.Checkpoint != nil {
			x.completed(x.tr.add(d.Checkpoint))
		}
		return true
	}
	r.counts.events.Add(1)
	if d.Settle != nil {
		x.settling = true
		x.received = append(x.received, item{d: d})
		if !more || len(x.received) >= r.batch {
			x.handOver()
		}
		return true
	}
	if d.Checkpoint != nil && !x.withinLag(ctx) {
		return false
	}
	it := item{d: d, key: r.engine.partitionKey(ctx, d.Event), queued: time.Now()}
	if d.Checkpoint != nil {
		it.seq, it.tracked = x.tr.add(d.Checkpoint), true
	} else {
		x.untracked = true
	}
	part := x.parts[maphash.String(r.seed, workerKey(it.key))%uint64(len(x.parts))]
	r.inFlight.Add(1)
	select {
	case part <- it:
		return true
	case <-ctx.Done():
		r.inFlight.Add(-1)
		return false
	}
}

// withinLag waits, under a HandledIDs window (smallestWindow), until
// fewer than a window of deliveries follow the stored checkpoint, having
// asked the saver to store it (the saver is asked again as deliveries
// complete, and tries again every interval if a store fails): what a
// crash makes the source deliver again then stays within the window,
// whatever the pace of the stores. It reports false when ctx ends first.
func (x *run) withinLag(ctx context.Context) bool {
	r := x.r
	if r.idsWindow == 0 || x.tr.sinceTaken() < r.idsWindow {
		return true
	}
	select {
	case x.saveNow <- struct{}{}:
	default:
	}
	// Batches filling write what they hold: no more comes until the
	// checkpoint is stored.
	for _, h := range x.heads {
		select {
		case h <- struct{}{}:
		default:
		}
	}
	defer x.staleHeads()
	for x.tr.sinceTaken() >= r.idsWindow {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(lagPoll):
		}
	}
	return true
}

// lagPoll is how often withinLag looks again while it waits.
const lagPoll = 2 * time.Millisecond

// handOver hands the settled deliveries received together to handleApart.
func (x *run) handOver() {
	x.handleApart(x.received)
	x.received = nil
}

// handleApart handles deliveries its source settles (a persistent
// group's) on a goroutine of their own rather than in a worker's queue: the
// server hands one stream's events out of order (a redelivery, a retry
// after a drop), and an event waiting for its predecessor there would hold
// the predecessor, queued behind it, until its wait ran out. Deliveries
// received together are handled as one batch (each document read and
// written once), each stream's events in revision order; each is settled
// once the batch's writes are done. The server's buffer of unsettled
// events bounds how many are handled at once; the engine's queue of each
// document keeps their order.
func (x *run) handleApart(batch []item) {
	if len(batch) == 0 {
		return
	}
	r := x.r
	r.inFlight.Add(int64(len(batch)))
	x.apart.Go(func() {
		if len(batch) > 1 && r.batch > 1 && r.engine.batchable() {
			inStreamOrder(batch)
			x.handleBatch(x.workCtx, batch)
		} else {
			for _, it := range batch {
				x.handle(x.workCtx, it)
			}
		}
		r.inFlight.Add(-int64(len(batch)))
		x.settled()
	})
}

// inStreamOrder puts the events of each stream in batch in revision order,
// in the places the stream's events hold: the order of different streams'
// events is kept.
func inStreamOrder(batch []item) {
	places := map[string][]int{}
	for i, it := range batch {
		places[it.d.Event.StreamID] = append(places[it.d.Event.StreamID], i)
	}
	for _, at := range places {
		if len(at) < 2 {
			continue
		}
		its := make([]item, len(at))
		for k, i := range at {
			its[k] = batch[i]
		}
		slices.SortStableFunc(its, func(a, b item) int { return cmp.Compare(a.d.Event.StreamRevision, b.d.Event.StreamRevision) })
		for k, i := range at {
			batch[i] = its[k]
		}
	}
}
