package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/projectortest/e2e"

	"example.com/library/lending"
)

// The test a user writes with the kit: the servers in the test's process,
// the command line in the test's process, the documents against the fold.
func TestLibraryProjector_catches_up_and_every_loan_is_the_fold_of_its_events(t *testing.T) {
	servers := e2e.StartServers(t, e2e.Options{MongoURI: os.Getenv("MONGO_URI")})
	db := servers.Database(t)
	loans := map[string][]projector.Event{}
	for stream, life := range lending.Traffic(2, 30, 5) {
		loans[stream] = servers.Append(t, lending.Registry(), stream, life...)
	}

	cmd := e2e.StartCommand(t, config(), "run",
		"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
	cmd.WaitCheckpoint(t, db, "loans", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, cmd.Stderr())
	}

	store := mongostore.New(db)
	for stream, events := range loans {
		id := strings.TrimPrefix(stream, lending.LoanStreams)
		if err := projectortest.CheckDocument(context.Background(), store, lending.NewLoans(), id, events); err != nil {
			t.Error(err)
		}
	}
}

// seed appends the sample loans once: seeding again appends nothing.
func TestSeed_appends_the_sample_loans_once(t *testing.T) {
	servers := e2e.StartServers(t, e2e.Options{})
	for _, want := range []string{`^appended [1-9]\d* events of 12 loans; 0 loans were there already\n$`, `^appended 0 events of 0 loans; 12 loans were there already\n$`} {
		var out, errOut bytes.Buffer
		if code := config().Run(context.Background(), []string{"seed", "--esdb", servers.ESDBURI(), "--loans", "12"}, nil, &out, &errOut); code != 0 {
			t.Fatalf("seed: exit %d\n%s", code, errOut.String())
		}
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Fatalf("seed said %q, want %s", out.String(), want)
		}
	}
	if n := servers.ESDB.Stats().Events; n < 12 {
		t.Fatalf("%d events in the store, want at least one per loan", n)
	}
}

