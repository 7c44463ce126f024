package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest/e2e"
)

// Two segments; a stream deleted and written again, its document live in
// one of them. A run that resumes the other segment from before the
// deletion (its holder died there) reads the deletion record again: it is
// not its segment's document, and the segment that holds it is past the
// record, so the live document is not marked deleted.
func TestRun_segments_a_takeover_does_not_delete_again_a_document_written_again_since(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	ctx := context.Background()
	first := servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	if _, err := servers.Client().DeleteStream(ctx, "ticket/1", kurrentdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "b"}) // written again: the stream lives, its document starts over
	c := config(app.Projection{Definition: tickets("tickets").OnDelete(projector.MarkDeleted), Reads: app.StreamPrefix("ticket/")})
	args := []string{"run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
		"--http", "", "--segments", "2", "--lease", "2s", "--checkpoint-interval", "100ms"}
	atHead := func(r *e2e.Running) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			cps, _ := mongostore.New(db).Checkpoints(ctx)
			a, b := cps["tickets/segment-0-of-2"].Checkpoint, cps["tickets/segment-1-of-2"].Checkpoint
			if a != nil && b != nil && a.Position >= servers.Head() && b.Position >= servers.Head() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the segments do not reach the head %d\n%s", servers.Head(), r.Stderr())
			}
		}
	}
	deleted := func() any {
		var doc bson.M
		if err := db.Collection("tickets").FindOne(ctx, bson.D{{Key: "_id", Value: "1"}}).Decode(&doc); err != nil {
			return err
		}
		return doc["_deleted"]
	}
	r := e2e.StartCommand(t, c, args...)
	atHead(r)
	r.Stop(t)
	before := deleted()
	// The other segment's checkpoint is behind, before the deletion: as
	// its holder, which died, left it.
	other := 1 - segment.Of("1", 2)
	if _, err := db.Collection("projector_checkpoints").UpdateOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("tickets/segment-%d-of-2", other)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "position", Value: int64(first[0].Position)}, {Key: "prepare", Value: int64(first[0].Position)}, {Key: "eventId", Value: first[0].ID}}}}); err != nil {
		t.Fatal(err)
	}
	r = e2e.StartCommand(t, c, args...)
	atHead(r)
	r.Stop(t)
	after := deleted()
	t.Logf("document 1 (stream ticket/1 deleted, then written again): _deleted %v after the first run, %v after the takeover", before, after)
	if after == true {
		t.Errorf("the live document of ticket/1 (segment %d, past the deletion) is marked deleted by a run that resumed segment %d from before the deletion\n%s",
			1-other, other, r.Stderr())
	}
}

// A run without --segments follows a rebuild's switch to a collection that
// rebuild --segments 2 built and recorded as split in 2 segments: it is
// refused there, as at its start, rather than running the collection
// unsegmented from the start of $all (a segmented rebuild stores no
// checkpoint of the collection's own). The run takes no lease here
// (--lease 0): rebuild --segments refuses to start beside one that holds
// the projection's lease (TestRebuild_in_segments_beside_a_run_without_them_is_refused).
func TestRun_without_segments_is_refused_a_collection_a_rebuild_split_in_segments(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	for i := range 5 {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: fmt.Sprint(i)}, noted{Text: "a"})
	}
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	plain := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
		"--http", "", "--lease", "0", "--checkpoint-interval", "100ms")
	plain.WaitCheckpoint(t, db, "tickets", servers.Head())
	code, out, stderr := run(c, nil, "rebuild", "tickets", "--segments", "2", "--lease", "2s", "--log-level", "error",
		"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name())
	if code != 0 {
		t.Fatalf("rebuild --segments 2: exit %d\n%s\n%s", code, out, stderr)
	}
	if strings.Contains(stderr, "level=INFO") || strings.Contains(stderr, "level=WARN") {
		t.Errorf("rebuild --segments 2 --log-level error logged below error:\n%s", stderr)
	}
	store := mongostore.New(db)
	cols, err := store.CollectionsOf(context.Background(), "tickets")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !strings.Contains(plain.Stderr(), "runs in 2 segments"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run without --segments was not refused %s, split in 2 segments, in a minute:\n%s", cols.Active, plain.Stderr())
		}
	}
	if cps, err := store.Checkpoints(context.Background()); err != nil || cps[cols.Active].Checkpoint != nil {
		t.Errorf("the run without --segments stored a checkpoint of %s, split in 2 segments: %v (%v)", cols.Active, cps[cols.Active].Checkpoint, err)
	}
}

