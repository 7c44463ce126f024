package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projectortest/e2e"
)

// replay-parked takes the projection's lease, waits 2 s (2*groupLeasePoll)
// and starts once the group has no consumer connected. On FerretDB a
// --group standby waiting for the group's lease must not subscribe while
// another process holds the projection's lease: no consumer may connect
// once the active one has stood down. Before, the next standby took the
// group's lease the active one let go, and consumed beside the replay
// (a review's test).
func TestRun_group_standbys_on_FerretDB_do_not_consume_while_replay_parked_holds_the_projection_lease(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	servers := e2e.StartServers(t, e2e.Options{})
	db := servers.Database(t)
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	args := []string{"run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
		"--http", "", "--group", "g", "--lease", "15s", "--log-level", "info"}
	for i := range 5 {
		id := fmt.Sprint(i)
		servers.Append(t, registry(), "ticket/"+id, opened{ID: id}, noted{Text: "a"})
	}
	first := e2e.StartCommand(t, c, args...)
	waitFor(t, first, "holds the group's lease")
	second := e2e.StartCommand(t, c, args...)
	waitFor(t, second, "standing by: another process runs the projection")
	third := e2e.StartCommand(t, c, args...) // a new user's three consumers
	waitFor(t, third, "standing by: another process runs the projection")
	time.Sleep(500 * time.Millisecond)

	// What replay-parked does: take the projection's lease.
	store := mongostore.New(db)
	ctx := context.Background()
	if _, err := store.AcquireLease(ctx, "tickets", "replay-parked review/1/x", time.Minute); err != nil {
		t.Fatal(err)
	}
	took := time.Now()
	cl, err := kurrent.Dial(servers.ESDBURI(), nil)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		g, err := cl.Group(ctx, "g-tickets")
		if err != nil {
			t.Fatal(err)
		}
		return g.Consumers
	}
	time.Sleep(2 * time.Second) // replay-parked's wait
	for consumers() != 0 {      // awaitConsumersGone: the replay starts here
		time.Sleep(50 * time.Millisecond)
	}
	gone := time.Since(took)
	defer func() {
		t.Logf("gone at %v\nfirst:\n%s\nsecond:\n%s\nthird:\n%s", gone, tail(first.Stderr(), 4), tail(second.Stderr(), 6), tail(third.Stderr(), 6))
	}()
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if n := consumers(); n != 0 {
			t.Fatalf("%d consumer(s) connected %v after replay-parked took the projection's lease (none connected at %v, when the replay would start writing)\nsecond:\n%s",
				n, time.Since(took).Round(time.Millisecond), gone.Round(time.Millisecond), tail(second.Stderr()+third.Stderr(), 12))
		}
	}
}
