package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// segmentCount is how many segments the tests split the cart details into.
const segmentCount = 16

var segmentName = regexp.MustCompile(`^` + regexp.QuoteMeta(cart.DetailsName) + `/segment-(\d+)-of-16$`)

// segmentLeases returns the lease of each segment of the cart details.
func segmentLeases(t testing.TB, store *mongostore.Store) map[int]mongostore.Lease {
	t.Helper()
	leases, err := store.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]mongostore.Lease{}
	for name, l := range leases {
		if m := segmentName.FindStringSubmatch(name); m != nil {
			k, _ := strconv.Atoi(m[1])
			out[k] = l
		}
	}
	return out
}

// segmentCheckpoints returns the stored checkpoint of each segment.
func segmentCheckpoints(t testing.TB, store *mongostore.Store) map[int]uint64 {
	t.Helper()
	all, err := store.Checkpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]uint64{}
	for name, st := range all {
		if m := segmentName.FindStringSubmatch(name); m != nil && st.Checkpoint != nil {
			k, _ := strconv.Atoi(m[1])
			out[k] = st.Checkpoint.Position
		}
	}
	return out
}

// holderPid is the process id in a lease holder's name ("run host/pid/x").
func holderPid(holder string) int {
	f := strings.Fields(holder)
	if len(f) < 2 {
		return 0
	}
	parts := strings.Split(f[1], "/")
	if len(parts) < 2 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[1])
	return pid
}

// heldBy counts the segments each process holds now (unexpired leases).
func heldBy(t testing.TB, store *mongostore.Store) map[int]int {
	t.Helper()
	now := time.Now()
	out := map[int]int{}
	for _, l := range segmentLeases(t, store) {
		if l.Held(now) {
			out[holderPid(l.Holder)]++
		}
	}
	return out
}

// httpBase is the address a process serves /metrics on (it was started
// with --http 127.0.0.1:0).
func httpBase(t testing.TB, p *process) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if m := regexp.MustCompile(`msg=http addr=(\S+)`).FindStringSubmatch(p.stderrText()); m != nil {
			return "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d serves no http:\n%s", p.cmd.Process.Pid, p.stderrText())
		}
	}
}

var ownedLine = regexp.MustCompile(`(?m)^projector_segment_owned\{projection="` + cart.DetailsName + `",segment="(\d+)"\} 1$`)

// owned is the segments a process says it holds (its /metrics), nil when
// it does not answer.
func owned(p *process) []int {
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []int
	for _, m := range ownedLine.FindAllStringSubmatch(string(body), -1) {
		k, _ := strconv.Atoi(m[1])
		out = append(out, k)
	}
	return out
}

// balanced reports whether procs, by what each says it holds, hold every
// segment once, each the floor or the ceiling of its share.
func balanced(procs []*process) (bool, string) {
	lo, hi := segmentCount/len(procs), (segmentCount+len(procs)-1)/len(procs)
	holders := map[int]int{}
	fair := true
	var says []string
	for _, p := range procs {
		ks := owned(p)
		says = append(says, fmt.Sprintf("%d: %v", p.cmd.Process.Pid, ks))
		fair = fair && len(ks) >= lo && len(ks) <= hi
		for _, k := range ks {
			holders[k]++
		}
	}
	for k := range segmentCount {
		fair = fair && holders[k] == 1
	}
	return fair, strings.Join(says, "; ")
}

// waitBalanced waits until procs hold every segment in fair shares, as each
// says, and returns how long that took; it fails the test after within.
func waitBalanced(t testing.TB, procs []*process, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, says := balanced(procs)
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("the segments are not shared fairly by %d processes after %v: %s", len(procs), within, says)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSegmentsAt waits until every segment's checkpoint is at head.
func waitSegmentsAt(t testing.TB, store *mongostore.Store, head uint64) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		cps := segmentCheckpoints(t, store)
		at := 0
		for _, pos := range cps {
			if pos >= head {
				at++
			}
		}
		if at == segmentCount {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the segments' checkpoints did not reach the head %d: %v", head, cps)
		}
	}
}

var appliedLine = regexp.MustCompile(`msg="projection stopped" projection=` + cart.DetailsName + ` applied=(\d+)`)

