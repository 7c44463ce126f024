package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// The progress line of a rebuild says where it stands only from what it
// stored, and does not pass off the position it started from (or 0) as one.
func TestProgress_of_a_rebuild(t *testing.T) {
	at := func(pos uint64) *projector.Checkpoint { return &projector.Checkpoint{Position: pos} }
	for _, c := range []struct {
		cp         *projector.Checkpoint
		start, end uint64
		want       string
	}{
		{nil, 0, 900, "no checkpoint stored yet in this run (from position 0, up to 900)"},
		{nil, 300, 900, "no checkpoint stored yet in this run (from position 300, up to 900)"},
		{at(600), 300, 900, "position 600 of 900, about 10s left"},
		{at(300), 300, 900, "position 300 of 900"},
		{at(900), 300, 900, "position 900 of 900, about 0s left"},
		{at(950), 300, 900, "position 950, past 900 (the head when it began): catching up with the head"},
	} {
		if got := progress(c.cp, c.start, c.end, 10*time.Second); got != c.want {
			t.Errorf("progress(%v, %d, %d) = %q, want %q", c.cp, c.start, c.end, got, c.want)
		}
	}
}

// A runner's error record says it stopped until it stores a checkpoint
// again: a projection or a rebuild that resumed runs, and clears the
// record once it has caught up.
func TestStoppedWith_counts_an_error_until_a_checkpoint_is_stored_after_it(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		cs   mongostore.CheckpointStatus
		want string
	}{
		{mongostore.CheckpointStatus{}, ""},
		{mongostore.CheckpointStatus{LastError: "boom", LastErrorAt: t0}, "boom"},
		{mongostore.CheckpointStatus{LastError: "boom", LastErrorAt: t0, Updated: t0.Add(-time.Minute)}, "boom"},
		{mongostore.CheckpointStatus{LastError: "boom", LastErrorAt: t0, Updated: t0.Add(time.Second)}, ""},
	} {
		if got := stoppedWith(c.cs); got != c.want {
			t.Errorf("stoppedWith(%+v) = %q, want %q", c.cs, got, c.want)
		}
	}
}

// What a rebuild says of the collection it switched readers from: none (a
// new projection, or a renamed one), one that had no document (the
// projection ran under that name and wrote none), or one kept.
func TestPreviousText_tells_a_new_projection_from_one_that_wrote_nothing(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	if got := previousText(ctx, store, "fresh"); !strings.Contains(got, "there was no collection fresh before: a new projection") {
		t.Errorf("never ran: %q", got)
	}
	if err := store.SaveCheckpoint(ctx, "ran", projector.Checkpoint{Position: 10}); err != nil {
		t.Fatal(err)
	}
	if got := previousText(ctx, store, "ran"); got != "the previous collection ran had no document: the projection ran under that name and wrote none" {
		t.Errorf("ran and wrote nothing: %q", got)
	}
	if err := store.SaveCheckpoint(ctx, "segmented/segment-2-of-4", projector.Checkpoint{Position: 10}); err != nil {
		t.Fatal(err)
	}
	if got := previousText(ctx, store, "segmented"); !strings.Contains(got, "had no document") {
		t.Errorf("ran in segments and wrote nothing: %q", got)
	}
	if got := previousText(ctx, store, "segment"); !strings.Contains(got, "there was no collection segment before") {
		t.Errorf("a name the segments' names begin with: %q", got)
	}
	if _, err := store.Database().Collection("kept").InsertOne(ctx, map[string]any{"_id": "1"}); err != nil {
		t.Fatal(err)
	}
	if got := previousText(ctx, store, "kept"); got != "the previous collection kept is kept" {
		t.Errorf("kept: %q", got)
	}
}
