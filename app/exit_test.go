package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/app/embedmongo"
	"github.com/revgate/projector/projectortest/e2e"
)

// A projection that panics under block stops; the command's last line,
// when it ends, names the failure in one line per projection, not the
// panic's stack (the log has it).
func TestRun_the_exit_line_of_a_panicked_projection_is_one_line(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	var broken atomic.Bool
	broken.Store(true)
	p := fragile(&broken)
	servers.Append(t, registry(), "ticket/sick", opened{ID: "sick"}, noted{Text: "poison"})
	c := config(app.Projection{Definition: p, Reads: app.StreamPrefix("ticket/")})
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
	// The projection stops at the poison note; the command runs on.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(cmd.Stderr(), "bug: the poison note") {
		if time.Now().After(deadline) {
			t.Fatalf("no failure logged:\n%s", cmd.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	code := cmd.Stop(t)
	lines := strings.Split(strings.TrimRight(cmd.Stderr(), "\n"), "\n")
	last := lines[len(lines)-1]
	if code != 1 || !strings.Contains(last, "bug: the poison note") || strings.Contains(cmd.Stderr(), "\ngoroutine ") {
		t.Fatalf("exit %d, last line %q, want the failure in one line and no stack outside the log's attribute\n%s", code, last, cmd.Stderr())
	}
	// And how to go on past it.
	if !strings.Contains(last, "run stops at an event that fails for good under --on-failure block") || !strings.Contains(last, "--on-failure hold or park") {
		t.Fatalf("last line %q, want how to go on past the event", last)
	}
}

// status exits 0 while every projection runs, and 3 once one has stopped:
// a monitoring script can tell without parsing its output. Its last line
// names the stopped projection and its error.
func TestStatus_exits_3_when_a_projection_has_stopped(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	var broken atomic.Bool
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "fine"})
	c := config(app.Projection{Definition: fragile(&broken), Reads: app.StreamPrefix("ticket/")},
		app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	common := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name()}
	cmd := e2e.StartCommand(t, c, append([]string{"run", "--http", ""}, common...)...)
	for deadline := time.Now().Add(time.Minute); strings.Count(cmd.Stderr(), "subscription reached the head") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the projections did not reach the head:\n%s", cmd.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _, stderr := run(c, nil, append([]string{"status"}, common...)...); code != 0 {
		t.Fatalf("status of running projections: exit %d, want 0\n%s", code, stderr)
	}

	broken.Store(true)
	servers.Append(t, registry(), "ticket/sick", opened{ID: "sick"}, noted{Text: "poison"})
	deadline := time.Now().Add(time.Minute)
	for {
		code, out, stderr := run(c, nil, append([]string{"status", "--json"}, common...)...)
		if code == 3 {
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			last := lines[len(lines)-1]
			if !strings.Contains(last, "1 of 2 projections stopped or failing") || !strings.Contains(last, "fragile (") || !strings.Contains(last, "poison") {
				t.Errorf("last line %q, want the stopped projection named with its error", last)
			}
			if !strings.Contains(out, `"lastError"`) {
				t.Errorf("--json has no lastError:\n%s", out)
			}
			break
		}
		if code != 0 || time.Now().After(deadline) {
			t.Fatalf("status after the poison note: exit %d, want 3 within a minute\n%s%s", code, out, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Stop(t)
}

// A stop (SIGTERM) that comes while run is starting (connecting, reading
// its collections and segments) ends it as a stop does later: exit 0, not
// a failure that blames a server for not answering in time.
func TestRun_stopped_while_it_starts_exits_0(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	for _, after := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
		time.Sleep(after)
		if code := cmd.Stop(t); code != 0 {
			t.Errorf("stopped after %v: exit %d\n%s", after, code, cmd.Stderr())
		}
	}
}

// status on the data dir of a run on the embedded server reads it through
// that run's server, instead of refusing the dir as in use.
func TestStatus_on_the_data_dir_of_a_running_embedded_server_reads_through_it(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	c.Embedded = embedmongo.Start
	dir := t.TempDir()
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--data-dir", dir, "--http", "")
	defer cmd.Stop(t)
	deadline := time.Now().Add(time.Minute)
	// Once the run's server listens, its lock says where (a status before
	// that would take the dir itself).
	for b, _ := os.ReadFile(filepath.Join(dir, "projector.lock")); !strings.Contains(string(b), "mongodb://"); b, _ = os.ReadFile(filepath.Join(dir, "projector.lock")) {
		if time.Now().After(deadline) {
			t.Fatalf("the run's server did not say where it listens:\n%s", cmd.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		code, out, stderr := run(c, nil, "status", "--data-dir", dir)
		if code == 0 && strings.Contains(out, "tickets") && strings.Contains(stderr, "is served by another process: reading it through its server at mongodb://") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status: exit %d\n%s\n%s\nrun:\n%s", code, out, stderr, cmd.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
}

// A stop that comes while a command has a real failure to report does not
// hide it: a command's joined errors (run's, one a projection) that include
// one the stop caused still exit 1 and are printed. Only run's own "stopped
// while starting" exits 0.
func TestRun_a_stop_does_not_hide_a_joined_failure(t *testing.T) {
	c := config()
	c.Commands = []app.Command{{Name: "joined", Summary: "x", Run: func(ctx context.Context, inv app.Invocation) error {
		blocked := errors.New("projection orders: stopped at an event that failed for good")
		stopped := fmt.Errorf("mongostore: stopped while connecting to 127.0.0.1: %w", ctx.Err())
		return errors.Join(blocked, stopped)
	}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal
	var o, e bytes.Buffer
	if code := c.Run(ctx, []string{"joined"}, nil, &o, &e); code != 1 || !strings.Contains(e.String(), "failed for good") {
		t.Fatalf("exit %d, stderr %q: want 1 and the blocked projection's failure", code, e.String())
	}
}

// A rebuild stopped before it began rebuilt nothing: it does not exit 0,
// so that "rebuild && deploy" does not go on.
func TestRebuild_stopped_before_it_began_does_not_exit_0(t *testing.T) {
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e bytes.Buffer
	code := c.Run(ctx, []string{"rebuild", "tickets", "--esdb", "kurrentdb://127.0.0.1:1?tls=false", "--mongo", "mongodb://127.0.0.1:1"}, nil, &o, &e)
	if code == 0 {
		t.Fatalf("a rebuild that rebuilt nothing: exit 0, stdout %q stderr %q", o.String(), e.String())
	}
}

// status --parked names the document a parked event was meant for (which
// moved past it), as it names a held one's.
func TestStatus_parked_names_the_document_of_a_parked_event(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	var broken atomic.Bool
	broken.Store(true)
	servers.Append(t, registry(), "ticket/sick", opened{ID: "sick"}, noted{Text: "poison"})
	c := config(app.Projection{Definition: fragile(&broken), Reads: app.StreamPrefix("ticket/")})
	common := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name()}
	cmd := e2e.StartCommand(t, c, append([]string{"run", "--http", "", "--on-failure", "park"}, common...)...)
	cmd.WaitCheckpoint(t, db, "fragile", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
	code, out, stderr := run(c, nil, append([]string{"status", "--parked"}, common...)...)
	if code != 0 || !regexp.MustCompile(`(?m)^fragile +ticket/sick@1 +ticket\.noted .* sick: .*bug: the poison note`).MatchString(out) ||
		!strings.Contains(out, "[BUILD] [HELD] DOCUMENT: ERROR") {
		t.Fatalf("status --parked: exit %d\n%s\n%s", code, out, stderr)
	}
}

// status reads: a --data-dir where nothing has run (a typo) is an error,
// not a store it makes and reads as a projector that has not started.
func TestStatus_of_a_data_dir_that_does_not_exist_fails_and_makes_none(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	c.Embedded = embedmongo.Start
	code, out, stderr := run(c, nil, "status", "--data-dir", dir)
	if code != 1 || !strings.Contains(stderr, "--data-dir "+dir+": no such directory") {
		t.Errorf("status --data-dir %s: exit %d, want 1 and the directory named\n%s\n%s", dir, code, out, stderr)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("status made %s: %v", dir, err)
	}
}

// With the event store down, status shows what the store knows (the
// checkpoints, parked events, errors), without the head, then exits 1:
// during an outage is when it matters.
func TestStatus_with_the_event_store_down_shows_the_store_and_exits_1(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
	cmd.WaitCheckpoint(t, db, "tickets", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
	code, out, stderr := run(c, nil, "status", "--esdb", "esdb://127.0.0.1:1?tls=false", "--mongo", servers.MongoURI(), "--database", db.Name())
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if code != 1 || !strings.Contains(out, "tickets") || !strings.Contains(out, strconv.FormatUint(servers.Head(), 10)) ||
		!strings.Contains(stderr, "the event store did not answer") || !strings.Contains(lines[len(lines)-1], "127.0.0.1:1") {
		t.Fatalf("status with the event store down: exit %d, want 1 after the table with the checkpoint, and the error last\n%s\n%s", code, out, stderr)
	}
}
