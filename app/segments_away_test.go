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

// A rollout: version 0 runs --segments 2; a process of version 1 joins
// (refused: version 0 built the collection) and waits for the switch of a
// rebuild by its version. It is counted out of the processes that share the
// segments while it waits: version 0's process takes its share back, and
// every segment keeps reaching the head.
func TestRun_segments_a_process_waiting_for_a_switch_leaves_its_share_to_the_others(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	version := func(v int) app.Config {
		return config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/"), Version: v})
	}
	common := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name()}
	runArgs := append([]string{"run", "--http", "", "--checkpoint-interval", "100ms", "--segments", "2", "--lease", "2s"}, common...)
	behind := func(within time.Duration) []int {
		var late []int
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			cps, _ := mongostore.New(db).Checkpoints(context.Background())
			late = nil
			for k := range 2 {
				if cp := cps[fmt.Sprintf("tickets/segment-%d-of-2", k)].Checkpoint; cp == nil || cp.Position < servers.Head() {
					late = append(late, k)
				}
			}
			if len(late) == 0 {
				return nil
			}
		}
		return late
	}
	old := e2e.StartCommand(t, version(0), runArgs...)
	if late := behind(time.Minute); late != nil {
		t.Fatalf("version 0 did not reach the head\n%s", old.Stderr())
	}
	next := e2e.StartCommand(t, version(1), runArgs...)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(next.Stderr(), "was built by version 0"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("version 1 is not refused\n%s", next.Stderr())
		}
	}
	time.Sleep(3 * time.Second) // a few looks of version 0 at the processes
	for i := range 5 {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", 10+i), opened{ID: fmt.Sprint(10 + i)})
	}
	if late := behind(30 * time.Second); late != nil {
		t.Errorf("segments %v never reach the head %d: version 0 holds its share only, the waiting version-1 process none\nversion 0:\n%s\nversion 1:\n%s",
			late, servers.Head(), old.Stderr(), next.Stderr())
	}
}
