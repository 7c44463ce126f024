package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
)

// binary builds the projector once for the tests of this package, with
// the race detector.
func binary(t testing.TB) string {
	t.Helper()
	if bin == "" {
		bin = build(t, "-race")
	}
	return bin
}

// build builds the projector into a temporary directory with flags.
func build(t testing.TB, flags ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "projector-bin-")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "projector")
	args := append(append([]string{"build"}, flags...), "-o", out, ".")
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	return out
}

var bin string

func TestMain(m *testing.M) {
	code := mongotest.Main(m)
	if bin != "" {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

func runBinary(t testing.TB, timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	path := binary(t) // built once, before the command's time starts
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("projector %v did not finish in %v\nstdout: %s\nstderr: %s", args, timeout, o.String(), e.String())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return o.String(), e.String(), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

func TestDemo_checks_every_document_against_the_fold(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := runBinary(t, 3*time.Minute, "demo", "--carts", "20", "--events", "8", "--consumers", "3",
		"--duplicates", "0.3", "--drops", "3", "--seed", "1", "--data-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, path := range []string{"catch-up", "group"} {
		re := regexp.MustCompile(path + `\s+applied 160, duplicates skipped (\d+), failed (\d+)[^,]*, .*drops (\d+)[^,]*, all applied ([0-9.hms]+) after the first append; documents 20 of 20 equal to the pure fold`)
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s line with 160 applied and 20 of 20 documents right:\n%s", path, out)
		}
		// A consumer of the group hands back an event whose predecessor
		// is queued behind it; the catch-up path fails none.
		if path == "catch-up" && m[2] != "0" {
			t.Errorf("catch-up: failed %s, want 0", m[2])
		}
		m = append(m[:2], m[3:]...)
		if took, err := time.ParseDuration(m[3]); err != nil || took <= 0 {
			t.Errorf("%s: all applied after %q, want a time", path, m[3])
		}
		if m[1] == "0" || m[2] == "0" {
			t.Errorf("%s: %s duplicates and %s drops: the faults did not happen", path, m[1], m[2])
		}
	}
	if m := regexp.MustCompile(`through the write side \((\d+) commands retried, appended once\)`).FindStringSubmatch(out); m == nil || m[1] == "0" {
		t.Errorf("no retried commands reported:\n%s", out)
	}
	if !strings.Contains(out, "every document is right") {
		t.Fatalf("report:\n%s", out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) == 0 {
		t.Fatalf("no data kept in %s", dir)
	}
}

func TestCLI_bad_input_gives_a_clear_error_and_exit_code(t *testing.T) {
	unwritable := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(unwritable, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	checkBadInputs(t, []badInput{
		{"no command", nil, 2, "usage: projector"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown flag", []string{"demo", "--nope"}, 2, "flag provided but not defined"},
		{"bad value", []string{"demo", "--carts", "0"}, 2, "--carts must be at least 1"},
		{"rate not a number", []string{"demo", "--rate", "NaN"}, 2, "--rate must be in"},
		{"rate too high", []string{"demo", "--rate", "1e12"}, 2, "--rate must be in"},
		{"unparsable mongo URI", []string{"demo", "--mongo", "nonsense"}, 2, "--mongo: mongostore: invalid MongoDB URI"},
		{"bench on an unparsable mongo URI", []string{"bench", "--mongo", "nonsense"}, 2, "--mongo: mongostore: invalid MongoDB URI"},
		{"nobody listening", []string{"demo", "--mongo", "mongodb://127.0.0.1:1", "--connect-timeout", "1s"}, 1, "no MongoDB answered at 127.0.0.1:1"},
		{"data dir is a file", []string{"demo", "--data-dir", filepath.Join(unwritable, "sub")}, 1, "data dir"},
		{"bench without carts", []string{"bench", "--carts", "0"}, 2, "--carts, --events, --rounds and --live-rate must be > 0"},
		{"bench without rounds", []string{"bench", "--rounds", "0"}, 2, "--carts, --events, --rounds and --live-rate must be > 0"},
		{"bench without workers", []string{"bench", "--workers", "0"}, 2, "--workers, --batch and --batch-mib >= 1"},
		{"bench with a batch of 0 MiB", []string{"bench", "--batch-mib", "0"}, 2, "--workers, --batch and --batch-mib >= 1"},
		{"bench with a batch over 1 GiB", []string{"bench", "--batch-mib", "2048"}, 2, "(--batch-mib <= 1024)"},
		{"bench of an unknown read model", []string{"bench", "--projection", "nope"}, 2, `--projection: want details, client or shop, got "nope"`},
		{"bench with fewer than no group consumers", []string{"bench", "--group-consumers", "-1"}, 2, "--group-consumers and --batch-window >= 0"},
		{"rebuild with a zero batch", []string{"rebuild", "cart_details", "--esdb", "esdb://127.0.0.1:1?tls=false", "--batch", "0"}, 2, "--batch 0, --batch-window 20ms, --batch-mib 16: want a batch of at least 1 event and 1 MiB"},
	})
}

func TestVersion(t *testing.T) {
	out, _, code := runBinary(t, 10*time.Second, "version")
	if code != 0 || !strings.HasPrefix(out, "projector-lab ") {
		t.Fatalf("exit %d: %q", code, out)
	}
}

func TestBench_a_small_run_reports_each_way_and_checks_the_documents(t *testing.T) {
	out, errOut, code := runBinary(t, 3*time.Minute, "bench", "--mongo", mongotest.URI(t),
		"--carts", "6", "--events", "5", "--live-events", "10", "--live-rate", "100", "--memory-scale", "2", "--interleave", "clustered", "--b-sample", "20", "--rounds", "2")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	wants := []string{
		"30 events over 6 carts (5 per cart, clustered)",
		"A  projector catch-up (default settings)",
		"B  seed per-event (find revision>=n-1, update), 20 sampled",
		"L  floor",
		"F  floor: R (read the events) + L",
		"R  reading the events alone",
		"A/F = ",
		"(medians of 2 rounds; each round's: ",
		"A/B = ",
		"A's documents equal the fold (and L's): 6 of 6",
		"A's process peaked at ",
		"A on 60 events (6 carts, 10 events each; 6 documents): ",
		"x the time of the run above, peaked at ",
		"documents equal the fold: 6 of 6",
		"live (details), 10 events at 100/s",
	}
	if runtime.GOOS == "linux" { // from /proc/stat
		wants = append(wants, "the machine's cores busy (of ")
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// G: the log projected by competing consumers of a persistent group is
// timed against the floor, and its documents are checked against the fold.
func TestBench_the_group_way_reports_G_and_checks_its_documents(t *testing.T) {
	out, errOut, code := runBinary(t, 3*time.Minute, "bench", "--mongo", mongotest.URI(t),
		"--carts", "6", "--events", "5", "--skip-b", "--memory-scale", "0", "--live-events", "0", "--rounds", "2", "--group-consumers", "2")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{
		"A's documents equal the fold (and L's): 6 of 6",
		"G  persistent group, 2 consumers",
		"G/F = ",
		"G/A = ",
		"G's documents equal the fold: 6 of 6",
		"acknowledgements, each after its event's effect was written; 30 applied, ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`G/F = [0-9.]+ \(each round's: [0-9.]+, [0-9.]+\)`).MatchString(out) {
		t.Errorf("no G/F of each of the 2 rounds in:\n%s", out)
	}
}

// The summaries: each read model's documents are checked against its fold,
// and compared with the details projection on the same events (D).
func TestBench_a_summary_is_compared_with_the_details_on_the_same_events(t *testing.T) {
	for _, c := range []struct{ projection, docs, shape string }{
		{"client", "2 of 2", "cart_client_summary (one document per client"},
		{"shop", "1 of 1", "cart_shop_summary (one document fed by every cart"},
	} {
		t.Run(c.projection, func(t *testing.T) {
			out, errOut, code := runBinary(t, 3*time.Minute, "bench", "--mongo", mongotest.URI(t), "--projection", c.projection,
				"--carts", "20", "--events", "5", "--live-events", "10", "--live-rate", "100", "--memory-scale", "2", "--documents-scale", "2", "--rounds", "1")
			if code != 0 {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
			for _, want := range []string{
				"100 events over 20 carts (5 per cart, shuffled) of 2 clients",
				"read model: " + c.shape,
				"A  projector catch-up (" + c.projection + ", workers 4",
				"A's documents equal the fold (and L's): " + c.docs,
				"D  the details projection on the same events: ",
				"A's throughput / D's = ",
				"live (" + c.projection + "), 10 events at 100/s",
				"A on 200 events (20 carts, 10 events each; " + c.docs[:1] + " documents): ",
				"A on 200 events (40 carts, 5 events each; ",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
			if strings.Contains(out, "B  seed per-event") {
				t.Errorf("B, the details' per-event code, run for a summary:\n%s", out)
			}
		})
	}
}

func TestDemo_hold_prints_connection_strings_that_run_and_status_accept(t *testing.T) {
	var stdout, stderr lockedbuf.Buffer
	dataDir := t.TempDir()
	demo := exec.Command(binary(t), "demo", "--carts", "5", "--events", "4", "--consumers", "1", "--drops", "0",
		"--duplicates", "0", "--seed", "2", "--data-dir", dataDir, "--hold")
	demo.Stdout, demo.Stderr = &stdout, &stderr
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { demo.Wait(); close(done) }()
	t.Cleanup(func() {
		demo.Process.Kill()
		<-done
	})
	re := regexp.MustCompile(`projector status --esdb '([^']+)' --mongo '([^']+)'`)
	var m []string
	for deadline := time.Now().Add(2 * time.Minute); m == nil; time.Sleep(20 * time.Millisecond) {
		m = re.FindStringSubmatch(stdout.String())
		select {
		case <-done:
			t.Fatalf("the demo ended without holding:\n%s\n%s", stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection strings printed:\n%s", stdout.String())
		}
	}
	esdbURI, mongoURI := m[1], m[2]
	if !strings.Contains(stdout.String(), "projector run --esdb '"+esdbURI+"' --mongo '"+mongoURI+"'") {
		t.Fatalf("no run command line printed:\n%s", stdout.String())
	}

	out, errOut, code := runBinary(t, 30*time.Second, "status", "--esdb", esdbURI, "--mongo", mongoURI, "--json")
	var lines []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &lines) != nil || len(lines) != 3 {
		t.Fatalf("status on the held servers: exit %d\n%s\n%s", code, out, errOut)
	}
	head := uint64(lines[0]["head"].(float64))
	store, err := mongostore.Open(context.Background(), mongoURI, "held", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(context.Background())
	run := startBinary(t, "run", "--esdb", esdbURI, "--mongo", mongoURI, "--database", "held", "--projections", cart.DetailsName,
		"--http", "", "--checkpoint-interval", "100ms")
	waitCheckpoint(t, run, store, head)
	if code := run.terminate(t); code != 0 {
		t.Fatalf("run on the held servers: exit %d\n%s", code, run.stderrText())
	}
	if n := applied(t, run.stderrText()); n != 20 {
		t.Fatalf("run on the held servers applied %d events, want the demo's 20", n)
	}
	// The held demo serves its data dir: a second embedded server on it is
	// refused, naming the demo's process.
	_, errOut, code = runBinary(t, 30*time.Second, "run", "--esdb", esdbURI, "--data-dir", dataDir, "--http", "")
	want := fmt.Sprintf("data dir in use: process %d serves %s", demo.Process.Pid, dataDir)
	if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, want) {
		t.Fatalf("run on the held data dir: exit %d, stderr %q; want exit 1 and one line with %q", code, errOut, want)
	}
	demo.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the held demo did not stop on SIGINT")
	}
	if code := demo.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the held demo exited %d\n%s", code, stderr.String())
	}
}

// A password in a connection string is never printed: the demo shows the
// URI it uses with the password replaced.
func TestDemo_does_not_print_the_password_of_its_MongoDB(t *testing.T) {
	u, err := url.Parse(mongotest.URI(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("demo", "hunter2")
	out, errOut, code := runBinary(t, 3*time.Minute, "demo", "--carts", "2", "--events", "3", "--consumers", "1", "--drops", "0",
		"--duplicates", "0", "--seed", "3", "--mongo", u.String(), "--database", "demo_secret")
	if strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("the password is in the output:\n%s\n%s", out, errOut)
	}
	if code == 0 && !strings.Contains(out, "demo:xxxxx@") {
		t.Fatalf("exit 0 without the redacted URI in the report:\n%s", out)
	}
	t.Logf("exit %d\n%s%s", code, out, errOut)
}

// SIGINT stops the demo in the middle of its traffic, and it says so.
func TestDemo_stops_on_SIGINT_in_the_middle_of_its_traffic(t *testing.T) {
	var stdout, stderr lockedbuf.Buffer
	demo := exec.Command(binary(t), "demo", "--carts", "200", "--events", "20", "--rate", "200", "--data-dir", t.TempDir())
	demo.Stdout, demo.Stderr = &stdout, &stderr
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { demo.Wait(); close(done) }()
	t.Cleanup(func() { demo.Process.Kill(); <-done })
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(stderr.String(), "appended "); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no traffic:\n%s", stderr.String())
		}
	}
	began := time.Now()
	demo.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGINT")
	}
	t.Logf("stopped %v after SIGINT", time.Since(began)) // bounded above by the 30 s; not a speed assertion
	if !strings.Contains(stdout.String()+stderr.String(), "interrupted") {
		t.Errorf("no word of the interruption:\n%s\n%s", stdout.String(), stderr.String())
	}
}
