package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/revgate/projector/internal/cart"
)

// benchTracer is A's tracer provider: with traced, the SDK sampling every
// span, with the batch span processor of a production set-up and an
// exporter that counts the spans and drops them (the cost of making,
// queueing and exporting spans is counted, not the network's); without, a
// provider that records nothing, whatever OTEL_* says. flush exports what is
// queued; spans says how many were exported.
func benchTracer(traced bool) (tp trace.TracerProvider, flush func(context.Context) error, spans func() uint64) {
	if !traced {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, func() uint64 { return 0 }
	}
	exp := &discardExporter{}
	// A queue that holds every span of the run: none dropped, each paid for.
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(1<<17)))
	return sdk, sdk.ForceFlush, exp.spans.Load
}

// discardExporter counts the spans exported to it and drops them.
type discardExporter struct{ spans atomic.Uint64 }

func (d *discardExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	d.spans.Add(uint64(len(spans)))
	return nil
}

func (d *discardExporter) Shutdown(context.Context) error { return nil }

// benchTraceOverhead runs A rounds times with tracing off and on, in turns
// (off first in even rounds, on first in odd ones), each on a fresh
// database, and prints every time, the medians and their ratio: single runs
// of A vary too much to compare one with one.
func benchTraceOverhead(ctx context.Context, stdout, stderr io.Writer, esdbURI, mongoURI string, client *mongo.Client, tune catchUpSettings, rounds int) error {
	times, cpu := map[bool][]time.Duration{}, map[bool][]time.Duration{}
	var spans uint64
	for i := range rounds {
		for _, traced := range [2]bool{i%2 == 1, i%2 == 0} {
			db := benchDB(client, "bench_trace")
			t := tune
			t.traced = traced
			rep, err := benchChild(ctx, esdbURI, mongoURI, db.Name(), t, "", "")
			if err != nil {
				return fmt.Errorf("tracing %s, round %d: %w", onOff(traced), i+1, err)
			}
			times[traced] = append(times[traced], rep.took)
			cpu[traced] = append(cpu[traced], rep.cpu)
			if traced {
				spans = max(spans, rep.spans)
			}
			fmt.Fprintf(stderr, "  A, tracing %s (round %d): %v, %d spans\n", onOff(traced), i+1, rep.took.Round(time.Millisecond), rep.spans)
		}
	}
	off, on := median(times[false]), median(times[true])
	fmt.Fprintf(stdout, "  tracing overhead, A %d times each way, in turns: off %v, on (100%% sampled, batch processor, discarding exporter, %d spans) %v (medians); on/off = %.3f\n",
		rounds, off.Round(time.Millisecond), spans, on.Round(time.Millisecond), on.Seconds()/off.Seconds())
	fmt.Fprintf(stdout, "    off: %v\n    on:  %v\n", roundAll(times[false]), roundAll(times[true]))
	// The CPU time of A's whole process (start-up and connections too, the
	// same both ways) varies less than A's time with what else the machine
	// runs.
	cpuOff, cpuOn := median(cpu[false]), median(cpu[true])
	fmt.Fprintf(stdout, "  CPU time of A's process (medians): off %v, on %v; on/off = %.3f\n", cpuOff.Round(time.Millisecond), cpuOn.Round(time.Millisecond), cpuOn.Seconds()/cpuOff.Seconds())
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// tracedMetadata is the metadata the cart write side gives an event of a
// cart of client appended in a traced request: the client, and a trace context (a
// random trace and span, sampled) in both conventions.
func tracedMetadata(r *rand.Rand, client string) []byte {
	var tid trace.TraceID
	var sid trace.SpanID
	for i := range tid {
		tid[i] = byte(r.UintN(256))
	}
	for i := range sid {
		sid[i] = byte(r.UintN(256))
	}
	m, _ := json.Marshal(cart.Metadata{ClientID: client, TraceParent: "00-" + tid.String() + "-" + sid.String() + "-01",
		TraceID: tid.String(), SpanID: sid.String()})
	return m
}
