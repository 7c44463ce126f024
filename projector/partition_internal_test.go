package projector

import (
	"context"
	"fmt"
	"math"
	"testing"
)

// A node's record of a soft-deleted stream, in its metadata stream, goes
// to the worker of the stream's events, in the log's order with them: in
// another, a stream deleted and written again had its record handled
// after the events written again, or before, by timing.
func TestPartitionKey_a_deletion_record_goes_with_its_streams_events(t *testing.T) {
	e := &Engine{core: &core{}} // spreads by stream: more than one projection, or gated documents
	ctx := context.Background()
	soft := Event{Type: typeMetadata, StreamID: "$$bag-D4", Data: []byte(fmt.Sprintf(`{"$tb":%d}`, int64(math.MaxInt64)))}
	truncated := Event{Type: typeMetadata, StreamID: "$$bag-D5", Data: []byte(`{"$tb":3}`)}
	own := Event{Type: "BagScanned", StreamID: "bag-D4"}
	if got, want := e.partitionKey(ctx, &soft), e.partitionKey(ctx, &own); got != want {
		t.Errorf("the soft delete's record goes by %q, its stream's events by %q", got, want)
	}
	if got := e.partitionKey(ctx, &truncated); got != "$$bag-D5" {
		t.Errorf("metadata that truncates only (no deletion) goes by %q, want its own stream", got)
	}
}
