package main_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// checkpointsIn returns the stored checkpoint of each of the n segments of
// collection.
func checkpointsIn(t testing.TB, store *mongostore.Store, collection string, n int) map[int]uint64 {
	t.Helper()
	all, err := store.Checkpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]uint64{}
	for k := range n {
		if st, ok := all[segment.CheckpointName(collection, k, n)]; ok && st.Checkpoint != nil {
			out[k] = st.Checkpoint.Position
		}
	}
	return out
}

// waitAllAt waits until each of the n segments of collection has its
// checkpoint at head or past it.
func waitAllAt(t testing.TB, store *mongostore.Store, collection string, n int, head uint64) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		cps := checkpointsIn(t, store, collection, n)
		at := 0
		for _, pos := range cps {
			if pos >= head {
				at++
			}
		}
		if at == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the segments of %s did not reach the head %d: %v", collection, head, cps)
		}
	}
}

// buildingOf waits until p says which collection it rebuilds into.
func buildingOf(t testing.TB, p *process) string {
	t.Helper()
	re := regexp.MustCompile(`rebuilding \S+ into (\S+) in \d+ segments`)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(p.stdout.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d does not say what it rebuilds into:\n%s\n%s", p.cmd.Process.Pid, p.stdout.String(), p.stderrText())
		}
	}
}

// waitExit waits for p to exit and returns its exit code.
func waitExit(t testing.TB, p *process, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("process %d did not exit within %v\n%s\n%s", p.cmd.Process.Pid, within, p.stdout.String(), p.stderrText())
	}
	return p.cmd.ProcessState.ExitCode()
}