// The binary built from this main, run as a subprocess against the test
// servers while they duplicate deliveries and drop its subscriptions:
// it catches up, stops cleanly on SIGTERM, every document of the three
// projections is the fold of its events, and status and rebuild work.
func TestLibraryProjector_binary_under_duplicates_and_drops_then_status_and_rebuild(t *testing.T) {
	bin := build(t)
	servers := e2e.StartServers(t, e2e.Options{MongoURI: os.Getenv("MONGO_URI"), Seed: 3})
	db := servers.Database(t)
	servers.ESDB.DuplicateDeliveries(0.25)
	common := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name()}

	p := start(t, bin, append([]string{"run", "--http", "", "--checkpoint-interval", "100ms"}, common...)...)
	log := appendInterleaved(t, servers, lending.Traffic(3, 120, 12), func(i int) {
		if i%150 == 75 {
			servers.ESDB.DropSubscriptions()
		}
	})
	// One more drop once the binary is surely subscribed.
	for deadline := time.Now().Add(time.Minute); servers.ESDB.DropSubscriptions() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no subscription to drop after a minute\n%s", p.stderr.String())
		}
	}
	for _, name := range []string{"loans", "member_loans", "desk_stats"} {
		p.waitCheckpoint(t, db, name, servers.Head())
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, p.stderr.String())
	}
	if st := servers.ESDB.Stats(); st.Duplicates == 0 || st.Dropped == 0 {
		t.Fatalf("faults did not happen: %+v", st)
	}
	checkAll(t, mongostore.New(db), "loans", log)

	out := runOK(t, bin, append([]string{"status", "--json"}, common...)...)
	var lines []struct {
		Projection string `json:"projection"`
		Checkpoint uint64 `json:"checkpoint"`
		Behind     *int   `json:"behind"`
	}
	if err := json.Unmarshal([]byte(out), &lines); err != nil || len(lines) != 3 {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, l := range lines {
		if l.Checkpoint != servers.Head() || l.Behind == nil || *l.Behind != 0 {
			t.Errorf("status of %s: checkpoint %d, behind %v; want the head %d, 0 behind", l.Projection, l.Checkpoint, l.Behind, servers.Head())
		}
	}

	out = runOK(t, bin, append([]string{"rebuild", "loans"}, common...)...)
	m := regexp.MustCompile(`readers now use (loans_r\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("rebuild:\n%s", out)
	}
	checkAll(t, mongostore.New(db), m[1], log)
}

// A binary built from this main links no test double and not the testing
// package: only what runs in production. Of the official clients it links
// the one its Config.Dial names, KurrentDB-Client-Go, and not
// EventStore-Client-Go v4.
func TestLibraryProjector_links_no_test_double(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	for _, bad := range []string{"testing", "github.com/revgate/projector/esdbtest", "github.com/revgate/projector/projectortest", "github.com/revgate/projector/subscription/esdbv4"} {
		if slices.Contains(deps, bad) {
			t.Errorf("the binary links %s", bad)
		}
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/EventStore/EventStore-Client-Go/") {
			t.Errorf("the binary links %s", d)
		}
	}
	if !slices.Contains(deps, "github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb") {
		t.Errorf("the binary does not link KurrentDB-Client-Go, the client its Config.Dial names")
	}
	if !slices.Contains(deps, "github.com/revgate/projector/app") || !slices.Contains(deps, "github.com/FerretDB/FerretDB/ferretdb") {
		t.Fatalf("go list -deps does not show the packages the binary is made of:\n%s", out)
	}
}

// history is what was appended: each loan stream's events as the engine
// receives them, and all of them in log order.
type history struct {
	streams map[string][]projector.Event
	all     []projector.Event
}

// appendInterleaved appends the loans' events one at a time, the loans
// interleaved in a seeded order, as a busy desk writes them; after the i-th
// append it calls each(i).
func appendInterleaved(t *testing.T, s *e2e.Servers, traffic map[string][]any, each func(i int)) history {
	t.Helper()
	h := history{streams: map[string][]projector.Event{}}
	var names []string
	for name := range traffic {
		names = append(names, name)
	}
	slices.Sort(names)
	r := rand.New(rand.NewPCG(5, 5))
	for i := 0; len(names) > 0; i++ {
		k := r.IntN(len(names))
		name := names[k]
		next := traffic[name][len(h.streams[name])]
		evs := s.Append(t, lending.Registry(), name, next)
		h.streams[name] = append(h.streams[name], evs...)
		h.all = append(h.all, evs...)
		if len(h.streams[name]) == len(traffic[name]) {
			names = slices.Delete(names, k, k+1)
		}
		each(i)
	}
	return h
}

// checkAll compares every document of the three projections with the fold
// of its events; the loans are in collection loans.
func checkAll(t *testing.T, store *mongostore.Store, loans string, h history) {
	t.Helper()
	ctx := context.Background()
	for stream, evs := range h.streams {
		id := strings.TrimPrefix(stream, lending.LoanStreams)
		if err := projectortest.CheckDocument(ctx, store, lending.NewLoans().InCollection(loans), id, evs); err != nil {
			t.Error(err)
		}
	}
	if loans != "loans" {
		return // a rebuild fills the loans only
	}
	members, desk := lending.NewMembers(), lending.NewDeskStats()
	byMember, forDesk := map[string][]projector.Event{}, []projector.Event{}
	for _, ev := range h.all {
		id, _ := members.DocumentID(ev)
		byMember[id] = append(byMember[id], ev)
		if _, ok := desk.DocumentID(ev); ok {
			forDesk = append(forDesk, ev)
		}
	}
	for id, evs := range byMember {
		if err := projectortest.CheckDocument(ctx, store, members, id, evs); err != nil {
			t.Error(err)
		}
	}
	if err := projectortest.CheckDocument(ctx, store, desk, lending.DeskStatsID, forDesk); err != nil {
		t.Error(err)
	}
}

// build builds this main into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "library-projector")
	if out, err := exec.Command("go", "build", "-race", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// process is the binary running in the background.
type process struct {
	cmd    *exec.Cmd
	stderr lockedBuffer
	done   chan struct{}
}

func start(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stderr, p.cmd.Env = &p.stderr, cleanEnv()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitCheckpoint waits until the checkpoint of name reaches position.
func (p *process) waitCheckpoint(t *testing.T, db *mongo.Database, name string, position uint64) {
	t.Helper()
	if err := e2e.WaitCheckpoint(db, name, position, p.done); err != nil {
		t.Fatalf("%v\n%s", err, p.stderr.String())
	}
}

// terminate sends SIGTERM and returns the exit status.
func (p *process) terminate(t *testing.T) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("no exit a minute after SIGTERM\n%s", p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// runOK runs the binary to its end and returns its output; it fails t on a
// non-zero exit.
func runOK(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = &out, &errOut, cleanEnv()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s\n%s", filepath.Base(bin), strings.Join(args[:1], " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// cleanEnv is the test's environment without PROJECTOR_ variables, which
// would change what the binary does.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PROJECTOR_") {
			env = append(env, kv)
		}
	}
	return env
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
