package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest/e2e"
)

// On a server without atomic conditional writes (FerretDB), two consumers
// of a group could each write a document over the other's change: the
// consumers of a projection take its lease, so that one process at a time
// consumes the group. The second stands by (/readyz would say so), and
// takes over when the first stops: every ticket ends as its fold.
func TestRun_group_on_a_server_without_atomic_conditional_writes_is_consumed_by_one_process_at_a_time(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	args := []string{"run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
		"--http", "", "--group", "g", "--lease", "2s", "--log-level", "info"}
	notes := map[string]int{}
	appendTickets := func(from, n int) {
		for i := from; i < from+n; i++ {
			id := fmt.Sprint(i)
			servers.Append(t, registry(), "ticket/"+id, opened{ID: id}, noted{Text: "a"}, noted{Text: "b"})
			notes[id] = 2
		}
	}
	appendTickets(0, 10)
	first := e2e.StartCommand(t, c, args...)
	waitFor(t, first, "holds the group's lease")
	second := e2e.StartCommand(t, c, args...)
	waitFor(t, second, "standing by: another process runs the projection")
	if strings.Contains(second.Stderr(), "holds the group's lease") {
		t.Fatalf("both consumers hold the projection's lease:\nfirst:\n%s\nsecond:\n%s", first.Stderr(), second.Stderr())
	}
	waitNotes(t, db, notes, first)

	if code := first.Stop(t); code != 0 {
		t.Fatalf("the first consumer exited %d:\n%s", code, first.Stderr())
	}
	waitFor(t, second, "holds the group's lease")
	appendTickets(10, 10)
	waitNotes(t, db, notes, second)
}

// waitFor waits up to a minute for what in r's log.
func waitFor(t *testing.T, r *e2e.Running, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(r.Stderr(), what); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in a minute:\n%s", what, r.Stderr())
		}
	}
}

// waitNotes waits up to a minute for each ticket of want to have its notes.
func waitNotes(t *testing.T, db *mongo.Database, want map[string]int, r *e2e.Running) {
	t.Helper()
	store := mongostore.New(db)
	var wrong []string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		wrong = nil
		for id, n := range want {
			var got ticket
			found, _, err := projector.ReadDocument(context.Background(), store, tickets("tickets"), id, &got)
			if err != nil || !found || got.Notes != n {
				wrong = append(wrong, fmt.Sprintf("%s: found %v, %d notes (%v), want %d", id, found, got.Notes, err, n))
			}
		}
		if len(wrong) == 0 {
			return
		}
	}
	t.Fatalf("tickets not their fold in a minute: %v\n%s", wrong, r.Stderr())
}

// A process of the deployment started without --group, in segments (run
// --segments), takes the projection's segments: the group's consumer
// stands down while it holds any, as it does for a catch-up run or a
// replay, rather than write beside it; every ticket ends as its fold.
func TestRun_group_consumer_stands_down_for_a_run_in_segments(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	common := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "", "--log-level", "info"}
	notes := map[string]int{}
	for i := range 10 {
		id := fmt.Sprint(i)
		servers.Append(t, registry(), "ticket/"+id, opened{ID: id}, noted{Text: "a"})
		notes[id] = 1
	}
	consumer := e2e.StartCommand(t, c, append([]string{"run", "--group", "g", "--lease", "2s"}, common...)...)
	waitNotes(t, db, notes, consumer)
	segmented := e2e.StartCommand(t, c, append([]string{"run", "--segments", "2", "--lease", "2s"}, common...)...)
	waitFor(t, consumer, "standing down: a process took the projection's lease")
	for i := range 10 {
		id := fmt.Sprint(i)
		servers.Append(t, registry(), "ticket/"+id, noted{Text: "b"})
		notes[id] = 2
	}
	waitNotes(t, db, notes, segmented)
	if code := segmented.Stop(t); code != 0 {
		t.Fatalf("the run in segments exited %d:\n%s", code, segmented.Stderr())
	}
	if code := consumer.Stop(t); code != 0 {
		t.Fatalf("the group's consumer exited %d:\n%s", code, consumer.Stderr())
	}
}