// A projection run in 4 segments is rebuilt by processes that each run
// rebuild --segments 4: one, stopped by SIGTERM as soon as it has stored a
// segment's checkpoint, says it was interrupted and lets its leases go; a
// rebuild with another number of segments, or without, is refused; then three share the segments, one of them is killed (SIGKILL) while it
// holds a segment not yet at the head, and the other two take its segments
// once its leases expire. Both exit 0, exactly one says it switched
// readers; the new collection is active, every document in it equals its
// fold, and each segment's checkpoint in it is at the head. A run
// --segments 4 then goes on from those checkpoints: it applies none of the
// rebuilt events, none of its checkpoint saves is refused, and the events
// appended next are applied once each.
func TestRebuild_segments_shared_by_processes_one_killed_then_run_goes_on_from_their_checkpoints(t *testing.T) {
	const n, lease = 4, 2 * time.Second
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 200, 6, carts) // enough that the three find segments short of the head
	// The log ends with an event the projection does not read: the
	// segments' checkpoints still reach the head.
	if _, err := client.AppendToStream(context.Background(), "other-1", kurrentdb.AppendToStreamOptions{},
		kurrentdb.EventData{EventID: uuid.New(), EventType: "OtherThing", ContentType: kurrentdb.ContentTypeJson, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	head := srv.Head()
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--connect-timeout", "1m"}
	runArgs := append([]string{"run", "--http", "", "--projections", cart.DetailsName, "--segments", "4", "--lease", lease.String(),
		"--checkpoint-interval", "100ms"}, common...)
	rebuildArgs := append([]string{"rebuild", cart.DetailsName, "--segments", "4", "--lease", lease.String(), "--workers", "1", "--batch", "10"}, common...)
	var procs []*process
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				t.Logf("process %d:\n%s\n%s", p.cmd.Process.Pid, p.stdout.String(), grepLines(p.stderrText(), "segment", "rebuil", "projection stopped", "err"))
			}
		}
	})
	start := func(args []string) *process {
		p := startBinary(t, args...)
		procs = append(procs, p)
		return p
	}

	first := start(runArgs)
	waitAllAt(t, store, cart.DetailsName, n, head)
	if code := first.terminate(t); code != 0 {
		t.Fatalf("run --segments 4: exit %d", code)
	}

	// Interrupted: its segments' checkpoints are kept, its leases let go.
	early := start(rebuildArgs)
	building := buildingOf(t, early)
	for deadline := time.Now().Add(time.Minute); len(checkpointsIn(t, store, building, n)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no segment checkpoint of the rebuild into %s after a minute", building)
		}
	}
	if code := early.terminate(t); code != 1 || !strings.Contains(early.stderrText(), "run it again to resume") {
		t.Fatalf("rebuild --segments 4 after SIGTERM: exit %d, want 1 and how to resume", code)
	}
	if held := rebuildLeases(t, store, building, n, time.Now()); len(held) != 0 {
		t.Fatalf("the interrupted process still holds the leases of segments %v", held)
	}

	// status shows the rebuild at the lowest of its segments' checkpoints.
	cps := checkpointsIn(t, store, building, n)
	if len(cps) != n {
		t.Fatalf("the interrupted process stored the checkpoints of segments %v; want all %d", cps, n)
	}
	status, _, _ := runBinary(t, time.Minute, append([]string{"status", "--projections", cart.DetailsName}, common...)...)
	if want := fmt.Sprintf("%s at %d", building, slices.Min(slices.Collect(maps.Values(cps)))); !strings.Contains(status, want) {
		t.Errorf("status does not show the rebuild at %q:\n%s", want, status)
	}

	// Another number of segments for the rebuild in progress, or none, is refused.
	for _, segs := range []string{"8", "1"} {
		_, errOut, code := runBinary(t, time.Minute, append([]string{"rebuild", cart.DetailsName, "--segments", segs}, common...)...)
		if want := "into " + building + " runs in 4 segments"; code != 1 || !strings.Contains(errOut, want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("rebuild --segments %s during a rebuild in 4: exit %d, %q; want 1 and one line with %q", segs, code, errOut, want)
		}
	}

	three := []*process{start(rebuildArgs), start(rebuildArgs), start(rebuildArgs)}
	victim, lost := killHolder(t, store, three, building, n, head)
	var survivors []*process
	for _, p := range three {
		if p != victim {
			survivors = append(survivors, p)
		}
	}
	switched, took := 0, 0
	ranLost := regexp.MustCompile(`this process ran segments (?:\d+,)*` + fmt.Sprint(lost) + `\b`)
	for _, p := range survivors {
		if code := waitExit(t, p, 3*time.Minute); code != 0 {
			t.Fatalf("rebuild --segments 4: exit %d\n%s\n%s", code, p.stdout.String(), p.stderrText())
		}
		out := p.stdout.String()
		if ranLost.MatchString(out) {
			took++
		}
		if !strings.Contains(out, "rebuilt cart_details in 4 segments: this process ran ") {
			t.Errorf("process %d does not say what it did:\n%s", p.cmd.Process.Pid, out)
		}
		if strings.Contains(out, "this process switched readers: they now use "+building) {
			switched++
		} else if !strings.Contains(out, "another process switched readers to "+building) {
			t.Errorf("process %d says neither that it switched nor that another did:\n%s", p.cmd.Process.Pid, out)
		}
	}
	if switched != 1 {
		t.Fatalf("%d processes say they switched readers; want 1", switched)
	}
	if took == 0 {
		t.Errorf("no process says it ran segment %d, which the killed one held", lost)
	}
	if got, _ := store.ActiveCollection(context.Background(), cart.DetailsName, cart.DetailsName); got != building {
		t.Fatalf("active collection %q, want %q", got, building)
	}
	if got, err := segment.Count(context.Background(), db, building); err != nil || got != n {
		t.Fatalf("segments recorded for %s: %d, %v; want %d", building, got, err, n)
	}
	checkCarts(t, store, building, carts)
	for k, pos := range checkpointsIn(t, store, building, n) {
		if pos != head {
			t.Errorf("segment %d of %s at %d, want the head %d", k, building, pos, head)
		}
	}

	// run --segments 4 goes on from the rebuild's checkpoints.
	next := start(runArgs)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(next.stderrText(), `msg="runs segments" projection=cart_details segments=0,1,2,3`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run after the rebuild does not run the 4 segments:\n%s", next.stderrText())
		}
	}
	appendCarts(t, client, 200, 5, 6, carts)
	waitAllAt(t, store, building, n, srv.Head())
	if code := next.terminate(t); code != 0 {
		t.Fatalf("run after the rebuild: exit %d", code)
	}
	if got := appliedOf(t, next); got != 30 {
		t.Errorf("the run after the rebuild applied %d events; want the 30 appended after it, none of the rebuilt ones", got)
	}
	if strings.Contains(next.stderrText(), "refused (fenced)") || strings.Contains(next.stderrText(), "lost a segment's lease") {
		t.Errorf("the run after the rebuild could not keep a segment:\n%s", grepLines(next.stderrText(), "fenced", "lost"))
	}
	checkCarts(t, store, building, carts)
}

// rebuildLeases returns the segments of the rebuild into building whose
// lease is held at now, by the pid of their holder.
func rebuildLeases(t testing.TB, store *mongostore.Store, building string, n int, now time.Time) map[int]int {
	t.Helper()
	leases, err := store.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for k := range n {
		if l := leases[segment.LeaseName("rebuild "+building, k, n)]; l.Held(now) {
			out[k] = holderPid(l.Holder)
		}
	}
	return out
}

