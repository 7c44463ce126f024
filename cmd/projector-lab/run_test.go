package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/nettest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// cartMeta is the metadata the write side puts on every cart event of client
// "client" (the carts appendCarts makes).
var cartMeta, _ = json.Marshal(cart.Metadata{ClientID: "client"})

// appendCarts appends n carts of size events (ids from first) through the
// official client and returns each cart's events as the fold sees them.
func appendCarts(t *testing.T, c *kurrentdb.Client, first, n, size int, into map[string][]projector.Event) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(first), 3))
	for i := first; i < first+n; i++ {
		id := fmt.Sprintf("cart%03d", i)
		for rev, p := range cart.RandomLife(r, id, "client", size, time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)) {
			name, data, err := cart.Registry().Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.AppendToStream(context.Background(), cart.StreamID(id), kurrentdb.AppendToStreamOptions{},
				kurrentdb.EventData{EventID: uuid.New(), EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: data, Metadata: cartMeta}); err != nil {
				t.Fatal(err)
			}
			into[id] = append(into[id], projector.Event{Type: name, StreamID: cart.StreamID(id), StreamRevision: uint64(rev), Payload: p, Metadata: cartMeta})
		}
	}
}

// process is the projector binary running in the background.
type process struct {
	cmd    *exec.Cmd
	stderr lockedbuf.Buffer
	stdout lockedbuf.Buffer
	done   chan struct{} // closed when the process has ended
	base   string        // where it serves /metrics, when a test asked
}

func (p *process) stderrText() string { return p.stderr.String() }

func startBinary(t testing.TB, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(binary(t), args...), done: make(chan struct{})}
	p.cmd.Stderr, p.cmd.Stdout = &p.stderr, &p.stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// terminate sends SIGTERM and returns the exit code.
func (p *process) terminate(t testing.TB) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30s after SIGTERM\nstderr: %s", p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// waitCheckpoint waits until the cart details' checkpoint is want.
func waitCheckpoint(t testing.TB, p *process, s *mongostore.Store, want uint64) {
	t.Helper()
	waitCheckpointOf(t, p, s, cart.DetailsName, want)
}

// waitCheckpointOf waits until the checkpoint name is want, failing when p
// exits first or after two minutes.
func waitCheckpointOf(t testing.TB, p *process, s *mongostore.Store, name string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cp, err := s.LoadCheckpoint(context.Background(), name)
		if err == nil && cp != nil && cp.Position == want {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("projector exited: %v\nstderr: %s", p.cmd.ProcessState, p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint of %s: %v, want %d\nstderr: %s", name, cp, want, p.stderr.String())
		}
	}
}

// badInput is a command line that must fail with code and say want.
type badInput struct {
	name string
	args []string
	code int
	want string
}

// checkBadInputs runs each case: its exit code and message within 10 s, no
// panic, no password shown.
// waitCartsAtFold waits, up to 2 minutes, until every cart's details
// document is the fold of its events; past that it fails with the processes'
// logs.
func waitCartsAtFold(t *testing.T, store *mongostore.Store, carts map[string][]projector.Event, procs ...*process) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		bad := 0
		for id, evs := range carts {
			if projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), id, evs) != nil {
				bad++
			}
		}
		if bad == 0 {
			return
		}
		if time.Now().After(deadline) {
			logs := ""
			for _, p := range procs {
				logs += "\n" + p.stderrText()
			}
			t.Fatalf("%d carts still wrong%s", bad, logs)
		}
	}
}

func checkBadInputs(t *testing.T, cases []badInput) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := runBinary(t, 10*time.Second, c.args...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, c.code, c.want)
			}
			if strings.Contains(errOut, "hunter2") || strings.Contains(errOut, "panic") || strings.Contains(errOut, "goroutine ") {
				t.Fatalf("stderr shows a password or a crash: %s", errOut)
			}
		})
	}
}

var appliedRe = regexp.MustCompile(`msg="projection stopped" projection=cart_details applied=(\d+)`)

func applied(t *testing.T, stderr string) int {
	t.Helper()
	m := appliedRe.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no final count in the log:\n%s", stderr)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// The same with both schemes, esdb:// and kurrentdb://, which the binary's
// client (KurrentDB-Client-Go, through kurrent.Dial) reads alike.
func TestRun_projects_until_SIGTERM_and_a_second_run_resumes_from_the_checkpoint(t *testing.T) {
	for _, scheme := range []string{"esdb", "kurrentdb"} {
		t.Run(scheme, func(t *testing.T) { runAndResume(t, scheme) })
	}
}

func runAndResume(t *testing.T, scheme string) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	uri := scheme + strings.TrimPrefix(srv.URI(), "esdb")
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 20, 6, carts)
	args := []string{"run", "--esdb", uri, "--mongo", mongotest.URI(t), "--database", db.Name(), "--http", "", "--checkpoint-interval", "100ms"}

	first := startBinary(t, args...)
	waitCheckpoint(t, first, store, srv.Head())
	if code := first.terminate(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM\nstderr: %s", code, first.stderr.String())
	}
	if n := applied(t, first.stderr.String()); n != 120 {
		t.Fatalf("first run applied %d, want 120", n)
	}

	appendCarts(t, client, 20, 5, 6, carts)
	second := startBinary(t, args...)
	waitCheckpoint(t, second, store, srv.Head())
	if code := second.terminate(t); code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, second.stderr.String())
	}
	if n := applied(t, second.stderr.String()); n != 30 {
		t.Fatalf("second run applied %d, want the 30 new events only (it resumed from the checkpoint)", n)
	}
	for id, evs := range carts {
		if err := projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), id, evs); err != nil {
			t.Error(err)
		}
	}

	// status: at the head, then 12 events behind once more are appended.
	status := func() map[string]any {
		out, errOut, code := runBinary(t, 20*time.Second, "status", "--esdb", uri, "--mongo", mongotest.URI(t), "--database", db.Name(), "--json")
		var lines []map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &lines) != nil || len(lines) != 3 {
			t.Fatalf("status: exit %d, want a line per projection\n%s\n%s", code, out, errOut)
		}
		for _, l := range lines {
			if l["projection"] == cart.DetailsName {
				return l
			}
		}
		t.Fatalf("no %s in status:\n%s", cart.DetailsName, out)
		return nil
	}
	st := status()
	if st["checkpoint"] != float64(srv.Head()) || st["head"] != float64(srv.Head()) || st["behind"] != float64(0) || st["lastError"] != nil {
		t.Fatalf("status %v, want checkpoint = head = %d, 0 behind, no error", st, srv.Head())
	}
	appendCarts(t, client, 25, 2, 6, carts)
	if st = status(); st["behind"] != float64(12) {
		t.Fatalf("status %v, want 12 behind", st)
	}
	out, _, code := runBinary(t, 20*time.Second, "status", "--esdb", uri, "--mongo", mongotest.URI(t), "--database", db.Name())
	if code != 0 || !strings.Contains(out, "PROJECTION") || !regexp.MustCompile(`cart_details\s+cart_details\s+\d+\s+\S+\s+\d+\s+12\s`).MatchString(out) {
		t.Fatalf("status table (exit %d):\n%s", code, out)
	}
}