// A projection under None keeps no record to make its writes conditional
// on: run with leases warns at start that a process paused past its lease
// can write an older change over a newer one; without leases it does not.
func TestRun_warns_of_None_with_leases(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"})
	c := config(app.Projection{Definition: tickets("tickets").Idempotency(projector.None()), Reads: app.StreamPrefix("ticket/")})
	for _, lease := range []string{"2s", "0"} {
		r := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
			"--http", "", "--lease", lease, "--checkpoint-interval", "100ms")
		r.WaitCheckpoint(t, db, "tickets", servers.Head())
		r.Stop(t)
		if warned := strings.Contains(r.Stderr(), "the None strategy"); warned != (lease != "0") {
			t.Errorf("--lease %s: warned %v of None\n%s", lease, warned, r.Stderr())
		}
	}
}

// A rollout deploys version 1 of a segmented projection before it rebuilds
// it: its run --segments 2 is refused by the collection version 0 built,
// lets its segments go, and, as a run without segments does, follows the
// switch once rebuild --segments 2 of version 1 has filled its collection:
// it runs the new collection's segments to the head.
func TestRun_segments_refused_by_another_version_follow_the_switch_of_its_rebuild(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	version := func(v int) app.Config {
		return config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/"), Version: v})
	}
	common := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name()}
	seg := []string{"--segments", "2", "--lease", "2s"}
	runArgs := append(append([]string{"run", "--http", "", "--checkpoint-interval", "100ms"}, seg...), common...)
	atHead := func(collection string, within time.Duration) bool {
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			cps, _ := mongostore.New(db).Checkpoints(context.Background())
			ok := true
			for k := range 2 {
				if cp := cps[fmt.Sprintf("%s/segment-%d-of-2", collection, k)].Checkpoint; cp == nil || cp.Position < servers.Head() {
					ok = false
				}
			}
			if ok {
				return true
			}
		}
		return false
	}
	old := e2e.StartCommand(t, version(0), runArgs...)
	if !atHead("tickets", time.Minute) {
		t.Fatalf("version 0 did not reach the head\n%s", old.Stderr())
	}
	if code := old.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, old.Stderr())
	}
	next := e2e.StartCommand(t, version(1), runArgs...)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(next.Stderr(), "was built by version 0"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("version 1 is not refused\n%s", next.Stderr())
		}
	}
	code, out, stderr := run(version(1), nil, append(append([]string{"rebuild", "tickets"}, seg...), common...)...)
	if code != 0 {
		t.Fatalf("rebuild --segments 2: exit %d\n%s\n%s", code, out, stderr)
	}
	active, err := mongostore.New(db).ActiveCollection(context.Background(), "tickets", "tickets")
	if err != nil {
		t.Fatal(err)
	}
	servers.Append(t, registry(), "ticket/1", noted{Text: "b"})
	if !atHead(active, 30*time.Second) {
		t.Errorf("readers switched to %s, built by version 1, and the running version-1 process (run --segments 2) never runs it: nobody moves its segments to the head %d\nits log:\n%s",
			active, servers.Head(), next.Stderr())
	}
}

// rebuild --segments 3 while processes run the projection's active
// collection in 2 segments is refused up front, naming both numbers: at
// its switch they would all stop (a run in another number is refused), and
// nobody would run the projection.
func TestRebuild_segments_in_another_number_than_the_running_processes_is_refused(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	common := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name()}
	r := e2e.StartCommand(t, c, append([]string{"run", "--http", "", "--segments", "2", "--lease", "2s", "--checkpoint-interval", "100ms"}, common...)...)
	for deadline := time.Now().Add(time.Minute); strings.Count(r.Stderr(), "holds a segment's lease") < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run holds no segments\n%s", r.Stderr())
		}
	}
	code, out, stderr := run(c, nil, append([]string{"rebuild", "tickets", "--segments", "3", "--lease", "2s"}, common...)...)
	if code != 1 || !strings.Contains(stderr, "processes run tickets in 2 segments") || !strings.Contains(stderr, "a rebuild in 3 switches readers to a collection they must then run in 3 segments") {
		t.Errorf("rebuild --segments 3 beside a run in 2: exit %d, want 1 and why\n%s\n%s", code, out, stderr)
	}
	if cols, err := mongostore.New(db).CollectionsOf(context.Background(), "tickets"); err != nil || cols.Building != "" {
		t.Errorf("a rebuild was started: %+v (%v)", cols, err)
	}
}

