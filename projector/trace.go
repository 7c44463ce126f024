package projector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/revgate/projector/retry"
)

// Tracing. The engine emits OpenTelemetry spans through the API only: the
// provider is the global one ([otel.GetTracerProvider]) unless
// [WithTracerProvider] gives one. The global one records nothing until a
// program sets it, and while it is unset (or the provider given is a no-op)
// the engine starts no span and reads no trace context: tracing off costs
// nothing measurable (storetime.go looks up the context at each store call).
// The spans, with their attributes (the names below, in one place):
//
//   - projector.event: one per event and projection that handled it (a
//     consumer span; in a large batch, one per document: below). Its
//     parent is the trace context in the event's metadata
//     ([MetadataContext]) when there is one, and the caller's span
//     (a batch's) is then a link; otherwise its parent is the caller's span,
//     or none. Each wait of the gate is a span event projector.wait on it
//     (attempt, delay, reason), and a wait in the engine's queue behind an
//     earlier event of the same document is an event projector.queued. An
//     event that failed, was skipped or parked has its error recorded and
//     the status Error. projector.store.time_ms is the time its handling
//     spent in the document store (storetime.go).
//   - projector.batch: one per [Engine.HandleBatch]; its children
//     projector.batch.read (the one query that reads the batch's documents
//     of a projection) and projector.batch.write (the one bulk write) time
//     the store (a versioned document, a summary, has a read and a write of
//     its own). The stream reads of a batch's folds (each document's stream,
//     forward from the batch's last event of it) are one span,
//     projector.fold.read (projection, projector.fold.streams,
//     projector.fold.events: the events the folds applied ahead,
//     projector.fold.failed), with a span event projector.fold.failed
//     (stream, projector.fold.from, projector.fold.error) per failed read.
//     The events a batch folds in memory get spans when their metadata
//     carries a trace context: in a batch of at most [WithEventSpans]
//     events, a projector.event span each, a child of that context linked
//     to the batch; in a larger one, one projector.event span a document,
//     the last traced event's, with projector.events counting the events it
//     covers and the other traced ones as links (traceDocument). A
//     document whose stream fold applied traced events ahead gets one span
//     for all (those events are links, or its parent); when the catch-up
//     delivers them later, it passes over them without a span, and a span
//     event projector.passed on that batch counts them. Folded events
//     without a trace context get no span of their own (it would say no
//     more than the batch's, and a rebuild of millions of events would make
//     millions of spans): a span event projector.folded on the batch counts
//     those no span covers, per projection. Events a batch sends through
//     the gate get their spans there, all of them.
const tracerName = "github.com/revgate/projector/projector"

// Span and span event names.
const (
	spanEvent       = "projector.event"
	spanBatch       = "projector.batch"
	spanBatchRead   = "projector.batch.read"
	spanBatchWrite  = "projector.batch.write"
	spanFoldRead    = "projector.fold.read"
	eventWait       = "projector.wait"
	eventQueued     = "projector.queued"
	eventFolded     = "projector.folded"
	eventPassed     = "projector.passed"
	eventFoldFailed = "projector.fold.failed"
)

// Attribute keys, all under projector.; the OpenTelemetry messaging
// conventions (messaging.message.id, messaging.destination.name) would only
// repeat projector.event.id and projector.stream, at a cost per span.
const (
	attrProjection  = attribute.Key("projector.projection")
	attrCollection  = attribute.Key("projector.collection")
	attrDocument    = attribute.Key("projector.document")
	attrStream      = attribute.Key("projector.stream")
	attrRevision    = attribute.Key("projector.revision")
	attrPosition    = attribute.Key("projector.position")
	attrEventID     = attribute.Key("projector.event.id")
	attrEventType   = attribute.Key("projector.event.type")
	attrOutcome     = attribute.Key("projector.outcome")
	attrWaits       = attribute.Key("projector.waits")
	attrAttempts    = attribute.Key("projector.attempts")
	attrBatchEvents = attribute.Key("projector.batch.events")
	attrDocuments   = attribute.Key("projector.batch.documents")
	attrMissed      = attribute.Key("projector.batch.missed")
	attrFolded      = attribute.Key("projector.batch.folded")
	attrPassed      = attribute.Key("projector.batch.passed")
	attrFoldStreams = attribute.Key("projector.fold.streams")
	attrFoldEvents  = attribute.Key("projector.fold.events")
	attrFoldFailed  = attribute.Key("projector.fold.failed")
	attrFoldFrom    = attribute.Key("projector.fold.from")
	attrFoldError   = attribute.Key("projector.fold.error")
	attrWaitAttempt = attribute.Key("projector.wait.attempt")
	attrWaitDelay   = attribute.Key("projector.wait.delay_ms")
	attrWaitReason  = attribute.Key("projector.wait.reason")
	attrStoreTime   = attribute.Key("projector.store.time_ms")
	attrEvents      = attribute.Key("projector.events")
)