// killHolder kills (SIGKILL) the first of procs seen holding a segment of
// the rebuild into building whose checkpoint is short of head, and returns
// it and the segment.
func killHolder(t testing.TB, store *mongostore.Store, procs []*process, building string, n int, head uint64) (*process, int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		cps := checkpointsIn(t, store, building, n)
		for k, pid := range rebuildLeases(t, store, building, n, time.Now()) {
			for _, p := range procs {
				if p.cmd.Process.Pid == pid && cps[k] < head {
					p.cmd.Process.Signal(syscall.SIGKILL)
					<-p.done
					t.Logf("killed process %d holding segment %d at %d of %d", pid, k, cps[k], head)
					return p, k
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process held a segment short of the head in two minutes: %v", cps)
		}
		for _, p := range procs {
			select {
			case <-p.done:
				t.Fatalf("process %d exited before one was killed: %s", p.cmd.Process.Pid, fmt.Sprint(p.stdout.String(), p.stderrText()))
			default:
			}
		}
	}
}

// The number of segments is changed as the refusal of another one says:
// stop the processes, rebuild in the new number, run the new collection
// with it. A projection run in 4 segments, rebuilt in 2, runs in 2 (from
// the rebuild's checkpoints), and a run in 4 is refused, naming 2; rebuilt
// in one process, it runs without --segments.
func TestRun_segments_changed_by_a_rebuild(t *testing.T) {
	const lease = 2 * time.Second
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 40, 4, carts)
	head := srv.Head()
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--connect-timeout", "1m"}
	run := func(segments string) []string {
		return append([]string{"run", "--http", "", "--projections", cart.DetailsName, "--segments", segments, "--lease", lease.String(),
			"--checkpoint-interval", "100ms"}, common...)
	}
	first := startBinary(t, run("4")...)
	waitAllAt(t, store, cart.DetailsName, 4, head)
	if code := first.terminate(t); code != 0 {
		t.Fatalf("run --segments 4: exit %d", code)
	}
	out, errOut, code := runBinary(t, 3*time.Minute, append([]string{"rebuild", cart.DetailsName, "--segments", "2", "--lease", lease.String()}, common...)...)
	if code != 0 {
		t.Fatalf("rebuild --segments 2: exit %d\n%s\n%s", code, out, errOut)
	}
	building, _ := store.ActiveCollection(context.Background(), cart.DetailsName, cart.DetailsName)
	if building == cart.DetailsName {
		t.Fatalf("the rebuild switched no readers:\n%s", out)
	}

	_, errOut, code = runBinary(t, time.Minute, run("4")...)
	if want := "(collection " + building + ") runs in 2 segments"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("run --segments 4 after a rebuild in 2: exit %d, %q; want 1 and %q", code, errOut, want)
	}
	next := startBinary(t, run("2")...)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(next.stderrText(), `msg="runs segments"`); time.Sleep(20 * time.Millisecond) {
		select {
		case <-next.done:
			t.Fatalf("run --segments 2 after a rebuild in 2: exit %d\n%s", next.cmd.ProcessState.ExitCode(), next.stderrText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("run --segments 2 runs no segment after a minute:\n%s", next.stderrText())
		}
	}
	appendCarts(t, client, 40, 5, 4, carts)
	waitAllAt(t, store, building, 2, srv.Head())
	if code := next.terminate(t); code != 0 {
		t.Fatalf("run --segments 2 after a rebuild in 2: exit %d\n%s", code, next.stderrText())
	}
	if got := appliedOf(t, next); got != 20 {
		t.Errorf("the run in 2 segments applied %d events; want the 20 appended after the rebuild", got)
	}
	checkCarts(t, store, building, carts)

	// Back to one process: rebuilt without --segments, run without.
	if out, errOut, code := runBinary(t, 3*time.Minute, append([]string{"rebuild", cart.DetailsName}, common...)...); code != 0 {
		t.Fatalf("rebuild: exit %d\n%s\n%s", code, out, errOut)
	}
	single, _ := store.ActiveCollection(context.Background(), cart.DetailsName, cart.DetailsName)
	last := startBinary(t, append([]string{"run", "--http", "", "--projections", cart.DetailsName, "--checkpoint-interval", "100ms"}, common...)...)
	appendCarts(t, client, 45, 5, 4, carts)
	waitCheckpointOf(t, last, store, single, srv.Head())
	if code := last.terminate(t); code != 0 {
		t.Fatalf("run after a rebuild in one process: exit %d\n%s", code, last.stderrText())
	}
	checkCarts(t, store, single, carts)
}
