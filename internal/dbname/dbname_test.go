package dbname

import (
	"regexp"
	"strings"
	"testing"
)

// Every name is one MongoDB takes (letters, digits and underscores, under
// 64 bytes), apart from every other, whatever the test's name holds.
func TestForTest_names_a_server_takes_apart_from_each_other(t *testing.T) {
	valid := regexp.MustCompile(`^t[0-9]+_[0-9]+_[a-z0-9_]*$`)
	seen := map[string]bool{}
	for _, test := range []string{
		"TestX", "TestX/sub#01", "TestX/sub#01", "TestX/v1.2", "TestX/a b$c\"d\\e", "TestX/" + strings.Repeat("Long", 30), "",
	} {
		name := ForTest(test)
		if !valid.MatchString(name) || len(name) >= 64 || seen[name] {
			t.Errorf("ForTest(%q) = %q: want a name of letters, digits and underscores under 64 bytes, unlike the others", test, name)
		}
		seen[name] = true
	}
}
