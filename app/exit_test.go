package app_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/projectortest/e2e"
)

// A projection that panics under block stops; the command's last line,
// when it ends, names the failure in one line per projection, not the
// panic's stack (the log has it).
func TestRun_the_exit_line_of_a_panicked_projection_is_one_line(t *testing.T) {
	servers := e2e.StartServers(t, e2e.Options{})
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
}
