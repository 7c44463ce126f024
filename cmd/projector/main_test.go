package main_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The binary users deploy links neither the testing package nor the
// EventStoreDB-protocol test server (the demo and the benchmark, which
// need them, are cmd/projector-lab's).
func TestDeployed_binary_links_no_test_code(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, p := range []string{"testing", "github.com/revgate/projector/esdbtest", "github.com/revgate/projector/projectortest"} {
		if slices.Contains(deps, p) {
			t.Errorf("cmd/projector links %s", p)
		}
	}
	if !slices.Contains(deps, "github.com/revgate/projector/app") {
		t.Fatalf("go list -deps does not list app: %q", out)
	}
}

// listDeps returns the packages pkg links (go list -deps, tests excluded).
func listDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// linked returns the packages of deps that are prefix or under it.
func linked(deps []string, prefix string) []string {
	var out []string
	for _, d := range deps {
		if d == prefix || strings.HasPrefix(d, prefix+"/") {
			out = append(out, d)
		}
	}
	return out
}

// The two official clients register the same protobuf names, so a binary
// that links both panics as it starts unless built with the registry's
// conflict policy set (see package esdbv4). No binary of this repository
// but the v4 adapter's tests links both: each links the adapter it names in
// app.Config.Dial, as database/sql drivers are linked, and nothing sets the
// policy behind its back. The deployed binary, the lab, and what a user's
// test imports (the test double and e2e) link KurrentDB-Client-Go only; app
// links no adapter at all.
func TestBinaries_link_one_official_client_and_app_links_none(t *testing.T) {
	const v4, kurrentdb = "github.com/EventStore/EventStore-Client-Go", "github.com/kurrent-io/KurrentDB-Client-Go"
	for _, pkg := range []string{".", "../projector-lab", "../../projectortest/e2e", "../../esdbtest"} {
		deps := listDeps(t, pkg)
		if got := linked(deps, v4); len(got) > 0 {
			t.Errorf("%s links EventStore-Client-Go: %v", pkg, got)
		}
		if got := linked(deps, "github.com/revgate/projector/internal/neutral/coexist"); len(got) > 0 {
			t.Errorf("%s links %v, which sets an environment variable as it initializes", pkg, got)
		}
		if len(linked(deps, kurrentdb)) == 0 {
			t.Errorf("%s does not link KurrentDB-Client-Go: go list -deps shows not what it is made of", pkg)
		}
	}
	deps := listDeps(t, "../../app")
	for _, adapter := range []string{"github.com/revgate/projector/kurrent", "github.com/revgate/projector/subscription/esdbv4", v4, kurrentdb} {
		if got := linked(deps, adapter); len(got) > 0 {
			t.Errorf("app links %v: the binary's Config.Dial picks the adapter, app imports none", got)
		}
	}
	if !slices.Contains(deps, "github.com/revgate/projector/subscription") {
		t.Errorf("go list -deps of app does not list subscription, whose Client app dials:\n%s", strings.Join(deps, "\n"))
	}
}

// Of the test binaries, only two link both clients: subscription/esdbv4's
// (it runs v4 against esdbtest, which is built on KurrentDB-Client-Go's
// protocol code) and internal/official's (it checks the adapter against
// both clients' types); the Makefile links the tests with the protobuf
// registry's conflict policy set for them. Any other test binary that came
// to link both would hide behind that flag: this says which one did.
func TestTests_only_the_adapters_tests_link_both_clients(t *testing.T) {
	out, err := exec.Command("go", "list", "-test", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list -test: %v", err)
	}
	var both []string
	for line := range strings.Lines(string(out)) {
		deps := strings.Fields(line)
		if len(deps) == 0 || !strings.HasSuffix(deps[0], ".test") {
			continue
		}
		if len(linked(deps, "github.com/EventStore/EventStore-Client-Go/v4")) > 0 && len(linked(deps, "github.com/kurrent-io/KurrentDB-Client-Go")) > 0 {
			both = append(both, deps[0])
		}
	}
	slices.Sort(both)
	if want := []string{"github.com/revgate/projector/internal/official.test", "github.com/revgate/projector/subscription/esdbv4.test"}; !slices.Equal(both, want) {
		t.Fatalf("test binaries linking both clients: %v, want %v", both, want)
	}
}