// WithTracerProvider sets where the engine's spans go (default: the global
// provider, [otel.GetTracerProvider], which records nothing until a program
// sets one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(e *Engine) { e.tracerProvider = tp }
}

// maxEventLinks bounds the links of a document's span to its other traced
// events: with the batch's, the SDK's default of 128 a span.
const maxEventLinks = 127

// DefaultEventSpans is the largest batch in which each traced event gets a
// span of its own (see [WithEventSpans]).
const DefaultEventSpans = 64

// WithEventSpans sets the largest batch (default [DefaultEventSpans]) in
// which each event whose metadata carries a trace context gets a
// projector.event span of its own, in that trace. In a larger batch (a
// catch-up, a rebuild, a burst that queued) each document gets one span for
// its events instead: the last traced event's (a child of its context,
// with its attributes), with projector.events counting the events it covers
// and the other traced events as links. In a catch-up a span an event
// costs about a fifth of the rest of its handling; one a document keeps
// tracing within a tenth (docs/benchmarks.md). Events handled one at a
// time, at the head and through the gate, always get their own span. 0:
// one span a document in every batch; a large number: one span an event
// whatever the batch.
func WithEventSpans(n int) Option { return func(e *Engine) { e.eventSpans = n } }

// tracerOf returns the engine's tracer, from tp or the global provider.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// unsetGlobal is the global tracer provider as it is before a program sets
// one: it records nothing.
var unsetGlobal = otel.GetTracerProvider()

// tracing reports whether the engine's spans can record: false with the
// global provider while no program has set one, and with a no-op provider.
// When false, the engine starts no span at all and does not read the
// metadata's trace context: tracing off costs nothing measurable (a context
// lookup per store call, beside a round trip to the store).
func (e *core) tracing() bool {
	switch tp := e.tracerProvider.(type) {
	case nil:
		return otel.GetTracerProvider() != unsetGlobal
	case noop.TracerProvider, *noop.TracerProvider:
		return false
	default:
		return tp != nil
	}
}

// off is the span of what is not traced.
var off = trace.SpanFromContext(context.Background())

// Keys of the trace context in an event's metadata (a JSON object, see [MetadataContext]). The W3C
// ones are those of the traceparent and tracestate headers. The others are
// the convention of the Kurrent (EventStoreDB) clients: the .NET client
// writes the trace id and the span id of the appending activity, as
// lowercase hex (32 and 16 digits, what ActivityTraceId/ActivitySpanId's
// ToString gives), under "$traceId" and "$spanId", beside the metadata's
// other keys, and reads them back as a remote parent: see
// kurrent-io/KurrentDB-Client-Dotnet, src/KurrentDB.Client/Core/Common/
// Diagnostics/EventMetadataExtensions.cs (InjectTracingContext,
// ExtractTracingMetadata), and TracingConstants.Metadata in
// EventStore/EventStore-Client-Dotnet.
const (
	metaTraceParent = "traceparent"
	metaTraceState  = "tracestate"
	metaTraceID     = "$traceId"
	metaSpanID      = "$spanId"
)

// traceMeta is what the engine reads of an event's metadata for tracing.
type traceMeta struct {
	TraceParent string `json:"traceparent"`
	TraceState  string `json:"tracestate"`
	TraceID     string `json:"$traceId"`
	SpanID      string `json:"$spanId"`
}