func TestRun_bad_input_gives_a_clear_error_and_exit_code_within_10s(t *testing.T) {
	srv := esdbtest.New(t)
	mongo := mongotest.URI(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	silent := nettest.Silent(t) // takes connections and says nothing
	// Something else listens there: it hangs up on what it does not speak.
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	checkBadInputs(t, []badInput{
		{"no esdb", []string{"run", "--mongo", mongo}, 2, "--esdb (or PROJECTOR_ESDB) is required"},
		{"unparsable esdb", []string{"run", "--esdb", "esdb://u:hunter2@:zz", "--mongo", mongo}, 2, "--esdb: kurrent: KurrentDB connection string"},
		{"unparsable kurrentdb", []string{"run", "--esdb", "kurrentdb://u:hunter2@:zz", "--mongo", mongo}, 2, "--esdb: kurrent: KurrentDB connection string"},
		{"unparsable mongo", []string{"run", "--esdb", srv.URI(), "--mongo", "mongodb://u:hunter2@host:99999"}, 2, "--mongo: mongostore: invalid MongoDB URI"},
		{"esdb refusing", []string{"run", "--esdb", "esdb://127.0.0.1:1?tls=false", "--mongo", mongo, "--http", "", "--connect-timeout", "2s"}, 1, "nothing answers at 127.0.0.1:1 (connection refused)"},
		{"esdb not answering", []string{"run", "--esdb", "esdb://" + silent + "?tls=false", "--mongo", mongo, "--http", "", "--connect-timeout", "2s"}, 1, "does not answer within 2s"},
		{"esdb on another server's port", []string{"run", "--esdb", "esdb://" + other.Addr().String() + "?tls=false", "--mongo", mongo, "--http", "", "--connect-timeout", "1m"}, 1,
			"the server there does not answer as EventStoreDB (is it the right port?)"},
		{"esdb without TLS", []string{"run", "--esdb", "esdb://" + srv.Addr(), "--mongo", mongo, "--http", ""}, 1, "does not speak TLS: add ?tls=false to the connection string"},
		{"mongo not answering", []string{"run", "--esdb", srv.URI(), "--mongo", "mongodb://127.0.0.1:1", "--http", "", "--connect-timeout", "1s"}, 1, "no MongoDB answered"},
		{"unknown projection", []string{"run", "--esdb", srv.URI(), "--projections", "cart_details,nope"}, 2, `unknown projection "nope"`},
		{"port in use", []string{"run", "--esdb", srv.URI(), "--mongo", mongo, "--http", busy.Addr().String()}, 1, "address already in use"},
		{"no projection", []string{"run", "--esdb", srv.URI(), "--projections", " , "}, 2, "names no projection"},
		{"zero connect timeout", []string{"run", "--esdb", srv.URI(), "--connect-timeout", "0s"}, 2, "--connect-timeout must be > 0"},
		{"bad env value", []string{"run", "--esdb", srv.URI(), "--workers", "2", "--checkpoint-every", "x"}, 2, "invalid value"},
		{"data dir is a file", []string{"run", "--esdb", srv.URI(), "--http", "", "--data-dir", filepath.Join(file, "sub")}, 1, "data dir"},
		{"bad retry", []string{"run", "--esdb", srv.URI(), "--retry-multiplier", "0.5"}, 2, "multiplier must be >= 1"},
		{"zero batch", []string{"run", "--esdb", srv.URI(), "--mongo", mongo, "--http", "", "--batch", "0"}, 2, "--batch 0, --batch-window 20ms, --batch-mib 16: want a batch of at least 1 event and 1 MiB"},
	})
}

// Under --group, an event that fails for good under skip or park is
// settled by the engine's policy and not parked in the group as well: under
// park its one record is the store's (status --parked lists it with the
// group's count, replay-parked NAME replays it), under skip the server is
// told it was skipped. Delivered again from a group's parked stream, such an
// event would meet a document that has moved past it and replay nothing.
func TestRun_with_a_persistent_group_settles_a_poison_event_by_the_policy_and_status_shows_it(t *testing.T) {
	for _, policy := range []string{"skip", "park"} {
		t.Run(policy, func(t *testing.T) {
			groupPoison(t, policy)
		})
	}
}

func groupPoison(t *testing.T, policy string) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 15, 6, carts)
	// A payload that does not decode, then one more event of the same cart.
	id := "cart003"
	if _, err := client.AppendToStream(context.Background(), cart.StreamID(id), kurrentdb.AppendToStreamOptions{},
		kurrentdb.EventData{EventID: uuid.New(), EventType: cart.TypeAdded, ContentType: kurrentdb.ContentTypeJson, Data: []byte(`{"productItem": 12`), Metadata: cartMeta}); err != nil {
		t.Fatal(err)
	}
	late := cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "late", Quantity: 2}}
	name, data, _ := cart.Registry().Encode(late)
	if _, err := client.AppendToStream(context.Background(), cart.StreamID(id), kurrentdb.AppendToStreamOptions{},
		kurrentdb.EventData{EventID: uuid.New(), EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: data, Metadata: cartMeta}); err != nil {
		t.Fatal(err)
	}
	carts[id] = append(carts[id], projector.Event{Type: name, StreamID: cart.StreamID(id), StreamRevision: uint64(len(carts[id]) + 1), Payload: late})

	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", cart.DetailsName}
	p := startBinary(t, append([]string{"run", "--http", "127.0.0.1:0", "--group", "projector", "--on-failure", policy}, common...)...)
	waitCartsAtFold(t, store, carts, p)
	// Every event delivered has its outcome: the consumer is caught up, as
	// far as a group's consumer can tell, with no lag, and stays so idle.
	base := "http://" + waitFor(t, p, regexp.MustCompile(`msg=http addr=(\S+)`))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		_, body := get(t, base+"/metrics")
		if metric(t, body, `projector_caught_up{projection="cart_details"}`) == 1 && metric(t, body, `projector_lag_seconds{projection="cart_details"}`) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("an idle group consumer is not caught up, or lags:\n%s", body)
		}
	}
	if policy == "park" {
		// The group's consumers take no lease: a replay that takes none
		// either (--lease 0) is refused beside them, as their writes and
		// its own could overwrite each other.
		out, errOut, code := runBinary(t, 20*time.Second, append([]string{"replay-parked", cart.DetailsName, "--lease", "0"}, common[:len(common)-2]...)...)
		if code != 1 || !strings.Contains(errOut, "1 consumer of persistent subscription group projector-cart_details connected (--lease 0: the replay holds no lease, for them to stand down): stop the run --group processes of cart_details") {
			t.Fatalf("replay-parked --lease 0 beside the group's consumer: exit %d\n%s\n%s", code, out, errOut)
		}
		// One that holds the projection's lease has the consumer stand
		// down, replays (the poison event still fails: it stays parked),
		// and lets go; the consumer then runs again.
		out, errOut, code = runBinary(t, time.Minute, append([]string{"replay-parked", cart.DetailsName}, common[:len(common)-2]...)...)
		if code != 1 || !strings.Contains(errOut, "1 event still fails; it stays parked") {
			t.Fatalf("replay-parked beside the group's consumer: exit %d\n%s\n%s", code, out, errOut)
		}
		waitFor(t, p, regexp.MustCompile(`msg="standing down: a process took the projection's lease" projection=cart_details holder="(replay-parked [^"]+)"`))
		more := map[string][]projector.Event{}
		appendCarts(t, client, 100, 1, 1, more)
		waitCartsAtFold(t, store, more, p)
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderrText())
	}
	// 91 events; under park, one more after the replay.
	if n, want := applied(t, p.stderrText()), map[string]int{"skip": 91, "park": 92}[policy]; n != want {
		t.Fatalf("applied %d, want %d", n, want)
	}
	if want := map[string]string{"skip": "skipped=1 parked=0", "park": "skipped=0 parked=1"}[policy]; !strings.Contains(p.stderrText(), want) {
		t.Errorf("the final count does not say %q:\n%s", want, p.stderrText())
	}
	out, errOut, code := runBinary(t, 20*time.Second, append([]string{"status", "--group", "projector", "--json"}, common...)...)
	var lines []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &lines) != nil || len(lines) != 1 {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errOut)
	}
	if lines[0]["parked"] != float64(0) || lines[0]["group"] != "projector-cart_details" || lines[0]["behind"] != nil {
		t.Fatalf("status %v, want group projector-cart_details with no parked event, and no count behind a checkpoint it has not", lines[0])
	}
	wantStored := map[string]float64{"skip": 0, "park": 1}[policy]
	if got, _ := lines[0]["parkedEvents"].(float64); got != wantStored {
		t.Fatalf("status %v: %v parked in the store, want %v", lines[0], got, wantStored)
	}
	out, errOut, code = runBinary(t, 20*time.Second, append([]string{"status", "--group", "projector"}, common...)...)
	if code != 0 || strings.Contains(out+errOut, "not started yet") {
		t.Fatalf("status of a group: exit %d, want 0 and no word of a checkpoint\n%s\n%s", code, out, errOut)
	}
	// --parked with --group: the store's parked events, then the group's
	// count on the server.
	out, errOut, code = runBinary(t, 20*time.Second, append([]string{"status", "--group", "projector", "--parked"}, common...)...)
	listed := strings.Contains(out, "shopping_cart-cart003@") && strings.Contains(out, "does not decode")
	if code != 0 || !regexp.MustCompile(`cart_details\s+projector-cart_details\s+0\s+`+fmt.Sprint(wantStored)+`\n`).MatchString(out) || listed != (policy == "park") ||
		!strings.Contains(errOut, "replay-parked NAME --group projector delivers them again") {
		t.Fatalf("status --parked of a group: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = runBinary(t, 20*time.Second, append([]string{"status", "--group", "projector", "--parked", "--json"}, common...)...)
	if code != 0 || strings.Join(strings.Fields(out), "") != `[{"projection":"cart_details","group":"projector-cart_details","parked":0,"parkedInStore":`+fmt.Sprint(wantStored)+`}]` {
		t.Fatalf("status --parked --json of a group: exit %d\n%s\n%s", code, out, errOut)
	}
	if policy == "park" {
		// replay-parked --group has nothing of the group's to deliver
		// again, and says where the parked event is.
		out, errOut, code = runBinary(t, 20*time.Second, append([]string{"replay-parked", cart.DetailsName, "--group", "projector"}, common[:len(common)-2]...)...)
		if code != 0 || !strings.Contains(out, "delivers its 0 parked events again") ||
			!strings.Contains(errOut, "status --parked lists them, and replay-parked cart_details without --group applies them, the consumers standing down while it runs") {
			t.Fatalf("replay-parked --group: exit %d\n%s\n%s", code, out, errOut)
		}
		// The store's record is the one to replay, once the consumer is
		// gone (the server drops its connection when it notices); the
		// binary's projection still cannot decode it.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			out, errOut, code = runBinary(t, 20*time.Second, append([]string{"replay-parked", cart.DetailsName}, common[:len(common)-2]...)...)
			if !strings.Contains(errOut, "connected: stop the run --group processes") || time.Now().After(deadline) {
				break
			}
		}
		if code != 1 || !strings.Contains(out, "replayed 0 of 1") {
			t.Fatalf("replay-parked: exit %d\n%s\n%s", code, out, errOut)
		}
		// Without --esdb it cannot ask: refused.
		out, errOut, code = runBinary(t, 20*time.Second, append([]string{"replay-parked", cart.DetailsName}, common[2:len(common)-2]...)...)
		if code != 2 || !strings.Contains(errOut, "cart_details has run in persistent subscription group projector-cart_details: give --esdb") {
			t.Fatalf("replay-parked without --esdb: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	// A group that does not exist: the projection's line says so, and one
	// line on stderr says what groups are named; the exit is 1.
	out, errOut, code = runBinary(t, 20*time.Second, append([]string{"status", "--group", "nog"}, common...)...)
	if code != 1 || !strings.Contains(errOut, "no persistent subscription group nog-cart_details on the server: run --group nog creates one per projection, named nog-<projection>") ||
		strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !regexp.MustCompile(`\ncart_details\s.*nog-cart_details \(none on the server\)`).MatchString(out) {
		t.Fatalf("status of a group that does not exist: exit %d\n%s\n%s", code, out, errOut)
	}
	// Two projections, one never run with --group: both lines, the other's
	// saying it has no group yet; the exit is 0, as for one not started.
	both := append(slices.Clone(common[:len(common)-1]), cart.DetailsName+","+cart.ShopSummaryName)
	out, errOut, code = runBinary(t, 20*time.Second, append([]string{"status", "--group", "projector"}, both...)...)
	if code != 0 || !regexp.MustCompile(`\ncart_details\s.*projector-cart_details \(0\)`).MatchString(out) ||
		!regexp.MustCompile(`\ncart_shop_summary\s.*projector-cart_shop_summary \(none on the server\)`).MatchString(out) ||
		!strings.Contains(errOut, "(projection cart_shop_summary has no persistent subscription group projector-cart_shop_summary on the server: it has not run with --group projector yet)") {
		t.Fatalf("status of a group that one projection has not: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = runBinary(t, 20*time.Second, append([]string{"status", "--group", "nog", "--parked", "--json"}, common...)...)
	if code != 1 || !strings.Contains(strings.Join(strings.Fields(out), ""), `"group":"nog-cart_details","parked":0,`) || !strings.Contains(out, `"missing": true`) ||
		!strings.Contains(errOut, "no persistent subscription group nog-cart_details on the server") {
		t.Fatalf("status --parked --json of a group that does not exist: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestRun_parks_a_poison_event_status_lists_it_and_replay_parked_reports_it_still_failing(t *testing.T) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 5, 4, carts)
	if _, err := client.AppendToStream(context.Background(), cart.StreamID("cart002"), kurrentdb.AppendToStreamOptions{},
		kurrentdb.EventData{EventID: uuid.New(), EventType: cart.TypeAdded, ContentType: kurrentdb.ContentTypeJson, Data: []byte(`{"productItem": 12`), Metadata: cartMeta}); err != nil {
		t.Fatal(err)
	}
	common := []string{"--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", cart.DetailsName}
	p := startBinary(t, append([]string{"run", "--esdb", srv.URI(), "--http", "", "--on-failure", "park", "--checkpoint-interval", "100ms"}, common...)...)
	waitCheckpoint(t, p, store, srv.Head())
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderrText())
	}
	out, errOut, code := runBinary(t, 20*time.Second, append([]string{"status", "--json"}, common...)...)
	var lines []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &lines) != nil || len(lines) != 1 || lines[0]["parkedEvents"] != float64(1) {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = runBinary(t, 20*time.Second, append([]string{"status", "--parked"}, common...)...)
	if code != 0 || !strings.Contains(out, "shopping_cart-cart002@4") || !strings.Contains(out, "does not decode") {
		t.Fatalf("status --parked: exit %d\n%s", code, out)
	}
	out, errOut, code = runBinary(t, 20*time.Second, append([]string{"replay-parked", cart.DetailsName}, common[:len(common)-2]...)...)
	if code != 1 || !strings.Contains(out, "replayed 0 of 1") || !strings.Contains(errOut, "still fail") {
		t.Fatalf("replay-parked: exit %d\n%s\n%s", code, out, errOut)
	}
	parked, err := store.Parked(context.Background(), cart.DetailsName)
	if err != nil || len(parked) != 1 || parked[0].Attempts < 2 {
		t.Fatalf("after a failed replay: %+v %v", parked, err)
	}
}

// A second creation event in a stream (the cart opened again) goes through
// the failure policy: under skip and park the run goes on past it, the
// document is the fold without it, and under park it is listed.
func TestRun_a_second_creation_is_skipped_or_parked_per_the_policy(t *testing.T) {
	for _, policy := range []string{"skip", "park"} {
		t.Run(policy, func(t *testing.T) {
			srv := esdbtest.New(t)
			client := srv.Client(t)
			db := mongotest.Database(t)
			store := mongostore.New(db)
			carts := map[string][]projector.Event{}
			appendCarts(t, client, 0, 4, 5, carts)
			id := "cart002"
			name, data, _ := cart.Registry().Encode(cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "again", OpenedAt: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)})
			if _, err := client.AppendToStream(context.Background(), cart.StreamID(id), kurrentdb.AppendToStreamOptions{},
				kurrentdb.EventData{EventID: uuid.New(), EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: data, Metadata: cartMeta}); err != nil {
				t.Fatal(err)
			}
			common := []string{"--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", cart.DetailsName}
			p := startBinary(t, append([]string{"run", "--esdb", srv.URI(), "--http", "", "--on-failure", policy, "--checkpoint-interval", "100ms"}, common...)...)
			waitCheckpoint(t, p, store, srv.Head())
			if code := p.terminate(t); code != 0 {
				t.Fatalf("exit %d\n%s", code, p.stderrText())
			}
			for id, evs := range carts {
				if err := projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), id, evs); err != nil && id != "cart002" {
					t.Error(err)
				}
			}
			var got cart.Details
			head, _, err := store.Load(context.Background(), cart.DetailsName, id, 0, &got)
			rev := head.Revision
			want, _ := cart.NewDetailsProjection().Fold(carts[id]...)
			if err != nil || rev != uint64(len(carts[id])) || got.ClientID != want.ClientID || got.Status != want.Status {
				t.Fatalf("%s: %+v at revision %d (%v); want the fold without the second opening, moved past it to %d", id, got, rev, err, len(carts[id]))
			}
			parked, err := store.Parked(context.Background(), cart.DetailsName)
			if err != nil || (policy == "park") != (len(parked) == 1) || (len(parked) == 1 && !strings.Contains(parked[0].Error, "already created")) {
				t.Fatalf("parked under %s: %+v (%v)", policy, parked, err)
			}
		})
	}
}

// One projection stopped at an event that failed for good (a domain error
// under the block policy) stops alone: the others reach the head, /healthz
// stays alive, /readyz and the metrics name the one that is down, status
// shows its error, and the exit status says not every projection ended well.
func TestRun_a_projection_blocked_at_a_failed_event_stops_alone(t *testing.T) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 5, 4, carts)
	name, data, _ := cart.Registry().Encode(cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: "cart001", ProductItem: cart.ProductItem{ProductID: "ghost", Quantity: 1}})
	if _, err := client.AppendToStream(context.Background(), cart.StreamID("cart001"), kurrentdb.AppendToStreamOptions{},
		kurrentdb.EventData{EventID: uuid.New(), EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: data, Metadata: cartMeta}); err != nil {
		t.Fatal(err)
	}
	p := startBinary(t, "run", "--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(),
		"--http", "127.0.0.1:0", "--checkpoint-interval", "100ms")
	waitCheckpointOf(t, p, store, cart.ShopSummaryName, srv.Head())
	waitCheckpointOf(t, p, store, cart.ClientSummaryName, srv.Head())
	base := "http://" + regexp.MustCompile(`msg=http addr=(\S+)`).FindStringSubmatch(p.stderrText())[1]
	var ready string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		code, body := get(t, base+"/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "down: cart_details blocked:") && !strings.Contains(body, "catching up") {
			ready = body
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz %d %q, want 503 naming cart_details blocked and nothing catching up\n%s", code, body, p.stderrText())
		}
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz %d while a projection is down", code)
	}
	_, body := get(t, base+"/metrics")
	for proj, want := range map[string]float64{cart.DetailsName: 0, cart.ShopSummaryName: 1, cart.ClientSummaryName: 1} {
		if v := metric(t, body, `projector_up{projection="`+proj+`"}`); v != want {
			t.Errorf("projector_up of %s = %v, want %v", proj, v, want)
		}
		blocked, running := 1-want, want
		if v := metric(t, body, `projector_state{projection="`+proj+`",state="blocked"}`); v != blocked {
			t.Errorf("projector_state of %s, blocked = %v, want %v", proj, v, blocked)
		}
		if v := metric(t, body, `projector_state{projection="`+proj+`",state="running"}`); v != running {
			t.Errorf("projector_state of %s, running = %v, want %v", proj, v, running)
		}
	}
	if !strings.Contains(ready, `"cart001"`) {
		t.Errorf("/readyz does not name the document: %s", ready)
	}
	if code := p.terminate(t); code != 1 {
		t.Fatalf("exit %d after SIGTERM with a projection blocked, want 1\n%s", code, p.stderrText())
	}
	if !strings.Contains(p.stderrText(), "projection stopped at an event that failed for good; the other projections go on") {
		t.Fatalf("no log of the blocked projection:\n%s", p.stderrText())
	}
	out, _, code := runBinary(t, 20*time.Second, "status", "--mongo", mongotest.URI(t), "--database", db.Name(), "--json")
	var lines []map[string]any
	if code != 3 || json.Unmarshal([]byte(out), &lines) != nil || len(lines) != 3 { // 3: a projection has stopped
		t.Fatalf("status: exit %d, want 3\n%s", code, out)
	}
	for _, l := range lines {
		if hasErr := l["lastError"] != nil; hasErr != (l["projection"] == cart.DetailsName) {
			t.Errorf("status of %v: lastError %v", l["projection"], l["lastError"])
		}
	}

	// Run again past the event (skip): once caught up, the error is cleared.
	again := startBinary(t, "run", "--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(),
		"--projections", cart.DetailsName, "--on-failure", "skip", "--http", "", "--checkpoint-interval", "100ms")
	waitCheckpoint(t, again, store, srv.Head())
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		all, err := store.Checkpoints(context.Background())
		if err == nil && all[cart.DetailsName].LastError == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the recovered projection's error is still recorded: %+v\n%s", all[cart.DetailsName], again.stderrText())
		}
	}
	if code := again.terminate(t); code != 0 {
		t.Fatalf("the run past the event: exit %d\n%s", code, again.stderrText())
	}
}

