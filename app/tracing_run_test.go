package app_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/revgate/projector/app"
)

// A bad OTEL_* value stops any command with one line and exit status 2;
// with a console exporter, the spans a command makes through the global
// provider are flushed when it ends.
func TestRun_tracing_is_set_up_from_OTEL_variables_and_flushed_at_exit(t *testing.T) {
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	code, _, stderr := run(c, map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "version")
	if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, `OTEL_TRACES_EXPORTER "zipkin"`) {
		t.Fatalf("a bad exporter: exit %d, %q; want 2 and one line", code, stderr)
	}
	c.Commands = []app.Command{{Name: "traced", Run: func(ctx context.Context, inv app.Invocation) error {
		_, span := otel.Tracer("test").Start(ctx, "the-command's-span")
		span.End()
		return nil
	}}}
	code, _, stderr = run(c, map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "traced-test"}, "traced")
	if code != 0 || !strings.Contains(stderr, `"Name":"the-command's-span"`) {
		t.Fatalf("console exporter: exit %d, stderr %q; want the span, flushed at exit", code, stderr)
	}
	code, _, stderr = run(c, map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, "traced")
	if code != 0 || strings.Contains(stderr, "the-command's-span") {
		t.Fatalf("disabled: exit %d, stderr %q; want no span", code, stderr)
	}
}
