package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projectortest/e2e"
)

// A projection that ran with --group has no checkpoint: the group's
// position is the server's. status without --group says that a group feeds
// it and how to see it, not that nothing started, and counts no events
// behind from the start of $all.
func TestStatus_without_group_says_which_projections_a_group_feeds(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"}, noted{Text: "b"})
	// What run --group records of the projection's group.
	if err := mongostore.New(db).RecordGroup(context.Background(), "tickets", "crew-tickets"); err != nil {
		t.Fatal(err)
	}
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")},
		app.Projection{Definition: tickets("others"), Reads: app.StreamPrefix("ticket/")})
	code, out, stderr := run(c, nil, "status", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--json")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	want := "(projection tickets ran with --group: persistent subscription group crew-tickets feeds it, whose position is the server's, not a checkpoint; status --group crew shows it)"
	if !strings.Contains(stderr, want) {
		t.Errorf("status does not say %q:\n%s", want, stderr)
	}
	if strings.Contains(stderr, "no projection has a checkpoint") {
		t.Errorf("status says nothing started, of a projection a group feeds:\n%s", stderr)
	}
	var lines []struct {
		Projection  string
		FedByGroups []string
		Behind      *int
	}
	if err := json.Unmarshal([]byte(out), &lines); err != nil || len(lines) != 2 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	for _, l := range lines {
		switch l.Projection {
		case "tickets":
			if l.Behind != nil || len(l.FedByGroups) != 1 || l.FedByGroups[0] != "crew-tickets" {
				t.Errorf("tickets: behind %v, fed by %v; want no count from the start, fed by crew-tickets", l.Behind, l.FedByGroups)
			}
		case "others":
			if l.Behind == nil || *l.Behind != 3 || len(l.FedByGroups) != 0 {
				t.Errorf("others, which no group feeds: behind %v, fed by %v; want 3, none", l.Behind, l.FedByGroups)
			}
		}
	}
}
