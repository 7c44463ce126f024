package app

import (
	"fmt"
	"testing"

	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// A rebuild in segments is done once every segment of the building
// collection has its own checkpoint at the head its process read at its
// start, or past it: a segment without one, one behind, or the
// checkpoints of another collection or another number of segments leave
// it not done. An empty $all (head 0) has nothing to rebuild.
func TestSegmentsBehind_is_done_when_every_segment_of_the_collection_is_at_the_end(t *testing.T) {
	at := func(pos uint64) mongostore.CheckpointStatus {
		return mongostore.CheckpointStatus{Checkpoint: &projector.Checkpoint{Position: pos}}
	}
	of := func(coll string, n int, pos ...uint64) map[string]mongostore.CheckpointStatus {
		all := map[string]mongostore.CheckpointStatus{}
		for k, p := range pos {
			all[segment.CheckpointName(coll, k, n)] = at(p)
		}
		return all
	}
	merge := func(ms ...map[string]mongostore.CheckpointStatus) map[string]mongostore.CheckpointStatus {
		out := map[string]mongostore.CheckpointStatus{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		all    map[string]mongostore.CheckpointStatus
		end    uint64
		behind string
	}{
		{"every segment at the end", of("b", 4, 100, 100, 100, 100), 100, "[]"},
		{"every segment past the end", of("b", 4, 150, 101, 120, 100), 100, "[]"},
		{"one segment behind", of("b", 4, 100, 99, 100, 100), 100, "[1]"},
		{"segments without a checkpoint", of("b", 4, 100, 100), 100, "[2 3]"},
		{"none stored", nil, 100, "[0 1 2 3]"},
		{"the collection's own checkpoint is not a segment's", merge(of("b", 4, 100, 100, 100), map[string]mongostore.CheckpointStatus{"b": at(200)}), 100, "[3]"},
		{"another collection's segments", of("a", 4, 100, 100, 100, 100), 100, "[0 1 2 3]"},
		{"another number of segments", of("b", 8, 100, 100, 100, 100, 100, 100, 100, 100), 100, "[0 1 2 3]"},
		{"a record holding only an error", merge(of("b", 4, 100, 100, 100), map[string]mongostore.CheckpointStatus{segment.CheckpointName("b", 3, 4): {LastError: "x"}}), 100, "[3]"},
		{"an empty $all", nil, 0, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := segmentsBehind(tc.all, "b", 4, tc.end)
			if s := fmt.Sprint(got); s != tc.behind && !(s == "[]" && tc.behind == "[]") {
				t.Errorf("behind %v, want %s", got, tc.behind)
			}
		})
	}
}
