package main_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// Three run processes of the same projection: one holds its lease and runs
// it, two stand by. The leader is killed with SIGKILL ten times while
// traffic goes on; each time a standby takes over from the stored
// checkpoint. Every document ends equal to its fold, and the checkpoint
// never moves back.
func TestRun_three_processes_one_leader_killed_ten_times_during_traffic(t *testing.T) {
	const lease = 2 * time.Second
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	args := []string{"run", "--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", cart.DetailsName,
		"--http", "", "--checkpoint-interval", "100ms", "--lease", lease.String(),
		// A process started while the machine runs every package's tests
		// may take more than the default 10 s to see its servers answer.
		"--connect-timeout", "1m"}

	var mu sync.Mutex
	procs := map[int]*process{}
	var all []*process
	spawn := func() {
		p := startBinary(t, args...)
		mu.Lock()
		procs[p.cmd.Process.Pid] = p
		all = append(all, p)
		mu.Unlock()
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, p := range all {
			lines := strings.Split(strings.TrimSpace(p.stderrText()), "\n")
			t.Logf("process %d, last lines of its log:\n%s", p.cmd.Process.Pid, strings.Join(lines[max(0, len(lines)-12):], "\n"))
		}
	})
	for range 3 {
		spawn()
	}

	// Traffic: carts appended one event at a time, in the background.
	lives, stop := appendLives(t, client, 5*time.Millisecond)

	// The checkpoint never moves back.
	var backwards atomic.Value
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	var watchOnce sync.Once
	unwatch := func() {
		watchOnce.Do(func() { close(stopWatch) })
		watch.Wait()
	}
	t.Cleanup(unwatch)
	watch.Go(func() {
		last := uint64(0)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if cp, err := store.LoadCheckpoint(context.Background(), cart.DetailsName); err == nil && cp != nil {
				if cp.Position < last {
					backwards.Store(fmt.Sprintf("%d after %d", cp.Position, last))
				}
				last = max(last, cp.Position)
			}
		}
	})

	leader := func() (pid int, token int64) {
		leases, err := store.Leases(context.Background())
		if l := leases[cart.DetailsName]; err == nil && l.Held(time.Now()) {
			f := strings.Split(strings.Fields(l.Holder)[1], "/")
			pid, _ = strconv.Atoi(f[1])
			return pid, l.Token
		}
		return 0, 0
	}
	// The leader to kill is the holder the store names that says itself it
	// holds the lease under that token: on the embedded server two takers
	// can both write the lease at one moment, and the store may name, for a
	// moment, the one whose write did not stick, which stands by (README,
	// "Leases on the embedded server").
	says := func(pid int, token int64) bool {
		mu.Lock()
		p := procs[pid]
		mu.Unlock()
		return p != nil && strings.Contains(p.stderrText(), fmt.Sprintf(`msg="holds the projection's lease" projection=%s token=%d`, cart.DetailsName, token))
	}
	var takeovers []time.Duration
	for kill := 1; kill <= 10; kill++ {
		var pid int
		var token int64
		for deadline := time.Now().Add(time.Minute); pid == 0 || !says(pid, token); time.Sleep(20 * time.Millisecond) {
			if pid, token = leader(); time.Now().After(deadline) {
				t.Fatalf("kill %d: no leader after a minute (the store names pid %d, token %d)", kill, pid, token)
			}
		}
		mu.Lock()
		p := procs[pid]
		delete(procs, pid)
		mu.Unlock()
		if p == nil {
			t.Fatalf("kill %d: the lease is held by pid %d, none of ours", kill, pid)
		}
		time.Sleep(300 * time.Millisecond) // let it work a little
		p.cmd.Process.Signal(syscall.SIGKILL)
		killed := time.Now()
		<-p.done
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			if next, nextToken := leader(); next != 0 && next != pid && nextToken > token {
				takeovers = append(takeovers, time.Since(killed))
				break
			}
			if time.Now().After(deadline) {
				mu.Lock()
				alive := 0
				for _, p := range procs {
					select {
					case <-p.done:
					default:
						alive++
					}
				}
				mu.Unlock()
				t.Fatalf("kill %d: no process took over the lease of %d (%d of the others alive)", kill, pid, alive)
			}
		}
		spawn()
	}
	stop()
	t.Logf("takeover after SIGKILL of the leader, lease %v: %v", lease, takeovers)
	for i, d := range takeovers {
		// The holder renews every third of the lease, and a standby tries
		// every tenth of it: a takeover comes within the lease and a try.
		// Bounded generously for a loaded machine.
		if d > 3*lease {
			t.Errorf("takeover %d took %v, more than three times the lease %v", i+1, d, lease)
		}
	}

	head := srv.Head()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if cp, err := store.LoadCheckpoint(context.Background(), cart.DetailsName); err == nil && cp != nil && cp.Position >= head {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the checkpoint did not reach the head %d", head)
		}
	}
	unwatch()
	if b := backwards.Load(); b != nil {
		t.Errorf("the checkpoint moved back: %s", b)
	}
	mu.Lock()
	for _, p := range procs {
		if code := p.terminate(t); code != 0 {
			t.Errorf("a process exited %d after SIGTERM\n%s", code, p.stderrText())
		}
	}
	mu.Unlock()
	n := 0
	lives.Range(func(k, v any) bool {
		n++
		if err := projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), k.(string), v.([]projector.Event)); err != nil {
			t.Error(err)
		}
		return true
	})
	t.Logf("%d carts, every one equal to its fold", n)
}