// A checkpoint stored against one event store is not trusted against
// another (a reset or replaced server, a restored backup): each projection
// stops with one clear error naming the checkpoint and how to recover,
// nothing is written, and status shows the error.
func TestRun_a_checkpoint_from_another_event_store_stops_the_projections_without_writing(t *testing.T) {
	first := esdbtest.New(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	appendCarts(t, first.Client(t), 0, 5, 6, map[string][]projector.Event{})
	args := []string{"--mongo", mongotest.URI(t), "--database", db.Name(), "--checkpoint-interval", "100ms"}
	p := startBinary(t, append([]string{"run", "--esdb", first.URI(), "--http", ""}, args...)...)
	for _, name := range []string{cart.DetailsName, cart.ShopSummaryName} {
		waitCheckpointOf(t, p, store, name, first.Head())
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, p.stderrText())
	}
	before, err := db.Collection(cart.DetailsName).CountDocuments(context.Background(), map[string]any{})
	if err != nil || before != 5 {
		t.Fatalf("%d documents after the first run (%v), want 5", before, err)
	}

	second := esdbtest.New(t) // another event store: fewer events, other ids
	appendCarts(t, second.Client(t), 100, 2, 3, map[string][]projector.Event{})
	// Every projection stops at once: the process has nothing left to run
	// and exits 1, with one line per projection saying why and what to do.
	q := startBinary(t, append([]string{"run", "--esdb", second.URI(), "--http", ""}, args...)...)
	select {
	case <-q.done:
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute later:\n%s", q.stderrText())
	}
	if code := q.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, q.stderrText())
	}
	for _, name := range []string{cart.DetailsName, cart.ClientSummaryName, cart.ShopSummaryName} {
		if !strings.Contains(q.stderrText(), "(to rebuild it: projector-lab rebuild "+name+")") {
			t.Errorf("no error for %s saying how to recover:\n%s", name, q.stderrText())
		}
	}
	after, err := db.Collection(cart.DetailsName).CountDocuments(context.Background(), map[string]any{})
	if err != nil || after != before {
		t.Fatalf("%d documents after the run on another store (%v), want the %d of before", after, err, before)
	}
	out, _, code := runBinary(t, 20*time.Second, "status", "--mongo", mongotest.URI(t), "--database", db.Name(), "--json")
	if code != 3 || strings.Count(out, "does not belong to this event store") != 3 { // 3: projections have stopped
		t.Fatalf("status: exit %d, want 3\n%s", code, out)
	}
	// Against the other store, status says that each checkpoint is past its
	// head, and how to recover, instead of "0 behind".
	out, errOut, code := runBinary(t, 20*time.Second, "status", "--esdb", second.URI(), "--mongo", mongotest.URI(t), "--database", db.Name())
	for _, name := range []string{cart.DetailsName, cart.ClientSummaryName, cart.ShopSummaryName} {
		if code != 3 || !strings.Contains(errOut, "projection "+name+": its checkpoint") ||
			!strings.Contains(errOut, "is past the head of $all") || !strings.Contains(errOut, "to rebuild it: projector-lab rebuild "+name) {
			t.Fatalf("status against the other store: exit %d, no word that %s's checkpoint is past its head:\n%s%s", code, name, out, errOut)
		}
	}
	if strings.Count(out, "past the head!") != 3 {
		t.Fatalf("status against the other store: the table does not say past the head:\n%s", out)
	}
}

