package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest/e2e"
)

// A projection whose filter names none of its streams, or whose router's
// stream prefix misses its separator, is caught up and ready, its read
// model empty or keyed wrong: run says so once it first reaches the head.
// A projection set up right says neither.
func TestRun_warns_at_the_head_of_an_empty_collection_and_of_ids_that_begin_with_a_separator(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	servers := startServers(t, e2e.Options{})
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	noSeparator := func(name string) *projector.Projection[ticket] {
		p := projector.New[ticket](name, projector.StreamSuffix("ticket"))
		projector.Create(p, func(opened) (ticket, error) { return ticket{}, nil })
		projector.On(p, func(t ticket, _ noted) (ticket, error) { t.Notes++; return t, nil })
		return p
	}
	for _, tc := range []struct {
		name string
		p    app.Projection
		want string // "": no warning
	}{
		{"filter of another category", app.Projection{Definition: tickets("tickets"), Reads: app.Category("tickets")},
			`msg="caught up with the head of $all, and the projection's collection has no document: if its events are in the log, its filter does not name their streams or types, or its router routes none of them" projection=tickets collection=tickets reads="category \"tickets\""`},
		{"prefix without its separator", app.Projection{Definition: noSeparator("tickets"), Reads: app.StreamPrefix("ticket/")},
			`msg="a document id begins with a separator: is the stream prefix of the projection's router missing its own (StreamSuffix(\"animal\") for streams \"animal-a1\" gives ids \"-a1\")?" projection=tickets collection=tickets document=/1`},
		{"set up right", app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := servers.Database(t)
			cmd := e2e.StartCommand(t, config(tc.p), "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "",
				"--log-level", "debug")
			cmd.WaitCheckpoint(t, db, "tickets", servers.Head())
			// The look comes within a second or two of the head; set up
			// right, it says at debug that it looked.
			const looked = "caught up with the head of $all"
			want := tc.want
			if want == "" {
				want = "looked at the projection's collection at the head: it has documents"
			}
			for deadline := time.Now().Add(time.Minute); !strings.Contains(cmd.Stderr(), want) && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			if code := cmd.Stop(t); code != 0 {
				t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
			}
			switch {
			case !strings.Contains(cmd.Stderr(), want):
				t.Errorf("run does not say\n%s\n%s", want, cmd.Stderr())
			case tc.want == "" && (strings.Contains(cmd.Stderr(), looked) || strings.Contains(cmd.Stderr(), "begins with a separator")):
				t.Errorf("run of a projection set up right warns:\n%s", cmd.Stderr())
			}
		})
	}
}
