package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/projectortest/e2e"
)

// fragile counts a ticket's notes, and panics on a note "poison" while
// broken is set: a bug, fixed by the next deployment.
func fragile(broken *atomic.Bool) *projector.Projection[ticket] {
	p := projector.New[ticket]("fragile", projector.StreamSuffix("ticket/"))
	projector.Create(p, func(opened) (ticket, error) { return ticket{}, nil })
	projector.On(p, func(t ticket, n noted) (ticket, error) {
		if broken.Load() && n.Text == "poison" {
			panic("bug: the poison note")
		}
		t.Notes++
		return t, nil
	})
	return p
}

// run --on-failure hold: a poison note holds its ticket only, while 200
// other tickets go on and the checkpoint reaches the head; status names the
// held ticket and its events; after the fix, replay-parked brings the held
// ticket to exactly the fold of its events, and frees it.
func TestRun_hold_quarantines_one_document_and_replay_parked_brings_it_to_the_fold(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	var broken atomic.Bool
	broken.Store(true)
	p := fragile(&broken)
	streams := map[string][]projector.Event{}
	for i := range 200 {
		id := fmt.Sprint(i)
		streams[id] = servers.Append(t, registry(), "ticket/"+id, opened{ID: id}, noted{Text: "a"}, noted{Text: "b"})
	}
	streams["sick"] = servers.Append(t, registry(), "ticket/sick",
		opened{ID: "sick"}, noted{Text: "a"}, noted{Text: "poison"}, noted{Text: "b"}, noted{Text: "c"})
	c := config(app.Projection{Definition: p, Reads: app.StreamPrefix("ticket/")})
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name()}
	cmd := e2e.StartCommand(t, c, append([]string{"run", "--on-failure", "hold", "--esdb", servers.ESDBURI(), "--http", ""}, common...)...)
	cmd.WaitCheckpoint(t, db, "fragile", servers.Head())
	// More notes of the held ticket and of the others, while it runs.
	streams["sick"] = append(streams["sick"], servers.Append(t, registry(), "ticket/sick", noted{Text: "d"})...)
	streams["7"] = append(streams["7"], servers.Append(t, registry(), "ticket/7", noted{Text: "e"})...)
	cmd.WaitCheckpoint(t, db, "fragile", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
	ctx := context.Background()
	store := mongostore.New(db)
	for id, evs := range streams {
		if id == "sick" {
			continue
		}
		if err := projectortest.CheckDocument(ctx, store, p, id, evs); err != nil {
			t.Fatal(err)
		}
	}
	if err := projectortest.CheckDocument(ctx, store, p, "sick", streams["sick"][:2]); err != nil {
		t.Fatalf("the held ticket moved: %v", err)
	}
	code, out, stderr := run(c, nil, append([]string{"status"}, common...)...)
	if code != 0 || !strings.Contains(out, "HELD (EVENTS)") || !strings.Contains(out, "1: sick (4)") {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, stderr)
	}
	if strings.Contains(stderr, "no projection has a checkpoint") {
		t.Errorf("status says no projection has a checkpoint, after a run:\n%s", stderr)
	}
	code, out, stderr = run(c, nil, append([]string{"status", "--parked"}, common...)...)
	// One line for the event that holds the document (the panic's stack
	// stays in its record), and one for the events held behind it.
	if code != 0 || strings.Count(out, "held sick: ") != 2 || !regexp.MustCompile(`(?m)^fragile +ticket/sick@2 +ticket\.noted +`).MatchString(out) || !regexp.MustCompile(`^PROJECTION +EVENT +TYPE +`).MatchString(out) ||
		strings.Count(out, "\n") != 3 || !strings.Contains(out, "bug: the poison note [and ") ||
		!regexp.MustCompile(`(?m)^fragile +3 more events +- .* held sick: held behind the event above`).MatchString(out) {
		t.Fatalf("status --parked: exit %d\n%s\n%s", code, out, stderr)
	}
	if strings.Contains(out, "] held sick") {
		t.Errorf("status --parked names the live collection as a build's:\n%s", out)
	}
	code, out, stderr = run(c, nil, append([]string{"status", "--parked", "--json"}, common...)...)
	var records []struct {
		Document, Type, Error string
		Held                  bool
		Revision              uint64
	}
	if err := json.Unmarshal([]byte(out), &records); code != 0 || err != nil || len(records) != 4 {
		t.Fatalf("status --parked --json: exit %d, %v, %d records\n%s\n%s", code, err, len(records), out, stderr)
	}
	for i, r := range records {
		if r.Document != "sick" || !r.Held || r.Revision != uint64(2+i) || r.Type != "ticket.noted" {
			t.Fatalf("status --parked --json: record %d %+v", i, r)
		}
	}
	if !strings.Contains(records[0].Error, "bug: the poison note") || !strings.Contains(records[0].Error, "frames of the engine below)") {
		t.Fatalf("status --parked --json: the first record's error is not whole: %q", records[0].Error)
	}
	// Still broken: nothing applies past the poison.
	code, out, stderr = run(c, nil, append([]string{"replay-parked", "fragile"}, common...)...)
	if code != 1 || !strings.Contains(out, "still held: document sick at ticket/sick@2") || strings.Count(out, "\n") > 4 ||
		!strings.Contains(stderr, "1 event still fails, and 3 more events held behind: they stay parked") {
		t.Fatalf("replay-parked while broken: exit %d\n%s\n%s", code, out, stderr)
	}
	if err := projectortest.CheckDocument(ctx, store, p, "sick", streams["sick"][:2]); err != nil {
		t.Fatalf("the held ticket moved: %v", err)
	}
	broken.Store(false)
	code, out, stderr = run(c, nil, append([]string{"replay-parked", "fragile"}, common...)...)
	if code != 0 || !strings.Contains(out, "document sick: its 4 held events applied; it is free") {
		t.Fatalf("replay-parked: exit %d\n%s\n%s", code, out, stderr)
	}
	if err := projectortest.CheckDocument(ctx, store, p, "sick", streams["sick"]); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run(c, nil, append([]string{"status"}, common...)...)
	if code != 0 || strings.Contains(out, "sick") {
		t.Fatalf("status after the replay: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(c, nil, append([]string{"status", "--parked"}, common...)...)
	if code != 0 || out != "" || strings.TrimSpace(stderr) != "no parked or held events" {
		t.Fatalf("status --parked after the replay: exit %d\nstdout %q\nstderr %q", code, out, stderr)
	}
}