// A cart event without its client in the metadata cannot be routed by the
// per-client summary. It goes through the failure policy, never dropped as
// unwanted: under block the summary stops alone at it (the other projections
// reach the head, the exit status is 1); under skip and park the summary
// goes past it, and under park it is listed with no document. Every
// document is the fold of the events it could route.
func TestRun_a_cart_event_without_its_client_goes_through_the_failure_policy(t *testing.T) {
	for _, policy := range []string{"block", "skip", "park"} {
		t.Run(policy, func(t *testing.T) {
			srv := esdbtest.New(t)
			client := srv.Client(t)
			db := mongotest.Database(t)
			store := mongostore.New(db)
			carts := map[string][]projector.Event{}
			appendCarts(t, client, 0, 3, 4, carts)
			var routable []projector.Event // the client's events, in the order of the log
			for i := range 3 {
				routable = append(routable, carts[fmt.Sprintf("cart%03d", i)]...)
			}
			// The last event of the log: an item added to cart001, with no
			// metadata (a write side that forgot it).
			bad := cart.ProductItemAddedToShoppingCart{ShoppingCartID: "cart001", ProductItem: cart.ProductItem{ProductID: "lost", Quantity: 7}}
			name, data, _ := cart.Registry().Encode(bad)
			if _, err := client.AppendToStream(context.Background(), cart.StreamID("cart001"), kurrentdb.AppendToStreamOptions{},
				kurrentdb.EventData{EventID: uuid.New(), EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: data}); err != nil {
				t.Fatal(err)
			}
			carts["cart001"] = append(carts["cart001"], projector.Event{Type: name, StreamID: cart.StreamID("cart001"), StreamRevision: uint64(len(carts["cart001"])), Payload: bad})

			common := []string{"--mongo", mongotest.URI(t), "--database", db.Name()}
			p := startBinary(t, append([]string{"run", "--esdb", srv.URI(), "--http", "", "--on-failure", policy, "--checkpoint-interval", "100ms"}, common...)...)
			waitCheckpointOf(t, p, store, cart.DetailsName, srv.Head())
			waitCheckpointOf(t, p, store, cart.ShopSummaryName, srv.Head())
			if policy == "block" {
				for deadline := time.Now().Add(time.Minute); !strings.Contains(p.stderrText(), "projection stopped at an event that failed for good"); time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("the summary did not stop at the event:\n%s", p.stderrText())
					}
				}
				if cp, err := store.LoadCheckpoint(context.Background(), cart.ClientSummaryName); err != nil || (cp != nil && cp.Position >= srv.Head()) {
					t.Fatalf("the summary's checkpoint %+v (%v) is at or past the event it stopped at", cp, err)
				}
			} else {
				waitCheckpointOf(t, p, store, cart.ClientSummaryName, srv.Head())
			}
			want := map[string]int{"block": 1, "skip": 0, "park": 0}[policy]
			if code := p.terminate(t); code != want {
				t.Fatalf("exit %d, want %d\n%s", code, want, p.stderrText())
			}
			if !strings.Contains(p.stderrText(), "no client in the cart event's metadata") {
				t.Fatalf("no line saying why:\n%s", p.stderrText())
			}
			if policy == "block" {
				// Blocked, the summary left what was in flight behind the
				// event for later; run on past it (skip), it is complete.
				again := startBinary(t, append([]string{"run", "--esdb", srv.URI(), "--http", "", "--on-failure", "skip",
					"--projections", cart.ClientSummaryName, "--checkpoint-interval", "100ms"}, common...)...)
				waitCheckpointOf(t, again, store, cart.ClientSummaryName, srv.Head())
				if code := again.terminate(t); code != 0 {
					t.Fatalf("the run past the event: exit %d\n%s", code, again.stderrText())
				}
			}
			if err := projectortest.CheckDocument(context.Background(), store, cart.NewClientSummaryProjection(), "client", routable); err != nil {
				t.Error(err)
			}
			for id, evs := range carts {
				if err := projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), id, evs); err != nil {
					t.Error(err)
				}
			}
			parked, err := store.Parked(context.Background(), cart.ClientSummaryName)
			if err != nil || (policy == "park") != (len(parked) == 1) || (len(parked) == 1 && (parked[0].Document != "" || parked[0].StreamRevision != uint64(len(carts["cart001"])-1))) {
				t.Fatalf("parked under %s: %+v (%v)", policy, parked, err)
			}
			if policy == "park" {
				out, _, code := runBinary(t, 20*time.Second, append([]string{"status", "--parked"}, common...)...)
				if code != 0 || !strings.Contains(out, "shopping_cart-cart001@4") || !strings.Contains(out, "no client in the cart event's metadata") {
					t.Fatalf("status --parked: exit %d\n%s", code, out)
				}
			}
		})
	}
}