// Against another event store whose head is past the stored checkpoint,
// status says that the checkpoint was taken in another log, as run finds
// when it starts, and exits 3, instead of counting the events behind it.
func TestStatus_says_a_checkpoint_of_another_event_store_before_run_refuses_it(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	r := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "", "--lease", "0")
	r.WaitCheckpoint(t, db, "tickets", servers.Head())
	r.Stop(t)
	other := startServers(t, e2e.Options{MongoURI: servers.MongoURI()})
	for i := range 10 {
		other.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: fmt.Sprint(i)}, noted{Text: "b"})
	}
	if other.Head() <= servers.Head() {
		t.Fatalf("the other event store's head %d is not past the checkpoint %d", other.Head(), servers.Head())
	}
	code, out, stderr := run(c, nil, "status", "--esdb", other.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name())
	if code != 3 || !strings.Contains(stderr, "projection tickets: the stored checkpoint does not belong to this event store") ||
		!strings.Contains(stderr, "to rebuild it: tickets rebuild tickets") {
		t.Errorf("status against another event store: exit %d, want 3 and why\n%s\n%s", code, out, stderr)
	}
}

// A lease under a second is refused before any I/O, by rebuild as by run:
// a rebuild in segments renews its leases at a third of it, and a lease of
// nanoseconds stopped the process with a panic.
func TestRebuild_and_run_refuse_a_lease_under_a_second(t *testing.T) {
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	servers := []string{"--esdb", "esdb://127.0.0.1:1?tls=false", "--mongo", "mongodb://127.0.0.1:1"}
	for _, args := range [][]string{
		append([]string{"rebuild", "tickets", "--segments", "2", "--lease", "2ns"}, servers...),
		append([]string{"rebuild", "tickets", "--lease", "500ms"}, servers...),
		append([]string{"run", "--segments", "2", "--lease", "2ns", "--http", ""}, servers...),
	} {
		code, _, stderr := run(c, nil, args...)
		if code != 2 || !strings.Contains(stderr, "want 0 (no leases) or at least 1s") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line", args, code, stderr)
		}
	}
}

// Soft-deleted streams written on again without a creation, caught up by
// a run of several workers under RemoveDocument: each stream's deletion
// record is handled in the log's order with its events, so each document
// starts anew from the events after it, as in a run of one worker (the
// record went to another worker than its stream, and the old fold could
// stay, by timing).
func TestRun_workers_apply_a_deletion_record_in_order_with_its_stream(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	ctx := context.Background()
	const n = 12
	for i := range n {
		id := fmt.Sprint(i)
		servers.Append(t, registry(), "ticket/"+id, opened{ID: id}, noted{Text: "a"}, noted{Text: "b"})
	}
	for i := range n {
		id := fmt.Sprint(i)
		if _, err := servers.Client().DeleteStream(ctx, "ticket/"+id, kurrentdb.DeleteStreamOptions{}); err != nil {
			t.Fatal(err)
		}
		servers.Append(t, registry(), "ticket/"+id, noted{Text: "c"}) // goes on, on nothing
	}
	c := config(app.Projection{Definition: tickets("tickets").OnDelete(projector.RemoveDocument), Reads: app.StreamPrefix("ticket/")})
	r := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
		"--http", "", "--workers", "4", "--on-failure", "park")
	r.WaitCheckpoint(t, db, "tickets", servers.Head())
	if code := r.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, r.Stderr())
	}
	for i := range n {
		var got ticket
		found, _, err := projector.ReadDocument(ctx, mongostore.New(db), tickets("tickets"), fmt.Sprint(i), &got)
		if err != nil || !found || got.Notes != 1 {
			t.Errorf("ticket %d: found %v, %d notes (%v); want 1, the note after its deletion", i, found, got.Notes, err)
		}
	}
}

