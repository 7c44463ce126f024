package cart

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing of the write side: each command is a span, cart.command (a
// producer span, child of the span of the command's context), and the
// events it appends carry that span's context in their metadata, so that the
// projector's spans for them continue the trace (see
// [projector.MetadataContext]).

const tracerName = "github.com/revgate/projector/internal/cart"

// Attributes of the cart.command span.
const (
	attrCommand   = attribute.Key("cart.command")
	attrCartID    = attribute.Key("cart.id")
	attrRequestID = attribute.Key("cart.request_id")
	attrAppended  = attribute.Key("cart.appended")
	attrDuplicate = attribute.Key("cart.duplicate")
	attrRevision  = attribute.Key("cart.revision")
)

type handlerConfig struct{ tp trace.TracerProvider }

func (c handlerConfig) tracer() trace.Tracer {
	tp := c.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// WithTracerProvider sets where the handler's spans go (default: the global
// provider, which records nothing until a program sets one).
func WithTracerProvider(tp trace.TracerProvider) HandlerOption {
	return func(c *handlerConfig) { c.tp = tp }
}

// Handle reads the cart, decides cmd against it and appends the events with
// the expected revision. A request already in the stream (a retry) appends
// nothing and reports Duplicate; a concurrent change is read again and the
// command decided anew, a few times.
//
// The command is a span, cart.command, child of the span of ctx; when it
// has a valid trace context (ctx has a span, or the handler's provider
// records), the events appended carry it in their metadata, beside the
// client and the request: traceparent and tracestate (W3C), and $traceId and
// $spanId (the Kurrent clients' convention).
func (h *Handler) Handle(ctx context.Context, cmd Command) (Result, error) {
	name := strings.TrimPrefix(fmt.Sprintf("%T", cmd), "cart.")
	ctx, span := h.tracer.Start(ctx, "cart.command", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrCommand.String(name), attrCartID.String(cmd.cartID()), attrRequestID.String(cmd.requestID())))
	defer span.End()
	r, err := h.handle(ctx, cmd)
	if span.IsRecording() {
		span.SetAttributes(attrAppended.Int(r.Appended), attrDuplicate.Bool(r.Duplicate), attrRevision.Int64(r.Revision))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	return r, err
}

// withTrace adds the trace context of ctx, when it has a valid one, to m.
func withTrace(ctx context.Context, m Metadata) Metadata {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return m
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	m.TraceParent, m.TraceState = carrier.Get("traceparent"), carrier.Get("tracestate")
	m.TraceID, m.SpanID = sc.TraceID().String(), sc.SpanID().String()
	return m
}