// Under --group with the block policy, an event that fails for good is
// delivered again a bounded number of times, then parked in the group, and
// so is the event of its document that waits behind it: the process says so
// in its log, /readyz names the blocked projection, projector_up is 0 and the
// exit status is 1, instead of retrying for ever while ready. A new process
// still says it from the group's parked count, and replay-parked --group
// hands the parked events back to the group. The other documents are right,
// and the blocked one stays at the fold of the events before the failure.
func TestRun_with_a_persistent_group_under_block_parks_a_failing_event_after_bounded_retries(t *testing.T) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 4, 5, carts)
	id := "cart002"
	for _, ev := range []any{
		cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "ghost", Quantity: 1}}, // a domain error
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "late", Quantity: 2}},      // waits behind it
	} {
		name, data, _ := cart.Registry().Encode(ev)
		if _, err := client.AppendToStream(context.Background(), cart.StreamID(id), kurrentdb.AppendToStreamOptions{},
			kurrentdb.EventData{EventID: uuid.New(), EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: data, Metadata: cartMeta}); err != nil {
			t.Fatal(err)
		}
	}
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", cart.DetailsName}
	run := append([]string{"run", "--http", "127.0.0.1:0", "--group", "projector", "--retry-initial-delay", "5ms", "--retry-max-retries", "2"}, common...)
	p := startBinary(t, run...)
	// The failing event is parked after 10 deliveries; the one behind it,
	// once that is parked, at once (until then it is handed back too).
	parked := func() (kept, atOnce int) {
		out := p.stderrText()
		return strings.Count(out, "parked an event that kept failing"), strings.Count(out, "parked an event at once")
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if kept, atOnce := parked(); kept+atOnce >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failing event and the one behind it were not parked:\n%s", p.stderrText())
		}
	}
	if kept, atOnce := parked(); kept+atOnce != 2 || kept == 0 || strings.Count(p.stderrText(), "deliveries=10 ") != kept {
		t.Errorf("parked %d after 10 deliveries and %d at once, want 2 in all, those after 10 deliveries saying so:\n%s", kept, atOnce, p.stderrText())
	}
	for cid, evs := range carts { // cart002's events here are those before the failure
		if err := projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), cid, evs); err != nil {
			t.Error(err)
		}
	}
	base := "http://" + regexp.MustCompile(`msg=http addr=(\S+)`).FindStringSubmatch(p.stderrText())[1]
	wantDown := "down: cart_details blocked: events that kept failing are parked in group projector-cart_details"
	waitReadyz := func(base, want string) string {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			code, body := get(t, base+"/readyz")
			if code == http.StatusServiceUnavailable && strings.Contains(body, want) {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz %d %q, want 503 with %q", code, body, want)
			}
		}
	}
	if body := waitReadyz(base, wantDown); !strings.Contains(body, "replay-parked cart_details --group") {
		t.Errorf("/readyz does not say what to do: %s", body)
	}
	_, body := get(t, base+"/metrics")
	if v := metric(t, body, `projector_up{projection="cart_details"}`); v != 0 {
		t.Errorf("projector_up %v while blocked, want 0", v)
	}
	if v := metric(t, body, `projector_state{projection="cart_details",state="blocked"}`); v != 1 {
		t.Errorf("projector_state blocked %v while blocked in its group, want 1", v)
	}
	if v := metric(t, body, `projector_parked_total{projection="cart_details"}`); v != 2 {
		t.Errorf("projector_parked_total %v, want 2", v)
	}
	// status says so too, and exits 3, as for a projection stopped by
	// block without a group.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		out, errOut, code := runBinary(t, 20*time.Second, append([]string{"status", "--group", "projector"}, common...)...)
		if code == 3 && strings.Contains(out, "events that kept failing are parked in group") && strings.Contains(errOut, "1 of 1 projections stopped or failing") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status --group while blocked: exit %d, want 3 and why\n%s\n%s", code, out, errOut)
		}
	}
	if code := p.terminate(t); code != 1 {
		t.Fatalf("exit %d with a projection blocked in its group, want 1\n%s", code, p.stderrText())
	}

	// A new process knows it from the group's parked count.
	q := startBinary(t, run...)
	qbase := "http://" + waitFor(t, q, regexp.MustCompile(`msg=http addr=(\S+)`))
	waitReadyz(qbase, "(2 on the server)")
	out, errOut, code := runBinary(t, 20*time.Second, append([]string{"replay-parked", cart.DetailsName, "--group", "projector"}, common[:6]...)...)
	if code != 0 || !strings.Contains(out, "group projector-cart_details delivers its 2 parked events again") {
		t.Fatalf("replay-parked --group: exit %d\n%s\n%s", code, out, errOut)
	}
	// Delivered again, they fail again (the projection is not fixed) and
	// are parked again: still blocked, never ready.
	for deadline := time.Now().Add(2 * time.Minute); strings.Count(q.stderrText(), "parked an event that kept failing")+
		strings.Count(q.stderrText(), "parked an event at once") < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the replayed events were not parked again:\n%s", q.stderrText())
		}
	}
	waitReadyz(qbase, wantDown)
	if code := q.terminate(t); code != 1 {
		t.Fatalf("second run: exit %d, want 1\n%s", code, q.stderrText())
	}
	// Under another policy too: what a group parks kept failing without
	// failing for good there (a predecessor that did not come), and its
	// documents wait behind it all the same.
	parkRun := append([]string{"run", "--http", "127.0.0.1:0", "--group", "projector", "--on-failure", "park"}, common...)
	r := startBinary(t, parkRun...)
	rbase := "http://" + waitFor(t, r, regexp.MustCompile(`msg=http addr=(\S+)`))
	waitFor(t, r, regexp.MustCompile(`msg="(runner starts)" runner=cart_details`))
	waitReadyz(rbase, "(2 on the server)")
	if code := r.terminate(t); code != 1 {
		t.Fatalf("a run under park with events parked in its group: exit %d, want 1\n%s", code, r.stderrText())
	}
	for cid, evs := range carts {
		if err := projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), cid, evs); err != nil {
			t.Error(err)
		}
	}
}

