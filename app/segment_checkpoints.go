package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/revgate/projector/internal/neutral"
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
type segmentCheckpoints struct {
	g    *segments
	held map[int]*heldLease
	keys []int // of held, in order

	mu   sync.Mutex
	from map[int]projector.Checkpoint // each held segment's loaded checkpoint; absent: none
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
	from, ok := c.from[k]
	c.mu.Unlock()
	return !ok || neutral.Past(at, from)
}

// LoadCheckpoint returns the lowest checkpoint of the segments held, nil
// when one has none. A segment without its own checkpoint resumes from the
// one the projection's collection had before it was segmented (or that its
// rebuild left), if any. Each segment's stored checkpoint is claimed under
// its lease's token: from then on the process that held it before cannot
// move it.
func (c *segmentCheckpoints) LoadCheckpoint(ctx context.Context, name string) (*projector.Checkpoint, error) {
	store := c.g.s.store
	var low, base *projector.Checkpoint
	baseRead, none := false, false
	for _, k := range c.keys {
		cp, err := store.LoadCheckpoint(ctx, segment.CheckpointName(name, k, c.g.n))
		if err != nil {
			return nil, err
		}
		if cp != nil {
			if err := c.save(ctx, name, k, *cp); err != nil {
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
			if c.from == nil {
				c.from = map[int]projector.Checkpoint{}
			}
			c.from[k] = *cp
			c.mu.Unlock()
		}
		switch {
		case cp == nil:
			none = true
		case low == nil || neutral.Past(*low, *cp):
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
// that lease expires; meanwhile it is not, and the segment is kept. A
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
	err := c.g.s.store.SaveCheckpointUnder(ctx, segment.CheckpointName(name, k, c.g.n), cp, h.current())
	switch {
	case err == nil:
		c.g.noteSaved(k, cp.Position)
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
		c.g.logger.Info("a segment's checkpoint is still under another lease: it is stored once that one expires",
			"projection", c.g.sl.name, "segment", k, "err", err)
		return nil
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

// segmentSaveTimeout bounds the writes of one checkpoint under the
// segments of a run.
const segmentSaveTimeout = 10 * time.Second

var (
	_ projector.CheckpointStore = (*segmentCheckpoints)(nil)
	_ projector.ErrorRecorder   = (*segmentCheckpoints)(nil)
)