// MetadataContext returns the trace context an event's metadata carries: the
// W3C traceparent (with its tracestate) when it is there and valid, else the
// Kurrent clients' $traceId and $spanId, as a remote span context. Metadata
// that has neither gives an invalid span context (the event starts a trace
// of its own); it is never an error.
//
// A span per event must cost little: the keys are found by a scan of the
// metadata that allocates nothing, as writers put them (a key exactly so
// spelt, its value a plain string); a value with escapes, or a key in
// another shape, sends the metadata to the JSON decoder instead. The scan
// takes a key's first occurrence, at any depth, and does not check that the
// rest is JSON; the decoder takes the top-level key, the last when it
// repeats, and matches its spelling without regard to case. Writers put
// the keys once, at the top level, where both agree.
func MetadataContext(metadata []byte) trace.SpanContext {
	tp, ok := scanTraceKey(metadata, metaTraceParent)
	if !ok {
		return metadataContextJSON(metadata)
	}
	if tp != nil {
		ts, ok := scanTraceKey(metadata, metaTraceState)
		if !ok {
			return metadataContextJSON(metadata)
		}
		if sc, ok := parseTraceParent(tp, ts); ok {
			return sc
		}
	}
	// The Kurrent keys are read only without a valid traceparent.
	tid, ok1 := scanTraceKey(metadata, metaTraceID)
	sid, ok2 := scanTraceKey(metadata, metaSpanID)
	if !ok1 || !ok2 {
		return metadataContextJSON(metadata)
	}
	return kurrentContext(tid, sid)
}

// metadataContextJSON is MetadataContext by the JSON decoder, for metadata
// the scan does not read.
func metadataContextJSON(metadata []byte) trace.SpanContext {
	var m traceMeta
	if json.Unmarshal(metadata, &m) != nil {
		return trace.SpanContext{}
	}
	if sc, ok := parseTraceParent([]byte(m.TraceParent), []byte(m.TraceState)); ok {
		return sc
	}
	return kurrentContext([]byte(m.TraceID), []byte(m.SpanID))
}

// kurrentContext is the span context of the Kurrent clients' $traceId and
// $spanId.
func kurrentContext(traceID, spanID []byte) trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	if !lowerHex(tid[:], traceID) || !lowerHex(sid[:], spanID) {
		return trace.SpanContext{}
	}
	// The convention carries no flags: the span is taken as sampled, as the
	// .NET client's reading of it (an ActivityContext recorded) does.
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	if !sc.IsValid() {
		return trace.SpanContext{}
	}
	return sc
}

// scanTraceKey finds key in an event's metadata, without decoding the rest
// of it, and returns its value: a slice of b, nil when the key is not
// there. The value must be a plain string (no escapes), as writers put it;
// ok is false when the key is there in another shape (the metadata is
// decoded as JSON then).
func scanTraceKey(b []byte, key string) (value []byte, ok bool) {
	// The key is looked for without its quotes: a quote is the commonest
	// byte of JSON, and a search led by one slows down.
	for from := 0; ; {
		i := bytes.Index(b[from:], []byte(key))
		if i < 0 {
			return nil, true
		}
		i += from
		from = i + len(key)
		if i == 0 || b[i-1] != '"' || from >= len(b) || b[from] != '"' {
			continue // a longer word, or a part of one
		}
		rest := bytes.TrimLeft(b[from+1:], " \t\r\n")
		if len(rest) > 0 && (rest[0] == ',' || rest[0] == ']' || rest[0] == '}') {
			continue // the key's name as a value
		}
		if len(rest) == 0 || rest[0] != ':' {
			return nil, false
		}
		rest = bytes.TrimLeft(rest[1:], " \t\r\n")
		if len(rest) == 0 || rest[0] != '"' {
			return nil, false
		}
		end := bytes.IndexByte(rest[1:], '"')
		if end < 0 || bytes.IndexByte(rest[1:1+end], '\\') >= 0 {
			return nil, false
		}
		return rest[1 : 1+end], true
	}
}