// waitFor waits until p's stderr matches re and returns its first group.
func waitFor(t *testing.T, p *process, re *regexp.Regexp) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(p.stderrText()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %v in stderr:\n%s", re, p.stderrText())
		}
	}
}

// The shipped shop summary, one document fed by every stream, catches up
// from the start over more events than its window of handled ids holds,
// with the default flags: its document is the fold of them all.
func TestRun_the_shop_summary_catches_up_over_more_events_than_its_window(t *testing.T) {
	srv := esdbtest.New(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	lives := map[string][]projector.Event{}
	appendCarts(t, srv.Client(t), 0, 300, 10, lives)
	var all []projector.Event
	for i := range 300 {
		all = append(all, lives[fmt.Sprintf("cart%03d", i)]...)
	}
	if len(all) <= cart.ShopWindow {
		t.Fatalf("%d events: the test needs more than the window's %d", len(all), cart.ShopWindow)
	}
	p := startBinary(t, "run", "--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--http", "",
		"--projections", cart.ShopSummaryName)
	waitCheckpointOf(t, p, store, cart.ShopSummaryName, srv.Head())
	if code := p.terminate(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, p.stderrText())
	}
	if err := projectortest.CheckDocument(context.Background(), store, cart.NewShopSummaryProjection(), cart.ShopSummaryID, all); err != nil {
		t.Fatalf("%v\n%s", err, p.stderrText())
	}
}

