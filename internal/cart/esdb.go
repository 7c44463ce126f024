package cart

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// esdbStore is the write side's [EventStore] on the official client.
type esdbStore struct{ client *esdb.Client }

// NewESDBStore adapts an EventStoreDB client for [NewHandler].
func NewESDBStore(client *esdb.Client) EventStore { return esdbStore{client} }

func (s esdbStore) Read(ctx context.Context, stream string) ([]RecordedEvent, int64, error) {
	rs, err := s.client.ReadStream(ctx, stream, esdb.ReadStreamOptions{From: esdb.Start{}}, 1<<62)
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
		var e *esdb.Error
		if errors.As(err, &e) && e.Code() == esdb.ErrorCodeResourceNotFound {
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

func (s esdbStore) Append(ctx context.Context, stream string, expected int64, events []NewEvent) error {
	want := esdb.ExpectedRevision(esdb.NoStream{})
	if expected >= 0 {
		want = esdb.Revision(uint64(expected))
	}
	data := make([]esdb.EventData, len(events))
	for i, e := range events {
		data[i] = esdb.EventData{EventID: e.ID, EventType: e.Type, ContentType: esdb.ContentTypeJson, Data: e.Data, Metadata: e.Metadata}
	}
	_, err := s.client.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: want}, data...)
	var e *esdb.Error
	if errors.As(err, &e) && e.Code() == esdb.ErrorCodeWrongExpectedVersion {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return err
}
