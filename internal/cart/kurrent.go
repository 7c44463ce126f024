package cart

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	_ "github.com/revgate/projector/internal/neutral/coexist" // both clients in one binary
)

// kurrentStore is the write side's [EventStore] on the KurrentDB client.
type kurrentStore struct{ client *kurrentdb.Client }

// NewKurrentStore adapts a KurrentDB client for [NewHandler], as
// [NewESDBStore] does an EventStore-Client-Go v4 client: the same reads and
// expected-revision appends, so the write side works with either client.
func NewKurrentStore(client *kurrentdb.Client) EventStore { return kurrentStore{client} }

func (s kurrentStore) Read(ctx context.Context, stream string) ([]RecordedEvent, int64, error) {
	rs, err := s.client.ReadStream(ctx, stream, kurrentdb.ReadStreamOptions{From: kurrentdb.Start{}}, 1<<62)
	if err != nil {
		return nil, 0, err
	}
	defer rs.Close()
	var out []RecordedEvent
	rev := int64(-1)
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out, rev, nil
		}
		var e *kurrentdb.Error
		if errors.As(err, &e) && e.Code() == kurrentdb.ErrorCodeResourceNotFound {
			return nil, -1, nil
		}
		if err != nil {
			return nil, 0, err
		}
		r := ev.OriginalEvent()
		out = append(out, RecordedEvent{ID: r.EventID.String(), Type: r.EventType, Data: r.Data})
		rev = int64(r.EventNumber)
	}
}

func (s kurrentStore) Append(ctx context.Context, stream string, expected int64, events []NewEvent) error {
	want := kurrentdb.StreamState(kurrentdb.NoStream{})
	if expected >= 0 {
		want = kurrentdb.Revision(uint64(expected))
	}
	data := make([]kurrentdb.EventData, len(events))
	for i, e := range events {
		data[i] = kurrentdb.EventData{EventID: e.ID, EventType: e.Type, ContentType: kurrentdb.ContentTypeJson, Data: e.Data, Metadata: e.Metadata}
	}
	_, err := s.client.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{StreamState: want}, data...)
	var e *kurrentdb.Error
	// The v1 append answers a wrong expected revision in its result; a node
	// that reports it as a rich error detail instead gives the other code.
	if errors.As(err, &e) && (e.Code() == kurrentdb.ErrorCodeWrongExpectedVersion || e.Code() == kurrentdb.ErrorCodeStreamRevisionConflict) {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return err
}