// A second run of a projection stands by while the first holds its lease:
// its /readyz and metrics say so, status names the holder, replay-parked
// refuses while it runs; when the holder stops, the standby takes over.
func TestRun_a_second_process_stands_by_and_replay_parked_refuses_while_the_first_runs(t *testing.T) {
	srv := esdbtest.New(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	appendCarts(t, srv.Client(t), 0, 4, 4, map[string][]projector.Event{})
	common := []string{"--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", cart.DetailsName}
	run := func(httpAddr string) *process {
		return startBinary(t, append([]string{"run", "--esdb", srv.URI(), "--http", httpAddr, "--checkpoint-interval", "100ms", "--lease", "3s"}, common...)...)
	}
	first := run("")
	waitCheckpoint(t, first, store, srv.Head())
	second := run("127.0.0.1:0")
	base := ""
	for deadline := time.Now().Add(time.Minute); base == ""; time.Sleep(20 * time.Millisecond) {
		if m := regexp.MustCompile(`msg=http addr=(\S+)`).FindStringSubmatch(second.stderrText()); m != nil {
			base = "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no http address:\n%s", second.stderrText())
		}
	}
	holder := fmt.Sprintf("/%d/", first.cmd.Process.Pid)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		code, body := get(t, base+"/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "standby: run ") && strings.Contains(body, holder) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz of the standby: %d %q", code, body)
		}
	}
	_, body := get(t, base+"/metrics")
	if v := metric(t, body, `projector_lease_held{projection="cart_details"}`); v != 0 {
		t.Errorf("the standby says it holds the lease: %v", v)
	}
	out, _, code := runBinary(t, 20*time.Second, append([]string{"status", "--json"}, common...)...)
	if code != 0 || !strings.Contains(out, `"leaseHolder": "run `) || !strings.Contains(out, holder) {
		t.Fatalf("status does not name the holder: exit %d\n%s", code, out)
	}
	_, errOut, code := runBinary(t, 20*time.Second, append([]string{"replay-parked", cart.DetailsName}, common[:4]...)...)
	if code != 1 || !strings.Contains(errOut, "projection cart_details is run by run ") || !strings.Contains(errOut, holder) {
		t.Fatalf("replay-parked while it runs: exit %d %q", code, errOut)
	}
	// The first stops: the standby takes over and becomes ready.
	if code := first.terminate(t); code != 0 {
		t.Fatalf("first: exit %d\n%s", code, first.stderrText())
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := get(t, base+"/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not take over:\n%s", second.stderrText())
		}
	}
	if code := second.terminate(t); code != 0 {
		t.Fatalf("second: exit %d\n%s", code, second.stderrText())
	}
}

