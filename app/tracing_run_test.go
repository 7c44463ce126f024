package app_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
	// The program's own provider is its again after the command.
	mine := sdktrace.NewTracerProvider()
	defer mine.Shutdown(context.Background())
	before := otel.GetTracerProvider()
	otel.SetTracerProvider(mine)
	defer otel.SetTracerProvider(before)
	code, _, stderr = run(c, map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "traced-test"}, "traced")
	if code != 0 || !strings.Contains(stderr, `"Name":"the-command's-span"`) {
		t.Fatalf("console exporter: exit %d, stderr %q; want the span, flushed at exit", code, stderr)
	}
	if got := otel.GetTracerProvider(); got != mine {
		t.Fatalf("after the command, the global tracer provider is %T %p, not the program's own %p", got, got, mine)
	}
	code, _, stderr = run(c, map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, "traced")
	if code != 0 || strings.Contains(stderr, "the-command's-span") {
		t.Fatalf("disabled: exit %d, stderr %q; want no span", code, stderr)
	}
}