// A process started without --segments runs a projection split in
// segments in the number its first segmented run recorded, sharing them
// under leases, beside a projection that runs in one process at a time:
// one process, two numbers. Without leases it is refused, saying why.
func TestRun_without_segments_follows_the_recorded_number_beside_a_projection_not_split(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	ctx := context.Background()
	for i := range 6 {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: fmt.Sprint(i)}, noted{Text: "a"})
	}
	split := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	common := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "", "--checkpoint-interval", "100ms"}
	store := mongostore.New(db)
	reached := func(r *e2e.Running, name string, head uint64) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			if cp, err := store.Reached(ctx, name); err == nil && cp != nil && cp.Position >= head {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not reach the head %d in a minute\n%s", name, head, r.Stderr())
			}
		}
	}
	first := e2e.StartCommand(t, split, append([]string{"run", "--segments", "2", "--lease", "2s"}, common...)...)
	reached(first, "tickets", servers.Head())
	first.Stop(t)

	for i := 6; i < 12; i++ {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: fmt.Sprint(i)}, noted{Text: "b"}, noted{Text: "c"})
	}
	both := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")},
		app.Projection{Definition: tickets("ticket_copy"), Reads: app.StreamPrefix("ticket/")})
	code, _, stderr := run(both, nil, append([]string{"run", "--lease", "0"}, common...)...)
	if code != 1 || !strings.Contains(stderr, "runs in 2 segments") || !strings.Contains(stderr, "run it with --lease") {
		t.Errorf("run without --segments and --lease 0: exit %d; want 1, and that the segments need leases\n%s", code, stderr)
	}
	code, _, stderr = run(both, nil, append([]string{"run", "--segments", "1", "--lease", "2s"}, common...)...)
	if code != 1 || !strings.Contains(stderr, "runs in 2 segments") || !strings.Contains(stderr, "not 1: run it with --segments 2") {
		t.Errorf("run --segments 1: exit %d; want 1, the given number refused\n%s", code, stderr)
	}
	// A group refused does not mark the projection fed by a group (which
	// status would then say, and a rebuild look for).
	code, _, stderr = run(both, nil, append([]string{"run", "--group", "g1", "--lease", "2s"}, common...)...)
	if code != 1 || !strings.Contains(stderr, "does not run a projection split in segments") {
		t.Errorf("run --group: exit %d; want 1, a group refused on a projection in segments\n%s", code, stderr)
	}
	for _, name := range []string{"tickets", "ticket_copy"} {
		if cols, err := store.CollectionsOf(ctx, name); err != nil || len(cols.Groups) > 0 {
			t.Errorf("after a refused run --group, %s is recorded fed by groups %v (%v)", name, cols.Groups, err)
		}
	}
	r := e2e.StartCommand(t, both, append([]string{"run", "--lease", "2s"}, common...)...)
	reached(r, "tickets", servers.Head())
	reached(r, "ticket_copy", servers.Head())
	if !strings.Contains(r.Stderr(), `msg="the projection runs in segments, as its first segmented run recorded: this process shares them" projection=tickets`) ||
		strings.Count(r.Stderr(), `msg="holds a segment's lease"`) < 2 {
		t.Errorf("the process did not say it runs tickets in its 2 segments, holding both:\n%s", r.Stderr())
	}
	r.Stop(t)
	cps, err := store.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tickets/segment-0-of-2", "tickets/segment-1-of-2", "ticket_copy"} {
		if cps[name].Checkpoint == nil || cps[name].Checkpoint.Position < servers.Head() {
			t.Errorf("checkpoint %s at %v, want the head %d", name, cps[name].Checkpoint, servers.Head())
		}
	}
	if segs := cps["tickets/segment-0-of-2"].Events + cps["tickets/segment-1-of-2"].Events; segs != 30 {
		t.Errorf("the segments of tickets count %d events, want the 30 appended", segs)
	}
	if n, err := segment.Count(ctx, db, "ticket_copy"); err != nil || n != 0 {
		t.Errorf("ticket_copy recorded as split in %d segments (%v), want none", n, err)
	}
	for _, coll := range []string{"tickets", "ticket_copy"} {
		var doc ticket
		if err := db.Collection(coll).FindOne(ctx, bson.D{{Key: "_id", Value: "11"}}).Decode(&doc); err != nil || doc.Notes != 2 {
			t.Errorf("%s: ticket 11 has %d notes (%v), want 2", coll, doc.Notes, err)
		}
	}
}

