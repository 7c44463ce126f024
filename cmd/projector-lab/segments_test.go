package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

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

// metricsClient bounds a scrape: a stopped process does not answer.
var metricsClient = &http.Client{Timeout: 2 * time.Second}

var ownedLine = regexp.MustCompile(`(?m)^projector_segment_owned\{projection="` + cart.DetailsName + `",segment="(\d+)"\} 1$`)

// owned is the segments a process says it holds (its /metrics), nil when
// it does not answer.
func owned(p *process) []int {
	resp, err := metricsClient.Get(p.base + "/metrics")
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
	// status names each segment's holder, and its checkpoint at the head.
	out, _, code := runBinary(t, time.Minute, append([]string{"status", "--json"}, common...)...)
	var lines []struct {
		Checkpoint *uint64 `json:"checkpoint"`
		Segments   []struct {
			Holder     string  `json:"holder"`
			Checkpoint *uint64 `json:"checkpoint"`
			Behind     *int    `json:"behind"`
			Events     int     `json:"events"`
		} `json:"segments"`
	}
	if err := json.Unmarshal([]byte(out), &lines); code != 0 || err != nil || len(lines) != 1 || len(lines[0].Segments) != segmentCount {
		t.Fatalf("status --json: exit %d, %v:\n%s", code, err, out)
	}
	counted, appended := 0, 0
	for _, evs := range carts {
		appended += len(evs)
	}
	for k, seg := range lines[0].Segments {
		counted += seg.Events
		if pid := holderPid(seg.Holder); pid != p1.cmd.Process.Pid && pid != p2.cmd.Process.Pid && pid != p3.cmd.Process.Pid {
			t.Errorf("status: segment %d held by %q, none of the three", k, seg.Holder)
		}
		if seg.Checkpoint == nil || seg.Behind == nil || *seg.Behind != 0 {
			t.Errorf("status: segment %d at %v, %v behind; want a checkpoint with none behind", k, seg.Checkpoint, seg.Behind)
		}
	}
	if counted != appended {
		t.Errorf("status: the segments count %d events in all, want the %d appended", counted, appended)
	}
	// The table says who runs it: the segments, listed below it.
	table, _, code := runBinary(t, time.Minute, append([]string{"status"}, common...)...)
	if want := fmt.Sprintf("%d segments (below)", segmentCount); code != 0 || !strings.Contains(table, want) || !strings.Contains(table, "held by 3 processes") {
		t.Errorf("status: exit %d, want %q in the table and the segments held by 3 processes:\n%s", code, want, table)
	}

	// replay-parked refuses while the processes hold the segments.
	if _, errOut, code := runBinary(t, time.Minute, "replay-parked", cart.DetailsName, "--esdb", srv.URI(), "--mongo", mongotest.URI(t),
		"--database", db.Name()); code != 1 || !strings.Contains(errOut, "runs in segments") {
		t.Errorf("replay-parked while segmented processes run: exit %d, %q; want 1 and why", code, errOut)
	}
	if code := p3.terminate(t); code != 0 {
		t.Fatalf("the third process exited %d after SIGTERM\n%s", code, p3.stderrText())
	}
	// Its leases were let go as it stopped: none it still names is held.
	for k, l := range segmentLeases(t, store) {
		if holderPid(l.Holder) == p3.cmd.Process.Pid && l.Held(time.Now()) {
			t.Errorf("segment %d: the stopped process still holds its lease, until %v", k, l.Expires)
		}
	}
	handed := waitBalanced(t, []*process{p1, p2}, time.Minute)
	t.Logf("after SIGTERM of the third, the other two held its segments after %v (lease %v)", handed, lease)
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
	// The segments' counts, stored with their checkpoints, say each event
	// once, whatever the processes' own counts say.
	if n := segmentEvents(t, store); n != events {
		t.Errorf("the segments' checkpoints count %d events, want the %d appended", n, events)
	}
	applied := []int{appliedOf(t, p1), appliedOf(t, p2), appliedOf(t, p3)}
	sum := applied[0] + applied[1] + applied[2]
	// A lease lost on an overloaded store (a renewal that timed out) stops
	// a run while events still come: the events a stream fold of that run
	// applied ahead of their delivery come to the next run as duplicates,
	// counted applied by none. Then no event is counted twice.
	glitch := false
	caps, err := store.Capabilities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*process{p1, p2, p3} {
		glitch = glitch || strings.Contains(p.stderrText(), "lost a segment's lease")
		// On FerretDB, each process says that its leases are not exclusive.
		if warned := strings.Contains(p.stderrText(), "two processes can hold a segment's lease"); warned == caps.AtomicConditionalWrites {
			t.Errorf("process %d on %s warned of leases that are not exclusive: %v", p.cmd.Process.Pid, caps.Server, warned)
		}
	}
	switch {
	case glitch && sum > events:
		t.Errorf("the processes applied %v, %d in all, more than the %d events", applied, sum, events)
	case glitch:
		t.Logf("a process lost a lease on the overloaded store: %d of %d events counted applied (%v)", sum, events, applied)
	case sum != events:
		t.Errorf("the processes applied %v, %d in all; want each of the %d events applied once", applied, sum, events)
	}
	if _, errOut, code := runBinary(t, time.Minute, "rebuild", cart.DetailsName, "--segments", "4", "--lease", "0",
		"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name()); code != 2 ||
		!strings.Contains(errOut, "--segments 4 needs leases") {
		t.Errorf("rebuild --segments 4 --lease 0: exit %d, %q; want 2 and why", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"run", "--http", "", "--segments", "8", "--lease", "2s"}, common...), "runs in 16 segments"},
		{append([]string{"run", "--http", "", "--lease", "0"}, common...), "runs in 16 segments"},
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
// log does not end (the process was killed first) ends at cutoff, when not
// zero. One that the process lost ends when it was stopped (SIGSTOP), if it
// was, and held it then; otherwise its end is not known.
func holdings(t testing.TB, pid int, log string, cutoff, stopped time.Time) map[int][]holding {
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
			if i, ok := open[k]; ok && !stopped.IsZero() && out[k][i].start.Before(stopped) {
				out[k][i].end = stopped
			}
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
func checkExclusive(report func(string, ...any), all map[int][]holding) {
	for k, hs := range all {
		tokens := map[int64]int{}
		for _, h := range hs {
			if other, ok := tokens[h.token]; ok && other != h.pid {
				report("segment %d: processes %d and %d both say they hold it under token %d", k, other, h.pid, h.token)
			}
			tokens[h.token] = h.pid
		}
		for _, a := range hs {
			for _, b := range hs {
				if a.pid != b.pid && !a.end.IsZero() && !b.start.Before(a.start) && b.start.Before(a.end) {
					report("segment %d: process %d took it at %s while process %d held it (from %s to %s)",
						k, b.pid, b.start.Format(time.StampMilli), a.pid, a.start.Format(time.StampMilli), a.end.Format(time.StampMilli))
				}
			}
		}
	}
}

// watchSegments polls the leases and checkpoints of the segments until
// stop is closed, and reports what went wrong: a lease token or a
// checkpoint that moved back (once a segment).
func watchSegments(t testing.TB, db *mongo.Database, stop <-chan struct{}) <-chan []string {
	out := make(chan []string, 1)
	go func() {
		var wrong []string
		said := map[string]bool{}
		note := func(what string, k int, format string, args ...any) {
			if key := fmt.Sprint(what, k); !said[key] {
				said[key] = true
				wrong = append(wrong, fmt.Sprintf("%s segment %d: ", time.Now().Format(time.StampMilli), k)+fmt.Sprintf(format, args...))
			}
		}
		tokens, positions := map[int]int64{}, map[int]uint64{}
		for {
			select {
			case <-stop:
				out <- wrong
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, l := range readAll[mongostore.Lease](db, "projector_leases") {
				if m := segmentName.FindStringSubmatch(l.Name); m != nil {
					k, _ := strconv.Atoi(m[1])
					if l.Token < tokens[k] {
						note("lease", k, "lease token %d after %d", l.Token, tokens[k])
					}
					tokens[k] = max(tokens[k], l.Token)
				}
			}
			for _, c := range readAll[struct {
				ID       string `bson:"_id"`
				Position uint64 `bson:"position"`
				Lease    int64  `bson:"lease"`
			}](db, "projector_checkpoints") {
				if m := segmentName.FindStringSubmatch(c.ID); m != nil {
					k, _ := strconv.Atoi(m[1])
					if c.Position < positions[k] {
						note("checkpoint", k, "checkpoint %d (stored under lease token %d) after %d", c.Position, c.Lease, positions[k])
					}
					positions[k] = max(positions[k], c.Position)
				}
			}
		}
	}()
	return out
}

// readAll reads every document of collection; none on an error.
func readAll[T any](db *mongo.Database, collection string) []T {
	cur, err := db.Collection(collection).Find(context.Background(), bson.D{})
	if err != nil {
		return nil
	}
	var all []T
	if err := cur.All(context.Background(), &all); err != nil {
		return nil
	}
	return all
}

// fleet is the processes of a test: those alive, and when each was
// killed or stopped.
type fleet struct {
	t       testing.TB
	args    []string
	mu      sync.Mutex
	alive   []*process
	all     []*process
	killed  map[*process]time.Time
	stopped map[*process]time.Time
}

func (f *fleet) spawn() *process {
	p := startBinary(f.t, f.args...)
	p.base = httpBase(f.t, p)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alive = append(f.alive, p)
	f.all = append(f.all, p)
	return p
}

func (f *fleet) live() []*process {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.alive)
}

// gone takes p out of the live processes; killed, at when.
func (f *fleet) gone(p *process, killed time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alive = slices.DeleteFunc(f.alive, func(q *process) bool { return q == p })
	if !killed.IsZero() {
		f.killed[p] = killed
	}
}

// waitHeld waits until each segment is held by one of procs (as each
// says) and returns how long that took; it fails the test after within.
func waitHeld(t testing.TB, procs []*process, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		holders := map[int]int{}
		var says []string
		for _, p := range procs {
			ks := owned(p)
			says = append(says, fmt.Sprintf("%d: %v", p.cmd.Process.Pid, ks))
			for _, k := range ks {
				holders[k]++
			}
		}
		all := true
		for k := range segmentCount {
			all = all && holders[k] == 1
		}
		if all {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("the segments are not all held, once, by the %d live processes after %v: %s", len(procs), within, strings.Join(says, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Three processes run the cart details in 16 segments (lease 2 s) while
// carts are appended. Ten times a process that holds segments is killed
// with SIGKILL, the others take its segments once its leases expire, and a
// new one starts; ten times a fourth joins, gets its share, and leaves with
// SIGTERM. Once, a process is paused (SIGSTOP) past its lease, the others
// take its segments and claim their checkpoints, and it is resumed: it
// finds its save refused (fenced) or its leases lost, and drops them. At
// the end every document equals its fold; on a store whose conditional
// writes are atomic, no two processes held a segment's lease at once (their
// logs) and no lease token or segment checkpoint moved back (the store,
// polled throughout); on the embedded server, whose are not, what was seen
// is logged (see below).
//
// What each process applied is not summed: a killed process's events
// applied and not checkpointed are applied again by nobody (the gate finds
// them applied: duplicates), and a run stopped while events come leaves
// the events a stream fold applied ahead of their delivery to be counted
// by nobody. The balance test above counts every event once, with no kill
// and no run stopped during traffic; here the documents, each equal to the
// fold of all its events, show each event applied once.
func TestRun_segments_killed_joined_and_paused_during_traffic(t *testing.T) {
	const lease = 2 * time.Second
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	f := &fleet{t: t, killed: map[*process]time.Time{}, stopped: map[*process]time.Time{},
		args: []string{"run", "--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", cart.DetailsName,
			"--http", "127.0.0.1:0", "--segments", "16", "--lease", lease.String(), "--checkpoint-interval", "500ms", "--connect-timeout", "1m",
			// Small batches: a run stops (its set of segments changed)
			// once the batch it writes is written.
			"--batch", "50"}}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range f.all {
			if dir := os.Getenv("SEGMENTS_TEST_LOGS"); dir != "" {
				os.WriteFile(filepath.Join(dir, strconv.Itoa(p.cmd.Process.Pid)+".log"), []byte(p.stderrText()), 0o644)
			}
			lines := strings.Split(strings.TrimSpace(p.stderrText()), "\n")
			t.Logf("process %d, last lines of its log:\n%s", p.cmd.Process.Pid, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	for range 3 {
		f.spawn()
	}
	lives, stopTraffic := appendLives(t, client, 20*time.Millisecond)
	stopWatch := make(chan struct{})
	watched := watchSegments(t, db, stopWatch)

	r := rand.New(rand.NewPCG(11, 11))
	var takeovers, joins []time.Duration
	for i := 1; i <= 10; i++ {
		// A process holding segments is killed; a new one starts at once,
		// and a fourth joins, to leave (SIGTERM) once it holds a segment.
		// The round ends once every segment is held again.
		victim := holdingOne(t, f.live(), r)
		time.Sleep(100 * time.Millisecond) // let it work a little
		victim.cmd.Process.Signal(syscall.SIGKILL)
		killed := time.Now()
		f.gone(victim, killed)
		<-victim.done
		f.spawn()
		joiner := f.spawn()
		joined := time.Now()
		for len(owned(joiner)) == 0 {
			if time.Since(joined) > time.Minute {
				t.Fatalf("round %d: the fourth process holds no segment after a minute", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		joins = append(joins, time.Since(joined))
		if code := joiner.terminate(t); code != 0 {
			t.Fatalf("round %d: the fourth process exited %d after SIGTERM\n%s", i, code, joiner.stderrText())
		}
		f.gone(joiner, time.Time{})
		waitHeld(t, f.live(), time.Minute)
		takeovers = append(takeovers, time.Since(killed))
	}
	// The leases of a killed process expire after the lease; its segments
	// are taken within the lease and a look or two. A joiner waits for the
	// others to stop their runs (which store the checkpoints) before they
	// let segments go. Bounded generously for a loaded machine.
	t.Logf("after SIGKILL, lease %v, every segment was held again after %v; a joiner held its first after %v", lease, takeovers, joins)
	for i, d := range takeovers {
		// Within the lease and a few looks and run restarts on an idle
		// machine (3 to 5 s here); bounded generously for a loaded one.
		if d > 15*lease {
			t.Errorf("round %d: the segments of the killed process were taken after %v, more than 15 times the lease %v", i+1, d, lease)
		}
	}
	pauseOne(t, f, store, db, r, lease)

	stopTraffic()
	head := srv.Head()
	waitSegmentsAt(t, store, head)
	close(stopWatch)
	// A store whose conditional writes are atomic (MongoDB) keeps one
	// holder per lease at a time, and lease tokens and checkpoints that
	// never move back. The embedded server's are not compare-and-swap
	// (README, "Known limits of the embedded server"): two takers of an
	// expired lease, or a renewal late by a loaded machine and a taker, can
	// both match, and the later write wins. There what was seen is said,
	// and the documents, each equal to its fold, are the check.
	caps, err := store.Capabilities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	report := t.Errorf
	if !caps.AtomicConditionalWrites {
		report = t.Logf
	}
	for _, wrong := range <-watched {
		report("%s", wrong)
	}
	for _, p := range f.live() {
		if code := p.terminate(t); code != 0 {
			t.Errorf("a process exited %d after SIGTERM\n%s", code, p.stderrText())
		}
	}
	all := map[int][]holding{}
	for _, p := range f.all {
		for k, hs := range holdings(t, p.cmd.Process.Pid, p.stderrText(), f.killed[p], f.stopped[p]) {
			all[k] = append(all[k], hs...)
		}
	}
	checkExclusive(report, all)
	n, events := 0, 0
	lives.Range(func(k, v any) bool {
		n++
		events += len(v.([]projector.Event))
		if err := projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), k.(string), v.([]projector.Event)); err != nil {
			t.Error(err)
		}
		return true
	})
	t.Logf("%d carts, every one equal to its fold", n)
	// Each segment's count of events, stored with its checkpoint under its
	// lease, says each event once, although ten processes were killed
	// with events applied and not checkpointed, and one was paused past
	// its lease.
	if counted := segmentEvents(t, store); counted != events {
		report("the segments' checkpoints count %d events, want the %d appended, each once", counted, events)
	} else {
		t.Logf("the segments' checkpoints count %d events: each once", counted)
	}
}

// segmentEvents sums the events the segments' checkpoints count.
func segmentEvents(t testing.TB, store *mongostore.Store) int {
	t.Helper()
	all, err := store.Checkpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, st := range all {
		if segmentName.MatchString(name) {
			n += int(st.Events)
		}
	}
	return n
}

// holdingOne picks one of procs that says it holds a segment.
func holdingOne(t testing.TB, procs []*process, r *rand.Rand) *process {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var holding []*process
		for _, p := range procs {
			if len(owned(p)) > 0 {
				holding = append(holding, p)
			}
		}
		if len(holding) > 0 {
			return holding[r.IntN(len(holding))]
		}
		if time.Now().After(deadline) {
			t.Fatalf("none of %d processes holds a segment after a minute", len(procs))
		}
	}
}

// pauseOne stops (SIGSTOP) a process that holds segments until the others
// have taken them all and claimed their checkpoints, and resumes it: it
// must drop them, its checkpoint saves refused or its leases found lost
// (or handed over at once because its subscription timed out while it was
// stopped).
func pauseOne(t testing.TB, f *fleet, store *mongostore.Store, db *mongo.Database, r *rand.Rand, lease time.Duration) {
	t.Helper()
	victim := holdingOne(t, f.live(), r)
	ks := owned(victim)
	tokens := map[int]int64{}
	for k, l := range segmentLeases(t, store) {
		if holderPid(l.Holder) == victim.cmd.Process.Pid {
			tokens[k] = l.Token
		}
	}
	victim.cmd.Process.Signal(syscall.SIGSTOP)
	f.mu.Lock()
	f.stopped[victim] = time.Now()
	f.mu.Unlock()
	f.gone(victim, time.Time{})
	resumed := false
	defer func() {
		if !resumed {
			victim.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	// The others take its segments, and claim their checkpoints.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		leases := segmentLeases(t, store)
		taken := 0
		for _, k := range ks {
			l := leases[k]
			if l.Held(time.Now()) && holderPid(l.Holder) != victim.cmd.Process.Pid && l.Token > tokens[k] && claimedAt(t, db, k) >= l.Token {
				taken++
			}
		}
		if taken == len(ks) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the segments %v of the paused process %d were not taken and claimed in a minute", ks, victim.cmd.Process.Pid)
		}
	}
	paused := len(victim.stderrText()) // what it logged before it was resumed
	victim.cmd.Process.Signal(syscall.SIGCONT)
	resumed = true
	f.mu.Lock()
	f.alive = append(f.alive, victim)
	f.mu.Unlock()
	var fenced, lost []int
	for deadline := time.Now().Add(time.Minute); len(fenced)+len(lost) < len(ks); time.Sleep(20 * time.Millisecond) {
		fenced, lost = nil, nil
		log := victim.stderrText()[paused:]
		for _, k := range ks {
			switch {
			case regexp.MustCompile(`msg="a checkpoint save was refused \(fenced\)[^"]*" projection=\S+ segment=` + strconv.Itoa(k) + ` `).MatchString(log):
				fenced = append(fenced, k)
			case regexp.MustCompile(`msg="lost a segment's lease[^"]*" projection=\S+ segment=` + strconv.Itoa(k) + ` `).MatchString(log),
				// The lease's own renewal found it taken first.
				regexp.MustCompile(`msg="lost the lease: this process stops writing" lease=\S+/segment-` + strconv.Itoa(k) + `-of-\d+ `).MatchString(log),
				// It let the segment go before it found it taken: its
				// subscription timed out while it was paused.
				regexp.MustCompile(`msg="releases a segment's lease" projection=\S+ segment=` + strconv.Itoa(k) + ` token=\d+ why="this process cannot read the event store"`).MatchString(log):
				lost = append(lost, k)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed process did not drop its segments %v (fenced %v, lost %v)", ks, fenced, lost)
		}
	}
	t.Logf("paused past its lease: its segments %v were taken; resumed, its saves were refused (fenced) for %v, and it found lost or handed over the leases of %v", ks, fenced, lost)
}

// claimedAt is the lease token segment k's checkpoint was last stored
// under.
func claimedAt(t testing.TB, db *mongo.Database, k int) int64 {
	t.Helper()
	var d struct {
		Lease int64 `bson:"lease"`
	}
	_ = db.Collection("projector_checkpoints").FindOne(context.Background(), bson.D{{Key: "_id", Value: fmt.Sprintf("%s/segment-%d-of-%d", cart.DetailsName, k, segmentCount)}}).Decode(&d)
	return d.Lease
}

// appendLives appends carts one event at a time, pace apart, in the
// background, until the returned func is called (or the test ends: no
// t.Error after it); lives holds each cart's events (cart id ->
// []projector.Event) once all are appended.
func appendLives(t *testing.T, client *kurrentdb.Client, pace time.Duration) (lives *sync.Map, stop func()) {
	lives = &sync.Map{}
	stopTraffic := make(chan struct{})
	var traffic sync.WaitGroup
	var once sync.Once
	stop = func() {
		once.Do(func() { close(stopTraffic) })
		traffic.Wait()
	}
	t.Cleanup(stop)
	traffic.Go(func() {
		r := rand.New(rand.NewPCG(7, 7))
		for i := 0; ; i++ {
			select {
			case <-stopTraffic:
				return
			default:
			}
			id := fmt.Sprintf("c%04d", i)
			var evs []projector.Event
			for rev, ev := range cart.RandomLife(r, id, "client", 6, time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)) {
				name, data, _ := cart.Registry().Encode(ev)
				if _, err := client.AppendToStream(context.Background(), cart.StreamID(id), kurrentdb.AppendToStreamOptions{},
					kurrentdb.EventData{EventID: uuid.New(), EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: data, Metadata: cartMeta}); err != nil {
					t.Error(err)
					return
				}
				evs = append(evs, projector.Event{Type: name, StreamID: cart.StreamID(id), StreamRevision: uint64(rev), Payload: ev})
				time.Sleep(pace)
			}
			lives.Store(id, evs)
		}
	})
	return lives, stop
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

// BenchmarkSegmentsCPU measures what sharing a projection's segments costs
// in CPU: the cart details, in 16 segments, caught up by one process
// holding them all, and on the same log by three processes sharing them,
// each on a database of its own; each measure is the sum of the processes'
// user and system time from their start to every segment's checkpoint at
// the head and their exit on SIGTERM. Each process reads the whole log, so
// the reading is paid three times. It reports the ratio (three over one,
// summed over the iterations), and the same ratio per event: less what the
// processes cost on a log of one cart (starting, connecting, preparing the
// collection, the leases and heartbeats until they stop), which three
// processes pay three times whatever the log. On the embedded default:
// PROJECTOR_TEST_POSTGRES= go test ./cmd/projector-lab -run '^$' -bench SegmentsCPU -benchtime 3x
func BenchmarkSegmentsCPU(b *testing.B) {
	if bin == "" {
		bin = build(b) // without the race detector: measured
	}
	type logOf struct {
		srv  *esdbtest.Server
		head uint64
	}
	newLog := func(carts int) logOf {
		srv := esdbtest.New(b)
		appendPoisonLog(b, srv.Client(b), carts, 10, false)
		return logOf{srv, srv.Head()}
	}
	full, small := newLog(2000), newLog(1)
	measure := func(procs int, l logOf) time.Duration {
		db := mongotest.Database(b)
		store := mongostore.New(db)
		args := []string{"run", "--esdb", l.srv.URI(), "--mongo", mongotest.URI(b), "--database", db.Name(),
			"--projections", cart.DetailsName, "--segments", strconv.Itoa(segmentCount), "--lease", "2s",
			"--http", "", "--checkpoint-interval", "100ms"}
		ps := make([]*process, procs)
		for i := range ps {
			ps[i] = startBinary(b, args...)
		}
		waitSegmentsAt(b, store, l.head)
		var cpu time.Duration
		for _, p := range ps {
			if code := p.terminate(b); code != 0 {
				b.Fatalf("run: exit %d\n%s", code, p.stderrText())
			}
			cpu += p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
		}
		return cpu
	}
	var one, three, one0, three0 time.Duration
	for i := range b.N {
		for _, procs := range []int{1 + 2*(i%2), 3 - 2*(i%2)} {
			cpu, cpu0 := measure(procs, full), measure(procs, small)
			b.Logf("round %d, %d processes: %v of CPU (%v on a log of one cart)", i, procs, cpu.Round(time.Millisecond), cpu0.Round(time.Millisecond))
			if procs == 1 {
				one, one0 = one+cpu, one0+cpu0
			} else {
				three, three0 = three+cpu, three0+cpu0
			}
		}
	}
	b.ReportMetric(three.Seconds()/one.Seconds(), "cpu-ratio")
	b.ReportMetric((three-three0).Seconds()/(one-one0).Seconds(), "cpu-ratio-per-event")
	b.ReportMetric(one.Seconds()/float64(b.N), "one-process-cpu-s")
}
