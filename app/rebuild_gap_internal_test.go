package app

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/projector"
)

// A rebuild past the head it began at says, in its progress line, how many
// events it is behind the head; once that count has not gone down for
// losingGround, it says once that the head moves away faster than it
// handles events. A count that goes down (it catches up) says nothing.
func TestRebuild_says_once_that_the_head_moves_away_faster_than_it_handles_events(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	run := func(counts []int) (lines []string, said string) {
		var g gap
		var out bytes.Buffer
		for i, n := range counts {
			behind := func(context.Context, projector.Checkpoint) (int, bool, error) { return n, n >= 10000, nil }
			lines = append(lines, g.look(context.Background(), behind, projector.Checkpoint{Position: 1}, t0.Add(time.Duration(i)*10*time.Second), &out))
		}
		return lines, out.String()
	}
	lines, said := run([]int{40, 60, 90, 130, 180, 240})
	if lines[0] != ", 40 events behind it" || lines[5] != ", 240 events behind it" {
		t.Errorf("progress lines %q", lines)
	}
	if strings.Count(said, "the head moves away faster than this rebuild handles events (") != 1 || !strings.Contains(said, "(130 behind it now, 40 30s ago)") {
		t.Errorf("losing ground for 50 s: said %q, want it once, after 30 s", said)
	}
	if _, said := run([]int{400, 380, 300, 310, 250, 100, 0}); said != "" {
		t.Errorf("catching up: said %q, want nothing", said)
	}
	if lines, _ := run([]int{10000}); lines[0] != ", more than 10000 events behind it" {
		t.Errorf("past the bound: %q", lines[0])
	}
	var g gap
	failing := func(context.Context, projector.Checkpoint) (int, bool, error) {
		return 0, false, errors.New("unavailable\nmore")
	}
	if got := g.look(context.Background(), failing, projector.Checkpoint{}, t0, &bytes.Buffer{}); !strings.Contains(got, "could not be read: unavailable") || strings.Contains(got, "\n") {
		t.Errorf("a failed count: %q", got)
	}
}
