package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// segmentCheckpoints is the checkpoint store of a run over a set of
// segments (run --segments): each segment has its own checkpoint, stored
// fenced by its lease's token. The run resumes from the lowest of them, and
// passes over, without its engine, the events of a segment at or before
// that segment's own checkpoint (their effects are stored already); it
// stores each checkpoint it reaches under every segment it still holds (a
// save never moves a checkpoint back; a segment whose lease it lost has its
// events passed over, and keeps its checkpoint).
// A save that another process's newer lease refuses (mongostore.ErrFenced)
// drops that segment: its lease is lost, and the run starts again without
// it; it never stops the process.
//
// It counts, for each segment, the events it hands the engine for the
// segment's documents, and stores with each checkpoint how many of them it
// has passed (mongostore.CheckpointStatus.Events): the count loaded with
// the checkpoint, plus its events taken at or before the one it stores. An
// event a process took and did not checkpoint (it was killed, or lost the
// segment) is taken again, and counted, by the next holder, from the
// stored checkpoint: with fenced checkpoints, each event is counted once.
type segmentCheckpoints struct {
	g    *segments
	held map[int]*heldLease
	keys []int // of held, in order

	mu     sync.Mutex
	from   map[int]projector.Checkpoint   // each held segment's loaded checkpoint; absent: none
	events map[int]uint64                 // each held segment's count, as stored with its checkpoint
	last   map[int]projector.Checkpoint   // each held segment's event taken last
	taken  map[int][]projector.Checkpoint // each held segment's events taken and not yet stored, in order
}

// NeedsEvent reports whether the event at checkpoint at must still be
// applied to document id: the document is in a segment of the run, past
// that segment's checkpoint. The runner hands its engine those events only.
func (c *segmentCheckpoints) NeedsEvent(id string, at projector.Checkpoint) bool {
	k := segment.Of(id, c.g.n)
	if h, ok := c.held[k]; !ok || h.isLost() {
		// Not held, or lost since the run started (another process took
		// it, or it expired): the run stops applying it at once, before
		// the process drops it and starts again without it.
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	from, ok := c.from[k]
	need := !ok || at.After(from)
	if need {
		c.take(k, at)
	}
	return need
}

// take counts the event at at as one of segment k's. The runner asks
// about an event once for each document it feeds, and may be given an
// event again (a subscription started again from its last checkpoint):
// an event at or before the last one taken (stored since, or not) is not
// counted again. c.mu is held.
func (c *segmentCheckpoints) take(k int, at projector.Checkpoint) {
	c.makeMaps()
	if last, ok := c.last[k]; ok && !at.After(last) {
		return
	}
	c.last[k] = at
	c.taken[k] = append(c.taken[k], at)
}

// counted returns how many events segment k has passed at checkpoint cp:
// the count stored with its checkpoint, plus its events taken at or before
// cp (n of them, the first ones of c.taken[k]).
func (c *segmentCheckpoints) counted(k int, cp projector.Checkpoint) (total uint64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := c.taken[k]
	for n < len(ts) && !ts[n].After(cp) {
		n++
	}
	return c.events[k] + uint64(n), n
}

// storedAt records that segment k's checkpoint was stored with total
// events: the first n of its events taken are in it.
func (c *segmentCheckpoints) storedAt(k int, total uint64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.makeMaps()
	c.events[k] = total
	c.taken[k] = c.taken[k][n:]
}

// makeMaps makes c's maps the first time. c.mu is held.
func (c *segmentCheckpoints) makeMaps() {
	if c.from == nil {
		c.from, c.events = map[int]projector.Checkpoint{}, map[int]uint64{}
		c.last, c.taken = map[int]projector.Checkpoint{}, map[int][]projector.Checkpoint{}
	}
}

// LoadCheckpoint returns the lowest checkpoint of the segments held, nil
// when one has none. A segment without its own checkpoint resumes from the
// one the projection's collection had before it was segmented (or that its
// rebuild left), if any. Each segment's stored checkpoint is claimed under
// its lease's token: from then on the process that held it before cannot
// move it.
func (c *segmentCheckpoints) LoadCheckpoint(ctx context.Context, name string) (*projector.Checkpoint, error) {
	store := c.g.s.store
	own := make([]string, len(c.keys))
	for i, k := range c.keys {
		own[i] = segment.CheckpointName(name, k, c.g.n)
	}
	counts := map[string]mongostore.CheckpointStatus{}
	if len(own) > 0 { // none: Checkpoints would read them all
		var err error
		if counts, err = store.Checkpoints(ctx, own...); err != nil { // the counts stored with the checkpoints
			return nil, err
		}
	}
	var low, base *projector.Checkpoint
	baseRead, none := false, false
	for _, k := range c.keys {
		own := segment.CheckpointName(name, k, c.g.n)
		cp, err := store.LoadCheckpoint(ctx, own) // an error for one stored wrong
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.makeMaps()
		c.events[k] = counts[own].Events
		c.mu.Unlock()
		if cp != nil {
			// Claimed under this lease's token. Still under a lease left
			// held (errUnderAnotherLease), the claim waits for it to
			// expire, and the run goes on from the checkpoint meanwhile.
			switch err := c.save(ctx, name, k, *cp); {
			case errors.Is(err, errUnderAnotherLease):
				c.g.logger.Info("a segment's checkpoint is still under another lease: it is stored once that one expires",
					"projection", c.g.sl.name, "segment", k, "err", err)
			case err != nil:
				return nil, err
			}
		} else if !baseRead {
			if base, err = store.LoadCheckpoint(ctx, name); err != nil {
				return nil, err
			}
			baseRead, cp = true, base
		} else {
			cp = base
		}
		if cp != nil {
			c.mu.Lock()
			c.from[k] = *cp
			c.mu.Unlock()
		}
		switch {
		case cp == nil:
			none = true
		case low == nil || low.After(*cp):
			low = cp
		}
	}
	if none {
		return nil, nil
	}
	return low, nil
}

// SaveCheckpoint stores cp as the checkpoint of each segment of the run.
// A stopping runner cancels a save in progress to store its last
// checkpoint; these writes finish first (bounded by segmentSaveTimeout),
// so that an earlier checkpoint's write, abandoned by the client, cannot
// land after the last one on a server whose conditional writes are not
// atomic (the embedded server).
func (c *segmentCheckpoints) SaveCheckpoint(ctx context.Context, name string, cp projector.Checkpoint) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), segmentSaveTimeout)
	defer cancel()
	var failed []int
	var first error
	for _, k := range c.keys {
		if err := c.save(ctx, name, k, cp); err != nil {
			failed = append(failed, k)
			first = cmp.Or(first, err)
		}
	}
	if len(failed) <= 1 {
		return first
	}
	// One line: the segments' saves fail alike (the store does not answer).
	return fmt.Errorf("saving the checkpoint of segments %s: %w", intsString(failed), first)
}

