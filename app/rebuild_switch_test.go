package app_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest/e2e"
	"github.com/revgate/projector/retry"
)

// After a rebuild has switched readers to a new collection, the library's
// read helpers given the projection (ReadDocument) or its own collection
// (WaitForRevision, WaitForPosition) read the new one: the old one no
// longer moves.
func TestReadHelpers_follow_a_rebuilds_switch(t *testing.T) {
	ctx := context.Background()
	servers := startServers(t, e2e.Options{})
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	c := config(app.Projection{Definition: threads(true), Reads: app.StreamPrefix("ticket/")})
	db := servers.Database(t)
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name()}
	first := e2e.StartCommand(t, c, append([]string{"run", "--esdb", servers.ESDBURI(), "--http", ""}, common...)...)
	first.WaitCheckpoint(t, db, "threads", servers.Head())
	if code := first.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, first.Stderr())
	}
	if code, out, stderr := run(c, nil, append([]string{"rebuild", "threads", "--esdb", servers.ESDBURI()}, common...)...); code != 0 {
		t.Fatalf("rebuild: exit %d\n%s\n%s", code, out, stderr)
	}
	servers.Append(t, registry(), "ticket/1", noted{Text: "b"})
	cmd := e2e.StartCommand(t, c, append([]string{"run", "--esdb", servers.ESDBURI(), "--http", ""}, common...)...)
	defer cmd.Stop(t)
	store := mongostore.New(db)
	wait := retry.Policy{InitialDelay: 10 * time.Millisecond, Multiplier: 2, MaxDelay: 200 * time.Millisecond, MaxElapsed: 30 * time.Second, MaxRetries: 1000}
	if err := projector.WaitForPosition(ctx, store, "threads", servers.Head(), wait); err != nil {
		t.Fatalf("WaitForPosition on the projection's own collection: %v", err)
	}
	if err := projector.WaitForRevision(ctx, store, "threads", "1", 2, wait); err != nil {
		t.Fatalf("WaitForRevision on the projection's own collection: %v", err)
	}
	var got thread
	if found, rev, err := projector.ReadDocument(ctx, store, threads(true), "1", &got); err != nil || !found || rev != 2 || (got != thread{Last: "b", Notes: 2}) {
		t.Fatalf("ReadDocument: found %v at revision %d, %+v (%v); want the note b of 2, at revision 2", found, rev, got, err)
	}
	// A copy in a collection of its own reads that one: the old.
	var old thread
	if _, rev, err := projector.ReadDocument(ctx, store, projector.Copy(threads(true), "threads"), "1", &old); err != nil || rev != 1 {
		t.Fatalf("ReadDocument of a copy in the old collection: revision %d (%v), want 1", rev, err)
	}
}

// A rebuild begun in one process and interrupted is resumed in one
// process: given --segments, it is refused, saying how to resume it
// (segments would start it over beside its checkpoint, and the collection
// they switch to would run in segments where run runs it in one process).
func TestRebuild_begun_in_one_process_is_not_resumed_in_segments(t *testing.T) {
	ctx := context.Background()
	servers := startServers(t, e2e.Options{})
	evs := servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"}, noted{Text: "b"})
	c := config(app.Projection{Definition: threads(true), Reads: app.StreamPrefix("ticket/")})
	db := servers.Database(t)
	store := mongostore.New(db)
	// Where an interrupted rebuild leaves its record and checkpoint.
	building, err := store.StartRebuild(ctx, "threads", "threads_r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SaveCheckpoint(ctx, building, projector.Checkpoint{Position: evs[0].Position, EventID: evs[0].ID}); err != nil {
		t.Fatal(err)
	}
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name(), "--esdb", servers.ESDBURI()}
	// status tells it from a rebuild that runs, and exits 3: its switch
	// waits for someone to act, as a stopped one's does.
	code, out, stderr := run(c, nil, append([]string{"status"}, common...)...)
	if code != 3 || !strings.Contains(out, "threads_r1 at "+strconv.FormatUint(evs[0].Position, 10)+", interrupted: no process runs it") ||
		!strings.Contains(stderr, "its rebuild into threads_r1 was interrupted") {
		t.Errorf("status of an interrupted rebuild: exit %d, want 3\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(c, nil, append([]string{"rebuild", "threads", "--segments", "4", "--lease", "2s"}, common...)...)
	if code == 0 || !strings.Contains(stderr, "begun in one process") || !strings.Contains(stderr, "rebuild threads without --segments") {
		t.Fatalf("rebuild --segments 4 of a rebuild begun in one process: exit %d, want it refused saying how to resume\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(c, nil, append([]string{"rebuild", "threads"}, common...)...)
	if code != 0 || !strings.Contains(out, "resuming the rebuild of threads into threads_r1") {
		t.Fatalf("rebuild in one process: exit %d\n%s\n%s", code, out, stderr)
	}
}

// A command's NAME may come between its flags: the flags after it are read
// too, and a wrong one is named.
func TestRebuild_NAME_between_flags(t *testing.T) {
	c := config(app.Projection{Definition: threads(true), Reads: app.StreamPrefix("ticket/")})
	code, _, stderr := run(c, nil, "rebuild", "--esdb", "esdb://127.0.0.1:1?tls=false", "threads", "--on-failure", "xx", "--mongo", "mongodb://127.0.0.1:1")
	if code != 2 || strings.Contains(stderr, "unexpected arguments") || !strings.Contains(stderr, "xx") {
		t.Fatalf("rebuild with NAME between flags and a wrong --on-failure: exit %d, want 2 naming the wrong value\n%s", code, stderr)
	}
}

// A rebuild in segments no process holds a lease of, begun less than a
// lease period ago (between its start and taking its segments, or a
// handover after a kill), is not said interrupted: status exits 0 and says
// its segments are being taken. Once that period is past (--lease), it is.
func TestStatus_a_rebuild_just_begun_is_not_interrupted_yet(t *testing.T) {
	ctx := context.Background()
	servers := startServers(t, e2e.Options{})
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"})
	c := config(app.Projection{Definition: threads(true), Reads: app.StreamPrefix("ticket/")})
	db := servers.Database(t)
	building := "threads_r" + strconv.FormatInt(time.Now().Unix(), 10)
	if _, err := mongostore.New(db).StartRebuild(ctx, "threads", building); err != nil {
		t.Fatal(err)
	}
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name(), "--esdb", servers.ESDBURI()}
	// In one process, a rebuild holds its lease from before it begins: with
	// none held, it was interrupted, however recent.
	code, out, stderr := run(c, nil, append([]string{"status", "--lease", "1h"}, common...)...)
	if code != 3 || !strings.Contains(out, "interrupted: no process runs it") {
		t.Errorf("status of a rebuild in one process just begun, no lease held: exit %d, want 3\n%s\n%s", code, out, stderr)
	}
	if _, err := segment.Record(ctx, db, "threads", building, 4); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run(c, nil, append([]string{"status", "--lease", "1h"}, common...)...)
	if code != 0 || !strings.Contains(out, building+" at start, no process holds it now: its segments are being taken or handed over") {
		t.Errorf("status of a rebuild just begun: exit %d, want 0\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(c, nil, append([]string{"status", "--lease", "1ns"}, common...)...)
	if code != 3 || !strings.Contains(out, "interrupted: no process runs it") {
		t.Errorf("status of a rebuild begun longer ago than --lease: exit %d, want 3\n%s\n%s", code, out, stderr)
	}
}