// switchToSplit makes the switch a rebuild of tickets in 2 segments makes:
// readers switched to a collection recorded as split in 2, which it returns.
func switchToSplit(t *testing.T, db *mongo.Database) string {
	t.Helper()
	ctx := context.Background()
	store := mongostore.New(db)
	building, err := store.StartRebuild(ctx, "tickets", "tickets_split")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := segment.Record(ctx, db, "tickets", building, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := store.FinishRebuild(ctx, "tickets", building, "tickets"); err != nil {
		t.Fatal(err)
	}
	return building
}

// A process that runs a projection in the number of segments its
// collection records (run with --lease and without --segments) follows a
// switch of readers to a collection split in another number (a rebuild's,
// whose processes started while it ran): it runs the new collection in its
// segments, rather than stop there, and stop its other projections too.
func TestRun_without_segments_follows_a_switch_to_a_collection_split_anew(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	ctx := context.Background()
	for i := range 6 {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: fmt.Sprint(i)}, noted{Text: "a"})
	}
	both := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")},
		app.Projection{Definition: tickets("ticket_copy"), Reads: app.StreamPrefix("ticket/")})
	following := e2e.StartCommand(t, both, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
		"--http", "", "--checkpoint-interval", "100ms", "--lease", "2s")
	following.WaitCheckpoint(t, db, "tickets", servers.Head())
	building := switchToSplit(t, db)
	for i := 6; i < 9; i++ {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: fmt.Sprint(i)}, noted{Text: "b"})
	}
	head := servers.Head()
	store := mongostore.New(db)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		cp, err := store.Reached(ctx, building)
		if err == nil && cp != nil && cp.Position >= head {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new collection %s, split in 2, did not reach the head %d in a minute (%v, %v):\n%s", building, head, cp, err, following.Stderr())
		}
	}
	following.WaitCheckpoint(t, db, "ticket_copy", head)
	if !strings.Contains(following.Stderr(), `msg="the projection's collection is split in another number of segments (a rebuild switched to it): this process follows" projection=tickets collection=`+building+` segments=2 was=1`) {
		t.Errorf("the process did not say it follows the new number:\n%s", following.Stderr())
	}
	if strings.Contains(following.Stderr(), "level=ERROR") {
		t.Errorf("an error was logged while following:\n%s", following.Stderr())
	}
	if n, err := db.Collection(building).CountDocuments(ctx, bson.D{}); err != nil || n != 9 {
		t.Errorf("%s holds %d documents (%v), want 9", building, n, err)
	}
	if code := following.Stop(t); code != 0 {
		t.Errorf("stopped: exit %d\n%s", code, following.Stderr())
	}
}

// A process given --segments cannot follow such a switch: that projection
// stops, says why, and /readyz with it, and the process's other
// projections go on.
func TestRun_given_segments_stops_at_a_switch_to_another_number_and_the_others_go_on(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	for i := range 6 {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: fmt.Sprint(i)}, noted{Text: "a"})
	}
	both := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")},
		app.Projection{Definition: tickets("ticket_copy"), Reads: app.StreamPrefix("ticket/")})
	given := e2e.StartCommand(t, both, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
		"--http", "", "--checkpoint-interval", "100ms", "--lease", "2s", "--segments", "1")
	given.WaitCheckpoint(t, db, "tickets", servers.Head())
	switchToSplit(t, db)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(given.Stderr(), `msg="projection stopped; the other projections go on" projection=tickets`); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tickets did not stop at the switch in a minute:\n%s", given.Stderr())
		}
	}
	servers.Append(t, registry(), "ticket/9", opened{ID: "9"})
	given.WaitCheckpoint(t, db, "ticket_copy", servers.Head())
	select {
	case <-given.Done():
		t.Fatalf("the process ended with tickets:\n%s", given.Stderr())
	default:
	}
	if code := given.Stop(t); code != 1 {
		t.Errorf("stopped with tickets stopped: exit %d, want 1\n%s", code, given.Stderr())
	}
}