// Two processes consume one group: the group run creates is pinned, so each
// stream's events go to one process, and neither waits for the other's
// events of a stream. Every document is the fold of its events, and no event
// is handed back or parked in the group. (Both are connected before the
// events come: a consumer joining moves streams between them, on the test
// server (bucket modulo the consumers), and may on a node.) On a server
// without atomic conditional writes (FerretDB) one of them consumes the
// group, under the group's lease, and the other stands by.
func TestRun_two_processes_in_a_group_each_take_whole_streams(t *testing.T) {
	srv := esdbtest.New(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", cart.DetailsName}
	run := append([]string{"run", "--http", "127.0.0.1:0", "--group", "two", "--log-level", "info"}, common...)
	a, b := startBinary(t, run...), startBinary(t, run...)
	consumers := []*process{a, b}
	if strings.HasPrefix(mongotest.Server(t), "FerretDB") {
		consumers = []*process{oneHolds(t, a, b)}
	}
	for _, p := range consumers {
		base := "http://" + waitFor(t, p, regexp.MustCompile(`msg=http addr=(\S+)`))
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if code, _ := get(t, base+"/readyz"); code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not connected to its group:\n%s", p.stderrText())
			}
		}
	}
	carts := map[string][]projector.Event{}
	appendCarts(t, srv.Client(t), 0, 40, 8, carts)
	waitCartsAtFold(t, store, carts, a, b)
	for _, p := range []*process{a, b} {
		if code := p.terminate(t); code != 0 {
			t.Fatalf("exit %d\n%s", code, p.stderrText())
		}
		if strings.Contains(p.stderrText(), "predecessor") {
			t.Fatalf("a process waited for another's event of a stream:\n%s", p.stderrText())
		}
	}
	if n := applied(t, a.stderrText()) + applied(t, b.stderrText()); n != 320 {
		t.Fatalf("the two processes applied %d events, want the 320 appended once each", n)
	}
}

