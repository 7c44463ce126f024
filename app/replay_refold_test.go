package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest/e2e"
	"github.com/revgate/projector/retry"
)

// thread is a ticket's last note: a read model that depends on the order
// of its events.
type thread struct {
	Last  string `bson:"last"`
	Notes int    `bson:"notes"`
}

// threads parks a note "bad" unless fixed.
func threads(fixed bool) *projector.Projection[thread] {
	p := projector.New[thread]("threads", projector.StreamSuffix("ticket/")).OnFailure(projector.Park)
	projector.Create(p, func(opened) (thread, error) { return thread{}, nil })
	projector.On(p, func(t thread, n noted) (thread, error) {
		if n.Text == "bad" && !fixed {
			return t, errors.New("no bad notes")
		}
		t.Last, t.Notes = n.Text, t.Notes+1
		return t, nil
	})
	return p
}

// With --esdb, replay-parked folds a document of the revision gate anew
// from its stream, the parked event in its place: the ticket's last note is
// its last, not the replayed one. Without it, the event applies last, and
// the operator is told that --esdb would put it in its place.
func TestReplayParked_with_the_event_store_folds_a_gated_document_anew_from_its_stream(t *testing.T) {
	servers := e2e.StartServers(t, e2e.Options{})
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"}, noted{Text: "bad"}, noted{Text: "c"})
	broken := config(app.Projection{Definition: threads(false), Reads: app.StreamPrefix("ticket/")})
	fixed := config(app.Projection{Definition: threads(true), Reads: app.StreamPrefix("ticket/")})
	for _, esdb := range []bool{true, false} {
		db := servers.Database(t)
		common := []string{"--mongo", servers.MongoURI(), "--database", db.Name()}
		cmd := e2e.StartCommand(t, broken, append([]string{"run", "--esdb", servers.ESDBURI(), "--http", ""}, common...)...)
		cmd.WaitCheckpoint(t, db, "threads", servers.Head())
		if code := cmd.Stop(t); code != 0 {
			t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
		}
		args := append([]string{"replay-parked", "threads"}, common...)
		if esdb {
			args = append(args, "--esdb", servers.ESDBURI())
		}
		code, out, stderr := run(fixed, nil, args...)
		if code != 0 || !strings.Contains(out, "replayed 1 of 1 parked events of threads") {
			t.Fatalf("replay-parked (--esdb %v): exit %d\n%s\n%s", esdb, code, out, stderr)
		}
		var got thread
		if _, _, err := projector.ReadDocument(context.Background(), mongostore.New(db), threads(true), "1", &got); err != nil {
			t.Fatal(err)
		}
		switch {
		case esdb && (got != thread{Last: "c", Notes: 3} || !strings.Contains(out, "folded anew from its stream")):
			t.Errorf("with --esdb: %+v, want the last note c of 3\n%s", got, out)
		case !esdb && (got != thread{Last: "bad", Notes: 3} || !strings.Contains(out, "with --esdb, each document is folded anew")):
			t.Errorf("without --esdb: %+v, want the replayed note applied last, and the note saying what --esdb does\n%s", got, out)
		}
	}
}

// After a rebuild has switched readers to a new collection, the library's
// read helpers given the projection (ReadDocument) or its own collection
// (WaitForRevision, WaitForPosition) read the new one: the old one no
// longer moves.
func TestReadHelpers_follow_a_rebuilds_switch(t *testing.T) {
	ctx := context.Background()
	servers := e2e.StartServers(t, e2e.Options{})
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