// save stores cp as segment k's checkpoint under its lease's token, unless
// that lease was lost (the run passes over the segment's events since); a
// refusal drops the segment and is not an error. A refusal while this
// process still holds the segment's lease is another lease's: a rebuild's,
// written before its switch and not let go (the rebuild stopped between
// its switch and the release of its leases). The checkpoint is stored once
// that lease expires; meanwhile it is not, the segment is kept, and the
// save fails with errUnderAnotherLease: the runner must not take the
// checkpoint as stored (under a HandledIDs window, it reads no further
// than the window past the one stored). A
// refusal when the renewal that tells which does not answer in time is an
// error, as the store's own are: the segment is kept, and the next save
// looks again.
func (c *segmentCheckpoints) save(ctx context.Context, name string, k int, cp projector.Checkpoint) error {
	h := c.held[k]
	if h.isLost() {
		// Its events are passed over since (NeedsEvent): a checkpoint
		// past them would have the next holder pass over them too.
		return nil
	}
	total, n := c.counted(k, cp)
	err := c.g.s.store.SaveCheckpointUnder(ctx, segment.CheckpointName(name, k, c.g.n), cp, h.current(), total)
	switch {
	case err == nil:
		c.storedAt(k, total, n)
		c.g.noteSaved(k, cp.Position, total)
		return nil
	case !errors.Is(err, mongostore.ErrFenced):
		return err
	}
	held, herr := h.stillHeld(ctx)
	switch {
	case herr != nil:
		// A renewal that did not answer in time (a loaded store) tells
		// nothing: the save fails, as a store error does, and the next one
		// looks again; the segment is kept.
		return fmt.Errorf("segment %d: its checkpoint was refused, and whether this process still holds the segment is not known: %w", k, herr)
	case held:
		return fmt.Errorf("segment %d: %w (%w)", k, errUnderAnotherLease, err)
	}
	c.g.logger.Warn("a checkpoint save was refused (fenced): another process holds the segment now; this process drops it",
		"projection", c.g.sl.name, "segment", k, "token", h.token(), "err", err)
	h.markLost(err)
	select {
	case c.g.changed <- struct{}{}:
	default:
	}
	return nil
}

// RecordError and ClearError keep the error a run stopped with beside the
// collection's own checkpoint record, where status reads it.
func (c *segmentCheckpoints) RecordError(ctx context.Context, name, message string) error {
	return c.g.s.store.RecordError(ctx, name, message)
}

func (c *segmentCheckpoints) ClearError(ctx context.Context, name string) error {
	return c.g.s.store.ClearError(ctx, name)
}

// errUnderAnotherLease: a segment's checkpoint is refused under the lease
// this process holds, as another lease's (a rebuild's, left held) still
// covers it; it is stored once that one expires.
var errUnderAnotherLease = errors.New("its checkpoint is still under another lease (a rebuild's, left held): it is stored once that lease expires")

// segmentSaveTimeout bounds the writes of one checkpoint under the
// segments of a run.
const segmentSaveTimeout = 10 * time.Second

var (
	_ projector.CheckpointStore = (*segmentCheckpoints)(nil)
	_ projector.ErrorRecorder   = (*segmentCheckpoints)(nil)
)
