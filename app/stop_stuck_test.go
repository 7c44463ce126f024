package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/revgate/projector/projectortest/e2e"
)

// A SIGTERM while a projection's step never returns (it has no context to
// end it) does not hold the process past any grace period: after
// --drain-timeout the runner says why at error level, and after the
// stop's 30 s more the projector gives up, saying so, and exits 1, rather
// than hang until it is killed without a word.
func TestRun_a_stop_while_a_step_never_returns_ends_in_time_and_says_why(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "stuck"})
	stuck := filepath.Join(t.TempDir(), "stuck")
	cmd, stderr := startBinaryEnv(t, "stuck-tickets", []string{"APP_TEST_STUCK=" + stuck}, "run", "--esdb", servers.ESDBURI(),
		"--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "", "--drain-timeout", "1s")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(time.Minute)
	for stepped := false; !stepped; {
		select {
		case <-done:
			t.Fatalf("exited before its step ran:\n%s", stderr)
		case <-deadline:
			t.Fatalf("the step never ran:\n%s", stderr)
		case <-time.After(50 * time.Millisecond):
			_, err := os.Stat(stuck)
			stepped = err == nil
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("still running 2 minutes after SIGTERM:\n%s", stderr)
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr)
	}
	for _, want := range []string{
		`level=ERROR msg="the events being handled have not returned since they were abandoned: a projection's step, or a call to the store, does not return; the runner waits for it"`,
		`level=ERROR msg="giving up on the stop" err="the stop did not end in time: a projection's step, or a call to the store, does not return`,
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("no line %s:\n%s", want, stderr)
		}
	}
}