// parseTraceParent reads a W3C traceparent ("00-<trace id>-<span id>-<flags>",
// lowercase hex) and its tracestate as a remote span context. Of the flags
// it keeps the sampled one only (the SDK's W3C propagator also keeps the
// random one, and refuses flags above 3 under version 00).
func parseTraceParent(tp, ts []byte) (trace.SpanContext, bool) {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || len(tp) > 55 && tp[55] != '-' {
		return trace.SpanContext{}, false
	}
	var version, flags [1]byte
	var tid trace.TraceID
	var sid trace.SpanID
	if !lowerHex(version[:], tp[:2]) || version[0] == 0xff || version[0] == 0 && len(tp) != 55 ||
		!lowerHex(tid[:], tp[3:35]) || !lowerHex(sid[:], tp[36:52]) || !lowerHex(flags[:], tp[53:55]) {
		return trace.SpanContext{}, false
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true}
	if len(ts) > 0 {
		if state, err := trace.ParseTraceState(string(ts)); err == nil {
			cfg.TraceState = state
		}
	}
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// lowerHex decodes src, lowercase hex of exactly 2*len(dst) digits, into dst.
func lowerHex(dst, src []byte) bool {
	if len(src) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, lo := hexValue[src[2*i]], hexValue[src[2*i+1]]
		if hi|lo > 0xf {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// hexValue is the value of each lowercase hex digit, 0xff for other bytes.
var hexValue = func() (v [256]byte) {
	for i := range v {
		v[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		v[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		v[c] = c - 'a' + 10
	}
	return v
}()

// startEvent starts the span of ev in document t (t.p nil: before routing).
// start, when not zero, is when the work on it began (a batch's).
func (e *Engine) startEvent(ctx context.Context, t target, ev Event, start time.Time) (context.Context, trace.Span) {
	if !e.tracing() {
		return ctx, off
	}
	return e.startEventIn(ctx, t, ev, start, MetadataContext(ev.Metadata))
}

// startEventIn is startEvent with the trace context of ev's metadata read
// already (remote).
func (e *Engine) startEventIn(ctx context.Context, t target, ev Event, start time.Time, remote trace.SpanContext) (context.Context, trace.Span) {
	parent := ctx
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if remote.IsValid() {
		if caller := trace.SpanContextFromContext(ctx); caller.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller}))
		}
		parent = trace.ContextWithRemoteSpanContext(ctx, remote)
	}
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	return e.tracer.Start(parent, spanEvent, opts...)
}

// endEvent ends the span of an event with its result, and store, the time
// its handling spent in the document store. projector.waits and
// projector.attempts are left out when the event did not wait (0 and 1),
// projector.store.time_ms when store is 0 (an event handled alone that a
// stream fold wrote ahead: its write was an earlier batch's).
func endEvent(span trace.Span, ev Event, r Result, store time.Duration) {
	endEventOf(span, ev, r, store, 1)
}

// endEventOf is endEvent for the span of a document's events in a batch,
// events of them (projector.events, when more than one): ev and r are the
// last's, the one the document shows.
func endEventOf(span trace.Span, ev Event, r Result, store time.Duration, events int) {
	if span.IsRecording() {
		attempts := r.Waits + 1
		var fe *Error
		if errors.As(r.Err, &fe) && fe.Attempts > 0 {
			attempts = fe.Attempts
		}
		// Few attributes, set in one call: each costs at the span's end.
		var attrs [12]attribute.KeyValue
		n := copy(attrs[:], []attribute.KeyValue{attrProjection.String(r.Projection), attrDocument.String(r.Document),
			attrStream.String(ev.StreamID), attrRevision.Int64(int64(ev.StreamRevision)), attrPosition.Int64(int64(ev.Position)),
			attrEventID.String(ev.ID), attrEventType.String(ev.Type), attrOutcome.String(r.Outcome.String())})
		if attempts > 1 || r.Waits > 0 {
			n += copy(attrs[n:], []attribute.KeyValue{attrWaits.Int(r.Waits), attrAttempts.Int(attempts)})
		}
		if store > 0 {
			attrs[n] = attrStoreTime.Float64(float64(store) / float64(time.Millisecond))
			n++
		}
		if events > 1 {
			attrs[n] = attrEvents.Int(events)
			n++
		}
		span.SetAttributes(attrs[:n]...)
		if r.Outcome == Failed || r.Outcome == Skipped || r.Outcome == Parked || r.Outcome == Held {
			if r.Err != nil {
				span.RecordError(r.Err)
				span.SetStatus(codes.Error, r.Err.Error())
			} else {
				span.SetStatus(codes.Error, r.Outcome.String())
			}
		}
	}
	span.End()
}

// traced handles ev in document t within its span: handle gets the span's
// context and the engine to handle it with, whose store calls are timed for
// the span when it records.
func (e *Engine) traced(ctx context.Context, t target, ev Event, handle func(context.Context, *Engine) Result) Result {
	ctx, span := e.startEvent(ctx, t, ev, time.Time{})
	var clock *storeClock
	if span.IsRecording() {
		clock = &storeClock{} // the store's time for this event, on its span
	}
	r := handle(ctx, e.timedBy(clock))
	endEvent(span, ev, r, clock.elapsed())
	return r
}

// tracedResult records the span of a result found without handling (a
// payload that does not decode, an event that cannot be routed).
func (e *Engine) tracedResult(ctx context.Context, t target, ev Event, r Result) Result {
	return e.traced(ctx, t, ev, func(context.Context, *Engine) Result { return r })
}

// traceWait notes a wait of the gate on the span of ctx.
func traceWait(ctx context.Context, a retry.Attempt) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{attrWaitAttempt.Int(a.Number), attrWaitDelay.Float64(float64(a.Delay) / float64(time.Millisecond))}
	if a.Err != nil {
		attrs = append(attrs, attrWaitReason.String(a.Err.Error()))
	}
	span.AddEvent(eventWait, trace.WithAttributes(attrs...))
}

