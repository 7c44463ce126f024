package projector

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing off (the global provider unset, or a no-op one), or the event's
// span not sampled, its handling gets no store clock and no recording span:
// the store's calls time nothing. With a recording provider it gets both.
func TestTraced_makes_a_store_clock_only_while_a_span_records(t *testing.T) {
	ev := Event{StreamID: "s-1", StreamRevision: 0}
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer never.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	for name, c := range map[string]struct {
		provider trace.TracerProvider
		clock    bool
	}{
		"global unset":  {nil, false},
		"no-op":         {noop.NewTracerProvider(), false},
		"never sampled": {never, false},
		"recording":     {tp, true},
	} {
		e := &Engine{core: &core{tracerProvider: c.provider}}
		e.tracer = tracerOf(e.tracerProvider)
		var clock *storeClock
		var recording bool
		e.traced(context.Background(), target{}, ev, func(ctx context.Context, te *Engine) Result {
			clock, recording = te.docs().clock, trace.SpanFromContext(ctx).IsRecording()
			return Result{}
		})
		if (clock != nil) != c.clock || recording != c.clock {
			t.Errorf("%s: clock %v, recording %v; want both %v", name, clock != nil, recording, c.clock)
		}
	}
}