func TestVersion_and_the_commands(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "projector")
	if b, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "projector ") {
		t.Fatalf("version: %v %q", err, out)
	}
	usage, _ := exec.Command(bin).CombinedOutput()
	for _, cmd := range []string{"run", "status", "rebuild", "replay-parked"} {
		if !strings.Contains(string(usage), cmd) {
			t.Errorf("usage does not list %s:\n%s", cmd, usage)
		}
	}
	// Its demo is cmd/projector-lab's, run from a clone (see TestDemo_…).
	if !strings.Contains(string(usage), "demo          from a clone: run cmd/projector-lab's demo") {
		t.Errorf("the deployed binary does not say where its demo runs:\n%s", usage)
	}
	// A misspelled variable is named, with the one meant: without it, the
	// binary would go on against its embedded server, as without --mongo
	// (it reads its environment itself). Its event store does not answer.
	status := exec.Command(bin, "status", "--esdb", "esdb://127.0.0.1:1?tls=false")
	status.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PROJECTOR_") })
	status.Env = append(status.Env, "PROJECTOR_MONGO_URI=mongodb://127.0.0.1:1")
	out, err = status.CombinedOutput()
	if want := "projector status: PROJECTOR_MONGO_URI is set, but no flag reads it: ignored (did you mean PROJECTOR_MONGO, for --mongo?)\n"; err == nil ||
		!strings.HasPrefix(string(out), want) {
		t.Errorf("status with PROJECTOR_MONGO_URI: %v, %s; want it to start with the line %q", err, out, want)
	}
}

// go run ./cmd/projector demo, the README's first command, runs
// cmd/projector-lab's demo from a clone; elsewhere the binary,
// which links no test server, says in one line where the demo runs.
func TestDemo_runs_the_labs_demo_from_a_clone_and_says_where_elsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: go run compiles cmd/projector-lab")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	run := exec.Command("go", "run", "./cmd/projector", "demo", "--carts", "4", "--events", "5", "--data-dir", t.TempDir())
	run.Dir = root
	// Built as the tests are (make test: -race), from the packages they
	// compiled; GOFLAGS reaches the go run the demo starts too.
	if raceEnabled {
		run.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -race"))
	}
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "every document is right") {
		t.Fatalf("go run ./cmd/projector demo: %v\n%s", err, out)
	}
	bin := filepath.Join(t.TempDir(), "projector")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	elsewhere := exec.Command(bin, "demo")
	elsewhere.Dir = t.TempDir()
	out, err = elsewhere.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "projector demo runs from a clone of the repository") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("projector demo outside a clone: %v\n%s", err, out)
	}
}

// buildProjector builds cmd/projector into a temporary directory, as the
// tests are built, and returns it with the clone's root.
func buildProjector(t *testing.T) (bin, root string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(t.TempDir(), "projector")
	build := exec.Command("go", "build", "-o", bin, ".")
	if raceEnabled {
		build.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -race"))
	}
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin, root
}

// SIGTERM to projector demo (kill, a supervisor) stops the demo as it
// stops run: exit status 0, and nothing of it left running. Before, the
// demo ran under go run, which died of the signal without passing it on:
// projector-lab (with --hold, its servers) ran on, orphaned, and projector
// exited 255.
func TestDemo_stops_on_SIGTERM_and_leaves_nothing_running(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo builds cmd/projector-lab")
	}
	bin, root := buildProjector(t)
	cmd := exec.Command(bin, "demo", "--carts", "2", "--events", "2", "--hold", "--data-dir", t.TempDir())
	cmd.Dir = filepath.Join(root, "docs") // below the clone's root
	if raceEnabled {
		cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -race"))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	held := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "holding the servers up") {
				close(held)
			}
		}
	}()
	select {
	case <-held:
	case <-time.After(3 * time.Minute):
		t.Fatal("the demo did not reach --hold")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("stopped by SIGTERM, projector demo: %v, want exit status 0, as run", err)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(-pgid, 0) == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			ps, _ := exec.Command("ps", "-eo", "pid,ppid,pgid,cmd").CombinedOutput()
			t.Fatalf("10 s after projector demo exited on SIGTERM, its process group %d still runs:\n%s", pgid, ps)
		}
	}
}

// A bad flag of the demo is a usage error: exit status 2, as for every
// other command and for projector-lab demo itself. Before, go run made it
// 1, with two more lines.
func TestDemo_a_bad_flag_exits_2(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo builds cmd/projector-lab")
	}
	bin, root := buildProjector(t)
	cmd := exec.Command(bin, "demo", "--bogus")
	cmd.Dir = root
	if raceEnabled {
		cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -race"))
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || strings.Contains(string(out), "exit status") {
		t.Errorf("projector demo --bogus: %v, want exit status 2 and the demo's own words\n%s", err, out)
	}
}
