package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
)

// A lease's holder is gone when it is a process of this host that no longer
// runs; one of another host, one that runs, this process, and a name that
// is not a holder's are not.
func TestGoneHolder_is_a_process_of_this_host_that_no_longer_runs(t *testing.T) {
	done := exec.Command(os.Args[0], "-test.run=^$")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, c := range []struct {
		holder string
		gone   bool
	}{
		{fmt.Sprintf("run %s/%d/abcdef", host, done.Process.Pid), true},
		{fmt.Sprintf("run %s/%d/abcdef", host, os.Getppid()), false},
		{fmt.Sprintf("run %s/%d/abcdef", host, os.Getpid()), false},
		{fmt.Sprintf("run elsewhere-%s/%d/abcdef", host, done.Process.Pid), false},
		{"another process", false},
		{fmt.Sprintf("run %s/x/abcdef", host), false},
	} {
		if got := goneHolder(c.holder); got != c.gone {
			t.Errorf("goneHolder(%q) = %v, want %v", c.holder, got, c.gone)
		}
	}

	// Killed and not reaped yet by its parent (a script that kills and
	// starts again at once): gone too.
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return // no /proc here
	}
	exited := exec.Command(os.Args[0], "-test.run=^$")
	if err := exited.Start(); err != nil {
		t.Fatal(err)
	}
	defer exited.Wait()
	holder := fmt.Sprintf("run %s/%d/abcdef", host, exited.Process.Pid)
	for deadline := time.Now().Add(time.Minute); !zombie(exited.Process.Pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child did not exit")
		}
	}
	if !goneHolder(holder) {
		t.Errorf("goneHolder(%q) of a process that exited, not reaped: false, want true", holder)
	}
}

// A replay refused for a lease whose holder is a process of this host
// that is gone (killed), on a server this process does not own (another
// process may write through it), says so and when the lease expires,
// rather than asking to stop a process that no longer runs.
func TestHoldReplayLease_of_a_gone_holder_says_it_is_gone(t *testing.T) {
	done := exec.Command(os.Args[0], "-test.run=^$")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	holder := fmt.Sprintf("run %s/%d/abcdef", host, done.Process.Pid)
	if _, err := store.AcquireLease(ctx, "loans", holder, time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := holdReplayLease(ctx, store, "loans", time.Minute, false, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "a process of this host that is gone") || strings.Contains(err.Error(), "stop it") {
		t.Fatalf("replay beside a gone holder: %v, want it said gone, not asked to be stopped", err)
	}
}