// traceQueued notes, on the span of ctx, that the event waits in the
// engine's queue behind an earlier event of its document.
func (e *Engine) traceQueued(ctx context.Context, tk *ticket) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if pred := e.queue.predecessor(tk); pred != nil {
		span.AddEvent(eventQueued, trace.WithAttributes(attrRevision.Int64(int64(pred.rev))))
	}
}

// startBatch starts the span of a HandleBatch call.
func (e *Engine) startBatch(ctx context.Context, events int) (context.Context, trace.Span) {
	if !e.tracing() {
		return ctx, off
	}
	ctx, span := e.tracer.Start(ctx, spanBatch)
	if span.IsRecording() {
		span.SetAttributes(attrBatchEvents.Int(events))
	}
	return ctx, span
}

// startStore starts the span of a batch's read or write of documents of p.
func (e *core) startStore(ctx context.Context, name string, p Definition, documents int) (context.Context, trace.Span) {
	if !e.tracing() {
		return ctx, off
	}
	ctx, span := e.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attrProjection.String(p.Name()), attrCollection.String(p.Collection()), attrDocuments.Int(documents))
	}
	return ctx, span
}

// startFoldReads starts the span of a batch's stream reads for the folds
// of projection p's documents: one span for them all, as for the batch's
// read and write, not one per document (a rebuild reads a stream per
// document).
func (e *Engine) startFoldReads(ctx context.Context, p Definition, streams int) (context.Context, trace.Span) {
	if !e.tracing() {
		return ctx, off
	}
	ctx, span := e.tracer.Start(ctx, spanFoldRead, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attrProjection.String(p.Name()), attrFoldStreams.Int(streams))
	}
	return ctx, span
}

// endFoldReads ends the span of a batch's stream reads: how many events the
// folds applied ahead, and each read that failed (a span event
// projector.fold.failed with its stream and error; the status Error).
func endFoldReads(span trace.Span, folders []*folder) {
	if span.IsRecording() {
		events, failed := 0, 0
		for _, fd := range folders {
			if !fd.broken {
				events += fd.extended // a broken fold's are applied through the gate
			}
			if fd.readErr != nil {
				failed++
				span.AddEvent(eventFoldFailed, trace.WithAttributes(attrStream.String(fd.f.write.Stream),
					attrFoldFrom.Int64(int64(fd.readFrom)), attrFoldError.String(fd.readErr.Error())))
			}
		}
		span.SetAttributes(attrFoldEvents.Int(events), attrFoldFailed.Int(failed))
		if failed > 0 {
			span.SetStatus(codes.Error, fmt.Sprintf("%d of %d stream reads failed", failed, len(folders)))
		}
	}
	span.End()
}

// missedOf is how many of a bulk write's documents it did not write.
func missedOf(ok []bool, err error) int {
	if err != nil {
		return len(ok)
	}
	n := 0
	for _, w := range ok {
		if !w {
			n++
		}
	}
	return n
}

