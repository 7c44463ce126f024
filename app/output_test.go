package app_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/projectortest/e2e"
)

// A rebuild writes its progress while the engine logs the events it parks,
// from other goroutines: Run's writers, here the bytes.Buffers of run, need
// not be safe for concurrent use (under -race, a race fails this test).
func TestRun_writes_its_output_one_write_at_a_time(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	for i := range 150 {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: fmt.Sprint(i)}, noted{Text: "bad"}, noted{Text: "good"})
	}
	c := config(app.Projection{Definition: threads(false), Reads: app.StreamPrefix("ticket/")})
	db := servers.Database(t)
	code, _, stderr := run(c, nil, "rebuild", "threads", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
		"--batch", "1", "--workers", "4")
	if code != 0 {
		t.Fatalf("rebuild: exit %d\n%s", code, stderr)
	}
	if n := strings.Count(stderr, "event parked"); n != 150 {
		t.Errorf("rebuild logged %d parked events, want 150:\n%s", n, stderr)
	}
}
