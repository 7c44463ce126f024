package app

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
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
