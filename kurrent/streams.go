package kurrent

import (
	"context"
	"errors"
	"io"
	"math"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/projector"
)

var _ projector.StreamReader = (*Client)(nil)

// FirstRevision implements [projector.StreamReader]: the revision of the
// first event a forward read of stream returns now (above 0 once the node
// truncated its start, by the stream's $maxCount, $maxAge or $tb, or after
// it was deleted and written again), or [projector.ErrStreamDeleted] when
// the read finds no event (deleted, tombstoned, truncated entirely).
func (c *Client) FirstRevision(ctx context.Context, stream string) (uint64, error) {
	var first uint64
	err := c.Do(ctx, func(cl *kurrentdb.Client) error {
		rs, err := cl.ReadStream(ctx, stream, kurrentdb.ReadStreamOptions{From: kurrentdb.Start{}}, 1)
		if err != nil {
			return err
		}
		defer rs.Close()
		ev, err := rs.Recv()
		if err != nil {
			return err
		}
		first = ev.OriginalEvent().EventNumber
		return nil
	})
	var e *kurrentdb.Error
	switch {
	case errors.Is(err, io.EOF),
		errors.As(err, &e) && (e.Code() == kurrentdb.ErrorCodeResourceNotFound ||
			e.Code() == kurrentdb.ErrorCodeStreamDeleted || e.Code() == kurrentdb.ErrorCodeStreamTombstoned):
		return 0, projector.ErrStreamDeleted
	}
	return first, err
}

var _ projector.StreamHistory = (*Client)(nil)

// ReadStream implements [projector.StreamHistory]: it reads stream forwards
// from revision from, handing each event to each.
func (c *Client) ReadStream(ctx context.Context, stream string, from uint64, each func(projector.Event) error) error {
	stop := errors.New("stopped")
	err := c.Do(ctx, func(cl *kurrentdb.Client) error {
		rs, err := cl.ReadStream(ctx, stream, kurrentdb.ReadStreamOptions{From: kurrentdb.Revision(from)}, math.MaxInt64)
		if err != nil {
			return err
		}
		defer rs.Close()
		for {
			re, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			ev, err := Envelope(re)
			if err != nil {
				return err
			}
			if err := each(ev); errors.Is(err, projector.ErrStopRead) {
				return stop
			} else if err != nil {
				return err
			}
		}
	})
	if errors.Is(err, stop) {
		return nil
	}
	return err
}
