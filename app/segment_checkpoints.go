package app

import (
	"context"
	"errors"
	"time"

	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// segmentCheckpoints is the checkpoint store of a run over a set of
// segments (run --segments): each segment has its own checkpoint, stored
// fenced by its lease's token. The run resumes from the lowest of them (the
// events a segment had already come back as duplicates, which the gate
// passes over), and stores each checkpoint it reaches under every segment.
// A save that another process's newer lease refuses (mongostore.ErrFenced)
// drops that segment: its lease is lost, and the run starts again without
// it; it never stops the process.
type segmentCheckpoints struct {
	g    *segments
	held map[int]*heldLease
	keys []int // of held, in order
	keep func(id string) bool
}

// CoversDocument reports whether document id is in a segment of the run:
// the runner hands its engine the events of those documents only.
func (c *segmentCheckpoints) CoversDocument(id string) bool { return c.keep(id) }

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
			c.save(ctx, name, k, *cp)
		} else if !baseRead {
			if base, err = store.LoadCheckpoint(ctx, name); err != nil {
				return nil, err
			}
			baseRead, cp = true, base
		} else {
			cp = base
		}
		switch {
		case cp == nil:
			none = true
		case low == nil || cp.Position < low.Position:
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
	var errs []error
	for _, k := range c.keys {
		if err := c.save(ctx, name, k, cp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// save stores cp as segment k's checkpoint under its lease's token; a
// refusal drops the segment and is not an error.
func (c *segmentCheckpoints) save(ctx context.Context, name string, k int, cp projector.Checkpoint) error {
	h := c.held[k]
	err := c.g.s.store.SaveCheckpointUnder(ctx, segment.CheckpointName(name, k, c.g.n), cp, h.token())
	switch {
	case errors.Is(err, mongostore.ErrFenced):
		c.g.logger.Warn("a checkpoint save was refused (fenced): another process holds the segment now; this process drops it",
			"projection", c.g.sl.name, "segment", k, "token", h.token(), "err", err)
		h.markLost(err)
		select {
		case c.g.changed <- struct{}{}:
		default:
		}
		return nil
	case err != nil:
		return err
	}
	c.g.noteSaved(k, cp.Position)
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