// A run on the embedded server killed with SIGKILL leaves its lease held
// for its whole time. The next run on the same data dir (whose lock proves
// the first one's server gone, and whose holder's process no longer runs)
// takes it over at once, rather than standing by until it expires.
func TestRun_on_the_embedded_server_after_a_kill_takes_over_the_lease_of_the_process_gone(t *testing.T) {
	srv := esdbtest.New(t)
	appendCarts(t, srv.Client(t), 0, 4, 4, map[string][]projector.Event{})
	args := []string{"run", "--esdb", srv.URI(), "--data-dir", t.TempDir(), "--http", "", "--checkpoint-interval", "100ms",
		"--lease", "10m", "--projections", cart.DetailsName}
	first := startBinary(t, args...)
	waitFor(t, first, regexp.MustCompile(`msg="(caught up)"`))
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	second := startBinary(t, args...)
	waitFor(t, second, regexp.MustCompile(`msg="(caught up)"`))
	if !strings.Contains(second.stderrText(), `msg="took over the lease of a process that is gone"`) || strings.Contains(second.stderrText(), "standing by") {
		t.Fatalf("the second run did not take over the lease of the first, killed:\n%s", second.stderrText())
	}
	if code := second.terminate(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, second.stderrText())
	}
}

// A rebuild on the embedded server killed with SIGKILL leaves its lease
// held. The next rebuild on the same data dir takes it over at once, as run
// does, and resumes, rather than refusing, saying a dead process runs it.
func TestRebuild_on_the_embedded_server_after_a_kill_takes_over_the_lease_of_the_process_gone(t *testing.T) {
	srv := esdbtest.New(t)
	appendCarts(t, srv.Client(t), 0, 100, 20, map[string][]projector.Event{})
	args := []string{"rebuild", cart.DetailsName, "--esdb", srv.URI(), "--data-dir", t.TempDir()}
	// One event at a time, so that it is killed mid-way; the second takes
	// the defaults.
	first := startBinary(t, append(args, "--workers", "1", "--batch", "1")...)
	waitFor(t, first, regexp.MustCompile(`(\d+) events \(`)) // its progress: it holds the lease
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	out, errOut, code := runBinary(t, 5*time.Minute, args...)
	if code != 0 || !strings.Contains(errOut, "took over the lease of the rebuild of "+cart.DetailsName) || !strings.Contains(out, "rebuilt "+cart.DetailsName) {
		t.Fatalf("the second rebuild: exit %d\n%s\n%s", code, out, errOut)
	}
}

// A run on the embedded server killed with SIGKILL leaves its lease held:
// replay-parked on the same data dir takes it over at once, as run does,
// rather than refusing, saying a dead process runs the projection.
func TestReplayParked_on_the_embedded_server_after_a_kill_takes_over_the_lease_of_the_process_gone(t *testing.T) {
	srv := esdbtest.New(t)
	appendCarts(t, srv.Client(t), 0, 4, 4, map[string][]projector.Event{})
	dir := t.TempDir()
	first := startBinary(t, "run", "--esdb", srv.URI(), "--data-dir", dir, "--http", "", "--checkpoint-interval", "100ms",
		"--lease", "10m", "--projections", cart.DetailsName)
	waitFor(t, first, regexp.MustCompile(`msg="(caught up)"`))
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	out, errOut, code := runBinary(t, 2*time.Minute, "replay-parked", cart.DetailsName, "--esdb", srv.URI(), "--data-dir", dir, "--lease", "10m")
	if code != 0 || !strings.Contains(errOut, "took over the lease of "+cart.DetailsName) {
		t.Fatalf("replay-parked after the kill: exit %d\n%s\n%s", code, out, errOut)
	}
}
