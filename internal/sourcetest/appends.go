package sourcetest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// appendsCheckTheirRevision: an append checks its expected revision (no
// stream, or the stream's last revision), the same events appended again
// at the same expectation append nothing (the server's idempotent write),
// a stale expectation is an error wrapping subscription.ErrWrongRevision,
// an event's metadata reads back as it was written, and a stream never
// written reads as not found. The write side's event store (the cart's)
// relies on each.
func appendsCheckTheirRevision(t *testing.T, f *fixture) {
	c, ctx := f.dial(t), context.Background()
	const stream = "appends-1"
	if err := c.ReadStream(ctx, stream, 0, func(projector.Event) error { return nil }); !errors.Is(err, neutral.ErrStreamNotFound) {
		t.Fatalf("a stream never written: %v, want not found", err)
	}
	const meta = `{"clientId":"x","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`
	first := []Event{{ID: uuid.New(), Type: "Opened", Data: []byte(`{}`), Metadata: []byte(meta)}, {ID: uuid.New(), Type: "Added", Data: []byte(`{}`)}}
	if _, err := c.Append(ctx, stream, NoStream, first...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, stream, NoStream, first...); err != nil {
		t.Fatalf("the same append again: %v", err)
	}
	more := Event{ID: uuid.New(), Type: "Confirmed", Data: []byte(`{}`)}
	for _, stale := range []int64{NoStream, 0} {
		if _, err := c.Append(ctx, stream, stale, more); !errors.Is(err, subscription.ErrWrongRevision) {
			t.Errorf("append expecting %d at revision 1: %v, want ErrWrongRevision", stale, err)
		}
	}
	if _, err := c.Append(ctx, stream, 1, more); err != nil {
		t.Fatal(err)
	}
	var got []projector.Event
	err := c.ReadStream(ctx, stream, 0, func(ev projector.Event) error {
		got = append(got, ev)
		return nil
	})
	if err != nil || len(got) != 3 || got[0].ID != first[0].ID.String() || got[1].ID != first[1].ID.String() || got[2].ID != more.ID.String() {
		t.Fatalf("read back %+v (%v), want the three events once each", got, err)
	}
	for _, ev := range got {
		if ev.Position != 0 {
			t.Errorf("%s@%d read from its stream at position %d, want 0 (unknown: a node's read of a stream gives -1)", ev.StreamID, ev.StreamRevision, ev.Position)
		}
	}
	if string(got[0].Metadata) != meta {
		t.Fatalf("metadata read back %s, want %s", got[0].Metadata, meta)
	}
}
