package app

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/revgate/projector/internal/lockedbuf"
)

// With an OTLP collector that does not answer, the exporter's errors are
// said through the command's logger, in its format: with --log-format
// json every line of stderr stays JSON.
func TestTracing_errors_of_the_exporter_are_lines_of_the_commands_log(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nobody listens there
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + closed, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
	for k, v := range env {
		t.Setenv(k, v) // the exporter reads the process's environment
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var stderr lockedbuf.Buffer
	code := withTracing(context.Background(), lookup, "tickets", &stderr, func() int {
		if _, err := newLogger(&stderr, "json", "info"); err != nil {
			t.Error(err)
			return 1
		}
		_, span := otel.Tracer("test").Start(context.Background(), "a-span")
		span.End()
		return 0
	})
	out := strings.TrimSpace(stderr.String())
	if code != 0 || !strings.Contains(out, "spans not exported") {
		t.Fatalf("exit %d; want 0 and the exporter's error logged:\n%s", code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("a line of stderr is not JSON: %q", line)
		}
	}
}
