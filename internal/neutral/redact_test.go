package neutral

import (
	"strings"
	"testing"
)

func TestRedact_hides_the_password_of_any_connection_string(t *testing.T) {
	for in, want := range map[string]string{
		"esdb://admin:hunter2@localhost:2113?tls=false":            "esdb://admin:xxxxx@localhost:2113?tls=false",
		"mongodb://demo:hunter2@127.0.0.1:27017/?authSource=admin": "mongodb://demo:xxxxx@127.0.0.1:27017/?authSource=admin",
		"mongodb+srv://u:hunter2@cluster0.example.net/db":          "mongodb+srv://u:xxxxx@cluster0.example.net/db",
		"mongodb://127.0.0.1:27017/":                               "mongodb://127.0.0.1:27017/",
		"esdb://u:hun%20ter2@h1:2113,h2:2113?tls=false":            "esdb://u:xxxxx@h1:2113,h2:2113?tls=false",
	} {
		if got := Redact(in); got != want || strings.Contains(got, "hunter2") || strings.Contains(got, "hun%20ter2") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
