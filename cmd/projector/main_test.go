package main_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	if strings.Contains(string(usage), "demo") {
		t.Errorf("the deployed binary lists the demo:\n%s", usage)
	}
}