// appliedOf is what a process that stopped cleanly says it applied.
func appliedOf(t testing.TB, p *process) int {
	t.Helper()
	m := appliedLine.FindStringSubmatch(p.stderrText())
	if m == nil {
		t.Fatalf("process %d did not say what it applied:\n%s", p.cmd.Process.Pid, p.stderrText())
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Two processes share the 16 segments of the cart details 8 and 8; a third
// joins and each holds 5 or 6 within two lease periods; it stops with
// SIGTERM and hands its segments back at once, without their leases
// expiring. No process was killed, so each event was applied exactly once,
// by one process (its "applied" count at exit; the membership changed only
// while every segment was at the head, so no run was stopped holding
// events a stream fold applied ahead). A run with another number of
// segments is refused, naming both.
func TestRun_segments_are_shared_fairly_after_a_join_and_handed_over_at_once_on_SIGTERM(t *testing.T) {
	const lease = 3 * time.Second
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", cart.DetailsName,
		"--connect-timeout", "1m"}
	args := append([]string{"run", "--http", "127.0.0.1:0", "--segments", "16", "--lease", lease.String(), "--checkpoint-interval", "200ms"}, common...)
	start := func() *process {
		p := startBinary(t, args...)
		p.base = httpBase(t, p)
		return p
	}
	p1, p2 := start(), start()
	var p3 *process
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*process{p1, p2, p3} {
				if p != nil {
					t.Logf("process %d:\n%s", p.cmd.Process.Pid, grepLines(p.stderrText(), "segment", "runner", "projection stopped"))
				}
			}
		}
	})
	waitBalanced(t, []*process{p1, p2}, time.Minute)

	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 40, 6, carts)
	waitSegmentsAt(t, store, srv.Head())

	p3 = start()
	took := waitBalanced(t, []*process{p1, p2, p3}, time.Minute)
	t.Logf("a third process joined: the segments were shared 5/5/6 after %v (lease %v)", took, lease)
	if took > 2*lease {
		t.Errorf("the joiner got its share after %v, more than two lease periods (%v)", took, 2*lease)
	}
	appendCarts(t, client, 40, 40, 6, carts)
	waitSegmentsAt(t, store, srv.Head())

	if code := p3.terminate(t); code != 0 {
		t.Fatalf("the third process exited %d after SIGTERM\n%s", code, p3.stderrText())
	}
	handed := waitBalanced(t, []*process{p1, p2}, time.Minute)
	t.Logf("after SIGTERM of the third, the other two held its segments after %v", handed)
	if handed >= lease {
		t.Errorf("its segments were taken after %v: the leases were not released at once (they expire after %v)", handed, lease)
	}
	appendCarts(t, client, 80, 40, 6, carts)
	waitSegmentsAt(t, store, srv.Head())
	for _, p := range []*process{p1, p2} {
		if code := p.terminate(t); code != 0 {
			t.Fatalf("exit %d after SIGTERM\n%s", code, p.stderrText())
		}
	}
	events := 0
	for id, evs := range carts {
		events += len(evs)
		if err := projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), id, evs); err != nil {
			t.Error(err)
		}
	}
	applied := []int{appliedOf(t, p1), appliedOf(t, p2), appliedOf(t, p3)}
	sum := applied[0] + applied[1] + applied[2]
	// A lease lost on an overloaded store (a renewal that timed out) stops
	// a run while events still come: the events a stream fold of that run
	// applied ahead of their delivery come to the next run as duplicates,
	// counted applied by none. Then no event is counted twice.
	glitch := false
	for _, p := range []*process{p1, p2, p3} {
		glitch = glitch || strings.Contains(p.stderrText(), "lost a segment's lease")
	}
	switch {
	case glitch && sum > events:
		t.Errorf("the processes applied %v, %d in all, more than the %d events", applied, sum, events)
	case glitch:
		t.Logf("a process lost a lease on the overloaded store: %d of %d events counted applied (%v)", sum, events, applied)
	case sum != events:
		t.Errorf("the processes applied %v, %d in all; want each of the %d events applied once", applied, sum, events)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"run", "--http", "", "--segments", "8", "--lease", "2s"}, common...), "runs in 16 segments"},
		{append([]string{"run", "--http", ""}, common...), "runs in 16 segments"},
	} {
		_, errOut, code := runBinary(t, time.Minute, tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "rebuild") {
			t.Errorf("%v: exit %d, %q; want 1 and %q, and how to change it", tc.args[:3], code, errOut, tc.want)
		}
	}
}

// holding is one process's holding of a segment's lease, from its log.
type holding struct {
	pid        int
	token      int64
	start, end time.Time // end: zero while not known
}

var segmentLog = regexp.MustCompile(`time=(\S+) level=\w+ msg="(holds a segment's lease|releases a segment's lease|lost a segment's lease[^"]*)" projection=\S+ segment=(\d+)(?: of=\d+)? token=(\d+)`)

