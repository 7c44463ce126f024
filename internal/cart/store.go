package cart

import (
	"context"
	"errors"
	"fmt"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// store is the write side's [EventStore] on a client of either official
// client's adapter.
type store struct{ client *subscription.Client }

// NewStore adapts a client (from kurrent.Dial or esdbv4.Dial) for
// [NewHandler]: reads, and appends with an expected revision.
func NewStore(client *subscription.Client) EventStore { return store{client} }

func (s store) Read(ctx context.Context, stream string) ([]RecordedEvent, int64, error) {
	var out []RecordedEvent
	rev := int64(-1)
	err := s.client.ReadStream(ctx, stream, 0, func(ev projector.Event) error {
		out = append(out, RecordedEvent{ID: ev.ID, Type: ev.Type, Data: ev.Data})
		rev = int64(ev.StreamRevision)
		return nil
	})
	switch {
	case errors.Is(err, neutral.ErrStreamNotFound):
		return nil, -1, nil // a new cart (a deleted one's read fails)
	case err != nil:
		return nil, 0, err
	}
	return out, rev, nil
}

func (s store) Append(ctx context.Context, stream string, expected int64, events []NewEvent) error {
	if expected < 0 {
		expected = subscription.NoStream
	}
	data := make([]subscription.NewEvent, len(events))
	for i, e := range events {
		data[i] = subscription.NewEvent(e)
	}
	_, err := s.client.Append(ctx, stream, expected, data...)
	if errors.Is(err, subscription.ErrWrongRevision) {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return err
}
