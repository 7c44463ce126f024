package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The alert rules do what deploy/prometheus/alerts_test.yml says, on the
// series that processes of one projection export: promtool evaluates them.
// promtool compares every annotation whole, so the rules run from a copy
// whose annotations are their summaries only (the descriptions are prose).
func TestAlertRules_pass_their_promtool_tests(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian's prometheus package has it; .ci/run installs it): the alert rules' unit tests do not run")
	}
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string           `yaml:"name"`
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if a, ok := r["annotations"].(map[string]any); ok {
				r["annotations"] = map[string]any{"summary": a["summary"]}
			}
		}
	}
	summaries, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests, err := os.ReadFile(filepath.Join(filepath.Dir(alertsFile), "alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"alerts.yml": summaries, "alerts_test.yml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(promtool, "test", "rules", filepath.Join(dir, "alerts_test.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
