package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest/e2e"
)

// A projection declares a version: run refuses a collection that another
// version built, points to rebuild, and waits (status says nobody runs
// it); rebuild fills a new collection with the new version, and the
// refused run follows the switch and goes on there, as a rollout that
// deploys before it rebuilds needs; the old version's run is then refused
// in turn, told that it is superseded (a rebuild by it would undo the
// upgrade).
func TestRun_refuses_a_collection_another_version_built_and_rebuild_moves_it_on(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	version := func(v int) app.Config {
		return config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/"), Version: v})
	}
	common := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name()}
	refused := func(c app.Config, built, this int, http string) *e2e.Running {
		t.Helper()
		cmd := e2e.StartCommand(t, c, append([]string{"run", "--http", http}, common...)...)
		want := "was built by version " + itoa(built) + ", and this binary's is version " + itoa(this) + "; rebuild it to version " + itoa(this) + " (tickets rebuild tickets"
		if built > this {
			// Superseded: the way out is to stop it, not to rebuild.
			want = "was built by version " + itoa(built) + ", newer than this binary's version " + itoa(this) + ": this binary is superseded; stop it"
		}
		for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(cmd.Stderr(), want); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("run of version %d does not say %q\n%s", this, want, cmd.Stderr())
			}
		}
		return cmd
	}

	cmd := e2e.StartCommand(t, version(0), append([]string{"run", "--http", ""}, common...)...)
	cmd.WaitCheckpoint(t, db, "tickets", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
	next := refused(version(1), 0, 1, "")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		code, _, stderr := run(version(1), nil, append([]string{"status"}, common...)...)
		if code == 3 && strings.Contains(stderr, "built by version 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status while no process runs the projection: exit %d, want 3\n%s", code, stderr)
		}
	}
	code, out, stderr := run(version(1), nil, append([]string{"rebuild", "tickets"}, common...)...)
	if code != 0 || !strings.Contains(out, "readers now use tickets_r") {
		t.Fatalf("rebuild: exit %d\n%s\n%s", code, out, stderr)
	}
	active, err := mongostore.New(db).ActiveCollection(context.Background(), "tickets", "tickets")
	if err != nil {
		t.Fatal(err)
	}
	servers.Append(t, registry(), "ticket/1", noted{Text: "b"})
	next.WaitCheckpoint(t, db, active, servers.Head())
	if code := next.Stop(t); code != 0 {
		t.Fatalf("the run that followed the switch: exit %d\n%s", code, next.Stderr())
	}
	if code, _, stderr := run(version(1), nil, append([]string{"status"}, common...)...); code != 0 {
		t.Fatalf("status once the new version runs: exit %d\n%s", code, stderr)
	}
	addr := freeAddr(t)
	old := refused(version(0), 1, 0, addr)
	// It stands by: the other version runs the projection, so its last
	// position and lag are not the projection's, and nothing here is
	// blocked for an operator to fix.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		metrics := scrape(t, "http://"+addr+"/metrics")
		standby := strings.Contains(metrics, `projector_state{projection="tickets",state="standby"} 1`)
		if standby && !strings.Contains(metrics, `projector_lag_seconds{projection="tickets"}`) &&
			!strings.Contains(metrics, `projector_lag_events{projection="tickets"}`) &&
			!strings.Contains(metrics, `projector_checkpoint_position{projection="tickets"}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the superseded binary's /metrics: want it standing by, with no lag or position of the projection:\n%s", metrics)
		}
	}
	if code := old.Stop(t); code != 1 {
		t.Fatalf("the old version, refused, stopped: exit %d, want 1\n%s", code, old.Stderr())
	}
	// A rebuild by the old version would switch readers back to its fold:
	// refused, readers left where they are, unless it is the purpose.
	code, out, stderr = run(version(0), nil, append([]string{"rebuild", "tickets"}, common...)...)
	want := "collection " + active + ", which readers of projection tickets use, was built by version 1, newer than this binary's version 0"
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "give --roll-back") {
		t.Fatalf("a rebuild by the older version: exit %d, %s%s; want 1 and %q", code, out, stderr, want)
	}
	if now, _ := mongostore.New(db).ActiveCollection(context.Background(), "tickets", "tickets"); now != active {
		t.Fatalf("readers moved from %s to %s on a refused rebuild", active, now)
	}
	code, out, stderr = run(version(0), nil, append([]string{"rebuild", "tickets", "--roll-back"}, common...)...)
	if code != 0 || !strings.Contains(out, "readers now use tickets_r") {
		t.Fatalf("a rebuild by the older version, --roll-back: exit %d\n%s\n%s", code, out, stderr)
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

// run logs an event type nobody registered, at Warn when it is close to a
// registered one or feeds a document (which moves past it), counts it in
// its last line, and status shows the counts.
// Events stored in an older form go in as they are (the test kit takes
// them), and the document moves past those it does not know.
func TestRun_and_status_report_the_unknown_types_met(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	events := servers.Append(t, registry(), "ticket/1", opened{ID: "1"},
		projector.Event{Type: "ticket.noted.v2", Data: []byte(`{"text": "new"}`)},
		projector.Event{Type: "ticket.closed", Data: []byte(`{}`)},
		projector.Event{Type: "ticket.noted.v2", Data: []byte(`{"text": "newer"}`)},
		noted{Text: "a"})
	if events[1].Payload != nil {
		t.Fatalf("an unregistered type decoded: %+v", events[1])
	}
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name()}
	cmd := e2e.StartCommand(t, c, append([]string{"run", "--esdb", servers.ESDBURI(), "--http", ""}, common...)...)
	cmd.WaitCheckpoint(t, db, "tickets", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
	for _, want := range []string{
		`level=WARN msg="an event type nobody registered, close to a registered one: a rename or a new version without its upcaster?" runner=tickets type=ticket.noted.v2 registered=ticket.noted`,
		// Not close to a registered type, but in a stream that feeds a
		// document, which moves past it: said at Warn too.
		`level=WARN msg="an event type nobody registered, in a stream that feeds a document: the document moves past it (a rename or a new version without its upcaster? FailUnknownTypes makes such events fail instead)" runner=tickets type=ticket.closed projection=tickets document=1`,
		`unknown_types="ticket.closed (1), ticket.noted.v2 (2)"`,
	} {
		if !strings.Contains(cmd.Stderr(), want) {
			t.Errorf("run's log does not say\n%s\n%s", want, cmd.Stderr())
		}
	}
	code, out, stderr := run(c, nil, append([]string{"status"}, common...)...)
	if want := "tickets met events of types nobody registered: ticket.closed (1), ticket.noted.v2 (2)"; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("status: exit %d, want %q\n%s\n%s", code, want, out, stderr)
	}
	_, out, _ = run(c, nil, append([]string{"status", "--json"}, common...)...)
	var lines []struct{ UnknownTypes map[string]uint64 }
	if err := json.Unmarshal([]byte(out), &lines); err != nil || len(lines) != 1 || lines[0].UnknownTypes["ticket.noted.v2"] != 2 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	var doc ticket
	if _, rev, err := projector.ReadDocument(context.Background(), mongostore.New(db), tickets("tickets"), "1", &doc); err != nil || rev != 4 || doc.Notes != 1 {
		t.Fatalf("document %+v at revision %d (%v): want 1 note at revision 4", doc, rev, err)
	}
	// A rebuild says the same, on stderr and at its warn level by default,
	// and status still shows the counts once readers use its collection.
	code, out, stderr = run(c, nil, append([]string{"rebuild", "tickets", "--esdb", servers.ESDBURI()}, common...)...)
	for _, want := range []string{
		`level=WARN msg="an event type nobody registered, close to a registered one: a rename or a new version without its upcaster?" runner=tickets_r`,
		"tickets met events of types nobody registered, passed over: ticket.closed (1), ticket.noted.v2 (2)",
	} {
		if code != 0 || !strings.Contains(stderr, want) {
			t.Errorf("rebuild: exit %d, its stderr does not say\n%s\n%s\n%s", code, want, out, stderr)
		}
	}
	if strings.Contains(stderr, "level=INFO") {
		t.Errorf("rebuild logs at info by default:\n%s", stderr)
	}
	code, out, stderr = run(c, nil, append([]string{"status"}, common...)...)
	if want := "tickets met events of types nobody registered: ticket.closed (1), ticket.noted.v2 (2)"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("status after the rebuild: exit %d, want %q\n%s\n%s", code, want, out, stderr)
	}
}

// A rebuild of a projection that never ran (new, or renamed) says there was
// no collection before, instead of one kept.
func TestRebuild_of_a_projection_that_never_ran_says_it_had_no_collection(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	code, out, stderr := run(c, nil, "rebuild", "tickets", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name())
	if want := "there was no collection tickets before: a new projection, or a renamed one"; code != 0 || !strings.Contains(out, want) || strings.Contains(out, "is kept") {
		t.Fatalf("rebuild: exit %d, want it to say %q\n%s\n%s", code, want, out, stderr)
	}
}

// freeAddr is a local address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrape is the body of a GET of url ("" when it does not answer).
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return ""
	}
	return string(b)
}

// closed is ticket.closed, registered by a later build.
type closed struct{}

// The unknown types the runs of a projection met stay recorded for status,
// summed, when a later run meets other ones or none: the documents that met
// them still miss them. A build that registers one now says so, and that
// the documents need a rebuild.
func TestStatus_keeps_the_unknown_types_of_every_run_and_says_which_this_build_registers_now(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name()}
	runToHead := func() {
		t.Helper()
		cmd := e2e.StartCommand(t, c, append([]string{"run", "--esdb", servers.ESDBURI(), "--http", ""}, common...)...)
		cmd.WaitCheckpoint(t, db, "tickets", servers.Head())
		if code := cmd.Stop(t); code != 0 {
			t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
		}
	}
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, projector.Event{Type: "ticket.closed", Data: []byte(`{}`)})
	runToHead()
	servers.Append(t, registry(), "ticket/2", opened{ID: "2"}, projector.Event{Type: "ticket.archived", Data: []byte(`{}`)})
	runToHead() // meets another one only
	servers.Append(t, registry(), "ticket/3", opened{ID: "3"}, noted{Text: "a"})
	runToHead() // meets none

	code, out, stderr := run(c, nil, append([]string{"status"}, common...)...)
	for _, want := range []string{
		"tickets met events of types nobody registered: ticket.archived (1), ticket.closed (1)",
		"ticket.archived, ticket.closed: a rename or a new version without its upcaster? if tickets is to handle them, once a build registers them, tickets rebuild tickets folds them in",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status after three runs: exit %d, want %q\n%s\n%s", code, want, out, stderr)
		}
	}

	// A build that registers ticket.closed and handles it.
	closing := tickets("tickets")
	projector.On(closing, func(t ticket, _ closed) (ticket, error) { return t, nil })
	newer := config(app.Projection{Definition: closing, Reads: app.StreamPrefix("ticket/")})
	newer.Registry = registry()
	projector.Register[closed](newer.Registry, "ticket.closed")
	code, out, stderr = run(newer, nil, append([]string{"status"}, common...)...)
	want := "this build registers ticket.closed now: documents that passed over those events miss them until tickets rebuild tickets; " +
		"those parked or held (under FailUnknownTypes) are applied by tickets replay-parked tickets (status --parked lists them)"
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("status of a build that registers ticket.closed: exit %d, want %q\n%s\n%s", code, want, out, stderr)
	}
	_, out, _ = run(newer, nil, append([]string{"status", "--json"}, common...)...)
	var lines []struct {
		UnknownTypes  map[string]uint64
		RegisteredNow []string
	}
	if err := json.Unmarshal([]byte(out), &lines); err != nil || len(lines) != 1 || len(lines[0].UnknownTypes) != 2 ||
		strings.Join(lines[0].RegisteredNow, ",") != "ticket.closed" {
		t.Errorf("status --json: %v\n%s", err, out)
	}
}
