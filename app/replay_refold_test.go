package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest/e2e"
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
	servers := startServers(t, e2e.Options{})
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