// oneHolds waits up to a minute for one of a and b to hold the group's
// lease and the other to stand by, and returns the holder.
func oneHolds(t *testing.T, a, b *process) *process {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, p := range [][2]*process{{a, b}, {b, a}} {
			holder, standby := p[0].stderrText(), p[1].stderrText()
			if strings.Contains(holder, "holds the group's lease") && strings.Contains(standby, "standing by: another process runs the projection") {
				if strings.Contains(standby, "holds the group's lease") {
					t.Fatalf("both hold the group's lease:\n%s\n%s", holder, standby)
				}
				return p[0]
			}
		}
	}
	t.Fatalf("not one holder and one standby in a minute:\n%s\n%s", a.stderrText(), b.stderrText())
	return nil
}

// A --group consumer takes no lease, but stands by while another process
// holds the projection's: replay-parked, whose writes beside the
// consumers' could be lost. Once the lease is let go it runs.
func TestRun_with_a_persistent_group_stands_by_while_a_replay_holds_the_lease(t *testing.T) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 3, 4, carts)
	replay, err := store.AcquireLease(context.Background(), cart.DetailsName, "replay-parked host/1/abc", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", cart.DetailsName}
	p := startBinary(t, append([]string{"run", "--http", "", "--group", "projector", "--on-failure", "park", "--lease", "2s"}, common...)...)
	waitFor(t, p, regexp.MustCompile(`msg="standing by: a process holds the projection's lease" projection=cart_details holder=("replay-parked host/1/abc")`))
	if n, err := db.Collection(cart.DetailsName).CountDocuments(context.Background(), map[string]any{}); err != nil || n != 0 {
		t.Fatalf("%d documents written (%v) while replay-parked holds the lease", n, err)
	}
	if err := store.ReleaseLease(context.Background(), replay); err != nil {
		t.Fatal(err)
	}
	waitCartsAtFold(t, store, carts, p)
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderrText())
	}
}

// A --group consumer whose subscription drops and is made again inside its
// runner (the node gone for a moment) does not pass through its standby:
// it watches the projection's lease while it runs, and stands down when a
// process takes it (replay-parked, which found no consumer connected while
// the node was away). With --lease 0 it reads the lease all the same.
// Before, the consumer came back and wrote beside the replay, and one run
// with --lease 0 never looked at the lease.
func TestRun_with_a_persistent_group_stands_down_when_a_replay_takes_the_lease_while_it_runs(t *testing.T) {
	for _, lease := range []string{"2s", "0"} {
		t.Run("lease="+lease, func(t *testing.T) {
			g := startGroupConsumer(t, lease)
			srv, client, db, store, p := g.srv, g.client, g.db, g.store, g.p
			back := time.Now().Add(3 * time.Second)
			srv.Refuse(3 * time.Second)
			replay, err := store.AcquireLease(context.Background(), cart.DetailsName, "replay-parked host/1/abc", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, p, regexp.MustCompile(`msg="standing by: a process holds the projection's lease" projection=cart_details holder=("replay-parked host/1/abc")`))
			time.Sleep(time.Until(back) + 500*time.Millisecond) // the node back
			more := map[string][]projector.Event{}
			appendCarts(t, client, 10, 2, 4, more)
			time.Sleep(3 * time.Second)
			if n, err := db.Collection(cart.DetailsName).CountDocuments(context.Background(), map[string]any{}); err != nil || n != 2 {
				t.Fatalf("%d documents (%v) while replay-parked holds the lease, want the 2 written before it:\n%s", n, err, p.stderrText())
			}
			if err := store.ReleaseLease(context.Background(), replay); err != nil {
				t.Fatal(err)
			}
			waitCartsAtFold(t, store, more, p)
			if code := p.terminate(t); code != 0 {
				t.Fatalf("exit %d\n%s", code, p.stderrText())
			}
		})
	}
}

// A --group consumer reads the projection's lease every second, whatever
// its --lease: replay-parked, which waits --connect-timeout for the group's
// consumers to stand down, finds them gone also beside one run with
// --lease 2m. Before, such a consumer read it every 12 s, and the replay
// refused, telling the operator to stop a process about to stand down.
func TestRun_with_a_persistent_group_and_a_long_lease_stands_down_for_a_replay(t *testing.T) {
	g := startGroupConsumer(t, "2m")
	client, store, p := g.client, g.store, g.p
	out, errOut, code := runBinary(t, time.Minute, append([]string{"replay-parked", cart.DetailsName}, g.common[:len(g.common)-2]...)...)
	if code != 0 {
		t.Fatalf("replay-parked beside a consumer run with --lease 2m: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, p, regexp.MustCompile(`msg="standing down: a process took the projection's lease" projection=cart_details holder="(replay-parked [^"]+)"`))
	more := map[string][]projector.Event{}
	appendCarts(t, client, 10, 2, 4, more)
	waitCartsAtFold(t, store, more, p)
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderrText())
	}
}

// groupConsumer is a run --group process of the cart details, on servers
// of its own, caught up with the 2 carts appended before it.
type groupConsumer struct {
	srv    *esdbtest.Server
	client *kurrentdb.Client
	db     *mongo.Database
	store  *mongostore.Store
	common []string // the servers' flags and --projections
	p      *process
}

// startGroupConsumer starts a groupConsumer under --on-failure park with
// --lease lease.
func startGroupConsumer(t *testing.T, lease string) groupConsumer {
	t.Helper()
	g := groupConsumer{srv: esdbtest.New(t), db: mongotest.Database(t)}
	g.client, g.store = g.srv.Client(t), mongostore.New(g.db)
	carts := map[string][]projector.Event{}
	appendCarts(t, g.client, 0, 2, 4, carts)
	g.common = []string{"--esdb", g.srv.URI(), "--mongo", mongotest.URI(t), "--database", g.db.Name(), "--projections", cart.DetailsName}
	g.p = startBinary(t, append([]string{"run", "--http", "", "--group", "projector", "--on-failure", "park", "--lease", lease}, g.common...)...)
	waitCartsAtFold(t, g.store, carts, g.p)
	return g
}
