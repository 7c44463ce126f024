package projector

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing off (the global provider unset, or a no-op one), or the event's
// span not sampled, its handling gets no store clock and no recording span:
// the store's calls time nothing.
// With a recording provider it gets both.
func TestStartEvent_makes_a_store_clock_only_while_a_span_records(t *testing.T) {
	ev := Event{StreamID: "s-1", StreamRevision: 0}
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer never.Shutdown(context.Background())
	for name, e := range map[string]*Engine{
		"global unset":  {},
		"no-op":         {tracerProvider: noop.NewTracerProvider()},
		"never sampled": {tracerProvider: never},
	} {
		e.tracer = tracerOf(e.tracerProvider)
		ctx := context.Background()
		got, span := e.startEvent(ctx, target{}, ev, time.Time{})
		if clockOf(got) != nil || span.IsRecording() {
			t.Errorf("%s: clock %v, recording %v: want no clock, no span", name, clockOf(got), span.IsRecording())
		}
		span.End()
	}
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	e := &Engine{tracerProvider: tp}
	e.tracer = tracerOf(tp)
	got, span := e.startEvent(context.Background(), target{}, ev, time.Time{})
	defer span.End()
	if clockOf(got) == nil || !span.IsRecording() {
		t.Errorf("tracing on: clock %v, recording %v; want both", clockOf(got), span.IsRecording())
	}
}
