package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projectortest/e2e"
)

// rebuild --segments 2 while a run without --segments runs the projection
// is refused up front: at its switch the run would be refused the new
// collection, and its whole process would stop.
func TestRebuild_in_segments_beside_a_run_without_them_is_refused(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	for i := range 5 {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: fmt.Sprint(i)}, noted{Text: "a"})
	}
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	common := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name()}
	plain := e2e.StartCommand(t, c, append([]string{"run", "--http", "", "--lease", "2s", "--checkpoint-interval", "100ms"}, common...)...)
	plain.WaitCheckpoint(t, db, "tickets", servers.Head())
	code, out, stderr := run(c, nil, append([]string{"rebuild", "tickets", "--segments", "2", "--lease", "2s"}, common...)...)
	plainCode := -1
	select {
	case <-plain.Done():
		plainCode = plain.Wait(t, time.Second)
	case <-time.After(2 * time.Second):
	}
	cols, _ := mongostore.New(db).CollectionsOf(context.Background(), "tickets")
	if code == 0 || !strings.Contains(stderr, "runs tickets without segments: a rebuild in 2 switches readers to a collection that process must then run in 2 segments") ||
		plainCode != -1 || cols.Active != "" && cols.Active != "tickets" {
		t.Errorf("rebuild --segments 2 beside a running plain run: exit %d; readers on %q; the plain run process then exited %d (-1: still running)\nrebuild:\n%s%s\nplain run's last lines:\n%s",
			code, cols.Active, plainCode, out, stderr, tail(plain.Stderr(), 4))
	}
}

// replay-parked --lease 0 while run --segments processes hold the
// projection's segments is refused, as with a lease.
func TestReplayParked_without_a_lease_beside_segmented_processes_is_refused(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name()}
	r := e2e.StartCommand(t, c, append([]string{"run", "--esdb", servers.ESDBURI(), "--http", "", "--segments", "2", "--lease", "2s", "--checkpoint-interval", "100ms"}, common...)...)
	for deadline := time.Now().Add(time.Minute); strings.Count(r.Stderr(), "holds a segment's lease") < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run holds no segments\n%s", r.Stderr())
		}
	}
	code, out, stderr := run(c, nil, append([]string{"replay-parked", "tickets", "--lease", "0"}, common...)...)
	if code == 0 || !strings.Contains(stderr, "projection tickets runs in segments") {
		t.Errorf("replay-parked --lease 0 beside run --segments 2: exit 0, not refused\n%s%s", out, stderr)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