// endStore ends the span of a batch's read or write.
func endStore(span trace.Span, err error, missed int) {
	if span.IsRecording() {
		if missed > 0 {
			span.SetAttributes(attrMissed.Int(missed))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// tracePassed notes the batch's events of projection p that it passes over
// because a stream fold applied them ahead: they get no span (the fold's
// span links the traced ones), and a span event projector.passed on the
// batch's span counts them.
func (b *batchRun) tracePassed(ctx context.Context, p Definition, passed int) {
	if span := trace.SpanFromContext(ctx); passed > 0 && span.IsRecording() {
		span.AddEvent(eventPassed, trace.WithAttributes(attrProjection.String(p.Name()), attrPassed.Int(passed)))
	}
}

// aheadEvent is an event a stream fold read and applied ahead of its
// delivery, whose metadata carries a trace context: the fold's span links
// it.
type aheadEvent struct {
	remote trace.SpanContext
	ev     Event // without its data, metadata and payload
}

// aheadKept is how many of the traced events a fold applied ahead its span
// needs at least: a parent and maxEventLinks links.
const aheadKept = maxEventLinks + 1

// noteAhead keeps ev, which the fold applied ahead, for the fold's span,
// when its metadata carries a trace context. It keeps the latest aheadKept
// (up to twice as many between compactions) and the latest sampled one,
// older though it may be: a parent-based sampler records the span with it
// as the parent.
func (fd *folder) noteAhead(ev Event) {
	remote := MetadataContext(ev.Metadata)
	if !remote.IsValid() {
		return
	}
	ev.Data, ev.Metadata, ev.Payload = nil, nil, nil
	fd.ahead = append(fd.ahead, aheadEvent{remote, ev})
	if len(fd.ahead) < 2*aheadKept {
		return
	}
	from := len(fd.ahead) - aheadKept
	kept := make([]aheadEvent, 0, 2*aheadKept)
	for j := len(fd.ahead) - 1; j >= 0; j-- {
		if fd.ahead[j].remote.IsSampled() {
			if j < from {
				kept = append(kept, fd.ahead[j])
			}
			break
		}
	}
	fd.ahead = append(kept, fd.ahead[from:]...)
}

// round is the tracing of one round of a projection's documents in a
// batch: when it began; the batch's store calls add their time to the
// batch's store clock (nil when not tracing) until it ends.
type round struct {
	b     *batchRun
	start time.Time
}

// beginRound starts the tracing of a round of a projection's documents.
func (b *batchRun) beginRound() round {
	if b.tracing() {
		b.clock = &storeClock{}
	}
	return round{b: b, start: time.Now()}
}

// end stops the round's store clock.
func (r round) end() { r.b.clock = nil }

// folded records the spans of the documents of docs that the round folded
// and wrote (or found duplicates) for projection p, those not in through
// (which go through the gate, with spans of their own): see traceDocument.
// The events no span covers (those without a trace context; in a large
// batch, those of documents without a traced event) are counted by a span
// event projector.folded on the batch's span. Each document's store time is
// the round's: its one read and one bulk write, shared by its documents.
func (r round) folded(ctx context.Context, p Definition, docs, through []*docEvents, folds []*folder) {
	b := r.b
	if !b.tracing() {
		return
	}
	untraced := 0
	skip := make(map[*docEvents]bool, len(through))
	for _, d := range through {
		skip[d] = true
	}
	for j, d := range docs {
		if !skip[d] {
			var ahead []aheadEvent
			extended := 0
			if j < len(folds) && folds[j] != nil && !folds[j].broken {
				fd := folds[j]
				ahead, extended = fd.ahead, fd.extended
			}
			untraced += b.traceDocument(ctx, p, d.id, d.idx, b.decoded, r.start, b.clock.elapsed(), ahead, extended)
		}
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() && untraced > 0 {
		span.AddEvent(eventFolded, trace.WithAttributes(attrProjection.String(p.Name()), attrFolded.Int(untraced)))
	}
}

// traceEach records a projector.event span for each of the batch's events
// idx of document id in projection p whose metadata carries a trace
// context: a child of that context, linked to the caller's span (the
// batch's). It returns how many of the events have no trace context.
func (b *batchRun) traceEach(ctx context.Context, p Definition, id string, idx []int, events []Event, start time.Time, store time.Duration) (untraced int) {
	t := target{p, id}
	for _, i := range idx {
		remote := MetadataContext(events[i].Metadata)
		if !remote.IsValid() {
			untraced++
			continue
		}
		if r, ok := b.resultOf(i, p); ok {
			_, span := b.startEventIn(ctx, t, events[i], start, remote)
			endEvent(span, events[i], r, store)
		}
	}
	return untraced
}

// resultOf is the result of the batch's event i in projection p, if it has
// one.
func (b *batchRun) resultOf(i int, p Definition) (Result, bool) {
	for _, r := range b.out[i] {
		if r.Projection == p.Name() {
			return r, true
		}
	}
	return Result{}, false
}

// eventLinks are the links of a document's span to its traced events other
// than the span's own (remotes[last]), the latest first, at most
// maxEventLinks, with room for one more (the batch's). Each says its event's
// revision, and its stream where it is not the span's (stream): the
// attributes of all in one allocation.
func eventLinks(remotes []trace.SpanContext, last int, eventOf func(int) Event, stream string) []trace.Link {
	n := min(len(remotes)-1, maxEventLinks)
	links := make([]trace.Link, 0, n+1)
	attrs := make([]attribute.KeyValue, 0, 2*n)
	for j := len(remotes) - 1; j >= 0 && len(links) < maxEventLinks; j-- {
		if j == last {
			continue
		}
		e, from := eventOf(j), len(attrs)
		if e.StreamID != stream {
			attrs = append(attrs, attrStream.String(e.StreamID))
		}
		attrs = append(attrs, attrRevision.Int64(int64(e.StreamRevision)))
		links = append(links, trace.Link{SpanContext: remotes[j], Attributes: attrs[from:len(attrs):len(attrs)]})
	}
	return links
}

// traceDocument records the spans of the batch's events idx (from events,
// in log order) of document id in projection p, and of those its stream
// fold applied ahead (ahead: the traced ones; extended: how many), when the
// metadata of one of them at least carries a trace context: one an event
// in a batch of at most [WithEventSpans] events without events applied
// ahead (traceEach), else one for the document, because a large batch is
// where a catch-up or a rebuild spends its events, and a span an event
// would cost more than a tenth of its time (docs/benchmarks.md). The
// document's span is the last traced event's (the last whose context is
// sampled, if one is): a child of its trace context, with its attributes
// and result (applied, for an event applied ahead), and projector.events,
// how many events it covers. Its links are the caller's span (the
// batch's) and the other traced events' contexts (the latest 127), each
// with its revision, and its stream where it is not the span's. It
// returns how many of the batch's events no span covers.
func (b *batchRun) traceDocument(ctx context.Context, p Definition, id string, idx []int, events []Event, start time.Time, store time.Duration, ahead []aheadEvent, extended int) (untraced int) {
	if len(b.events) <= b.eventSpans && len(ahead) == 0 {
		return b.traceEach(ctx, p, id, idx, events, start, store)
	}
	// The traced events, the batch's then those the fold applied ahead, in
	// the stream's order. The span's parent: the last whose context is
	// sampled (a parent-based sampler records the span then), else the
	// last.
	var traced []int // for each traced event of the batch, its position in idx
	var remotes []trace.SpanContext
	last := -1
	note := func(remote trace.SpanContext) {
		remotes = append(remotes, remote)
		if remote.IsSampled() || last < 0 || !remotes[last].IsSampled() {
			last = len(remotes) - 1
		}
	}
	for k, i := range idx {
		if remote := MetadataContext(events[i].Metadata); remote.IsValid() {
			traced = append(traced, k)
			note(remote)
		}
	}
	for _, a := range ahead {
		note(a.remote)
	}
	if last < 0 {
		return len(idx)
	}
	// The event the span is: one of the batch's, with its result; or one
	// the fold applied ahead.
	var ev Event
	var r Result
	if last < len(traced) {
		var ok bool
		if r, ok = b.resultOf(idx[traced[last]], p); !ok {
			return len(idx)
		}
		ev = events[idx[traced[last]]]
	} else {
		ev = ahead[last-len(traced)].ev
		r = Result{Projection: p.Name(), Document: id, Outcome: Applied}
	}
	// The others are links, the latest first kept within the SDK's
	// default bound of 128 a span (one is the batch's).
	eventOf := func(j int) Event {
		if j < len(traced) {
			return events[idx[traced[j]]]
		}
		return ahead[j-len(traced)].ev
	}
	links := eventLinks(remotes, last, eventOf, ev.StreamID)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if caller := trace.SpanContextFromContext(ctx); caller.IsValid() {
		links = append(links, trace.Link{SpanContext: caller})
	}
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	_, span := b.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, remotes[last]), spanEvent, opts...)
	endEventOf(span, ev, r, store, len(idx)+extended)
	return 0
}
