package cart_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
)

// metadataOf reads the metadata of every event of stream, as JSON objects.
func metadataOf(t *testing.T, cl *kurrentdb.Client, stream string) []map[string]string {
	t.Helper()
	rs, err := cl.ReadStream(context.Background(), stream, kurrentdb.ReadStreamOptions{From: kurrentdb.Start{}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []map[string]string
	for {
		re, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		if err := json.Unmarshal(re.OriginalEvent().UserMetadata, &m); err != nil {
			t.Fatalf("metadata %s: %v", re.OriginalEvent().UserMetadata, err)
		}
		out = append(out, m)
	}
}

// The write side puts the command's trace context into the metadata of the
// events it appends, beside the client and the request: traceparent (W3C)
// and $traceId/$spanId (the Kurrent clients'), naming the command's span, a
// child of the caller's. (Both adapters append metadata as given: the
// acceptance suite of internal/sourcetest checks it on each.)
func TestHandle_puts_the_command_s_trace_context_into_the_events_metadata(t *testing.T) {
	server := esdbtest.New(t)
	store := cart.NewStore(kurrentClient(t, server))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := cart.NewHandler(store, nil, cart.WithTracerProvider(tp))
	ctx, request := tp.Tracer("test").Start(context.Background(), "request")
	if _, err := h.Handle(ctx, cart.OpenCart{RequestID: "r1", CartID: "t1", ClientID: "x"}); err != nil {
		t.Fatal(err)
	}
	request.End()
	metas := metadataOf(t, server.Client(t), cart.StreamID("t1"))
	var commands []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "cart.command" {
			commands = append(commands, s)
		}
	}
	if len(metas) != 1 || len(commands) != 1 {
		t.Fatalf("%d events, %d command spans", len(metas), len(commands))
	}
	m, cmd := metas[0], commands[0].SpanContext()
	if commands[0].Parent().SpanID() != request.SpanContext().SpanID() {
		t.Errorf("the command's span is not a child of the request's")
	}
	want := map[string]string{
		"clientId": "x", "requestId": "r1",
		"traceparent": "00-" + cmd.TraceID().String() + "-" + cmd.SpanID().String() + "-01",
		"$traceId":    request.SpanContext().TraceID().String(), "$spanId": cmd.SpanID().String(),
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("metadata %s = %q, want %q (all: %v)", k, m[k], v, m)
		}
	}
}