// holdings reads the holdings of segments in a process's log; one that the
// log does not end (the process was killed or stopped first) ends at
// cutoff, when not zero.
func holdings(t testing.TB, pid int, log string, cutoff time.Time) map[int][]holding {
	t.Helper()
	out := map[int][]holding{}
	open := map[int]int{} // segment -> index in out of its open holding
	for _, m := range segmentLog.FindAllStringSubmatch(log, -1) {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("a log time %q: %v", m[1], err)
		}
		k, _ := strconv.Atoi(m[3])
		token, _ := strconv.ParseInt(m[4], 10, 64)
		switch {
		case strings.HasPrefix(m[2], "holds"):
			open[k] = len(out[k])
			out[k] = append(out[k], holding{pid: pid, token: token, start: at})
		case strings.HasPrefix(m[2], "releases"):
			if i, ok := open[k]; ok {
				out[k][i].end = at // logged before the lease is let go
				delete(open, k)
			}
		default: // lost: it ended some time before the log says
			delete(open, k)
		}
	}
	for k, i := range open {
		out[k][i].end = cutoff
	}
	return out
}

// checkExclusive fails the test when two processes held one segment's
// lease at once: a holding starts (in its log, after the lease was taken
// and confirmed) before the one before it ended (its release, logged before
// the lease is let go; the SIGKILL or SIGSTOP of its process, before which
// its lease was renewed, for one its log does not end). A holding whose end
// is not known (lost) is checked against none.
func checkExclusive(t testing.TB, all map[int][]holding) {
	t.Helper()
	for k, hs := range all {
		tokens := map[int64]int{}
		for _, h := range hs {
			if other, ok := tokens[h.token]; ok && other != h.pid {
				t.Errorf("segment %d: processes %d and %d both say they hold it under token %d", k, other, h.pid, h.token)
			}
			tokens[h.token] = h.pid
		}
		for _, a := range hs {
			for _, b := range hs {
				if a.pid != b.pid && !a.end.IsZero() && !b.start.Before(a.start) && b.start.Before(a.end) {
					t.Errorf("segment %d: process %d took it at %s while process %d held it (from %s to %s)",
						k, b.pid, b.start.Format(time.StampMilli), a.pid, a.start.Format(time.StampMilli), a.end.Format(time.StampMilli))
				}
			}
		}
	}
}

// watchSegments polls the leases and checkpoints of the segments until
// stop is closed, and reports what went wrong: a lease token or a
// checkpoint that moved back.
func watchSegments(t testing.TB, store *mongostore.Store, stop <-chan struct{}) <-chan []string {
	out := make(chan []string, 1)
	go func() {
		var wrong []string
		tokens, positions := map[int]int64{}, map[int]uint64{}
		for {
			select {
			case <-stop:
				out <- wrong
				return
			case <-time.After(20 * time.Millisecond):
			}
			leases, err := store.Leases(context.Background())
			if err != nil {
				continue
			}
			for name, l := range leases {
				if m := segmentName.FindStringSubmatch(name); m != nil {
					k, _ := strconv.Atoi(m[1])
					if l.Token < tokens[k] {
						wrong = append(wrong, fmt.Sprintf("segment %d: lease token %d after %d", k, l.Token, tokens[k]))
					}
					tokens[k] = max(tokens[k], l.Token)
				}
			}
			all, err := store.Checkpoints(context.Background())
			if err != nil {
				continue
			}
			for name, st := range all {
				if m := segmentName.FindStringSubmatch(name); m != nil && st.Checkpoint != nil {
					k, _ := strconv.Atoi(m[1])
					if st.Checkpoint.Position < positions[k] {
						wrong = append(wrong, fmt.Sprintf("segment %d: checkpoint %d after %d", k, st.Checkpoint.Position, positions[k]))
					}
					positions[k] = max(positions[k], st.Checkpoint.Position)
				}
			}
		}
	}()
	return out
}

// fleet is the processes of a test, by pid, with when each was killed or
// stopped.
type fleet struct {
	mu      sync.Mutex
	alive   map[int]*process
	all     []*process
	cutoffs map[int]time.Time
}

func (f *fleet) add(p *process) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alive[p.cmd.Process.Pid] = p
	f.all = append(f.all, p)
}

func (f *fleet) live() []*process {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*process, 0, len(f.alive))
	for _, p := range f.alive {
		out = append(out, p)
	}
	return out
}

// grepLines is the lines of text that hold one of words.
func grepLines(text string, words ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
