package projector_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
	"github.com/revgate/projector/subscription"
)

// recording returns a tracer provider that keeps every span in memory.
func recording(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, rec
}

// spansNamed returns the ended spans named name.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// oneBatch returns the one projector.batch span rec holds and, for each
// name, the one span of that name, which must be a child of the batch.
func oneBatch(t *testing.T, rec *tracetest.SpanRecorder, names ...string) (sdktrace.ReadOnlySpan, []sdktrace.ReadOnlySpan) {
	t.Helper()
	batches := spansNamed(rec, "projector.batch")
	if len(batches) != 1 {
		t.Fatalf("%d batch spans", len(batches))
	}
	var children []sdktrace.ReadOnlySpan
	for _, name := range names {
		sp := spansNamed(rec, name)
		if len(sp) != 1 || sp[0].Parent().SpanID() != batches[0].SpanContext().SpanID() {
			t.Fatalf("%d %s spans, want one, a child of the batch", len(sp), name)
		}
		children = append(children, sp[0])
	}
	return batches[0], children
}

// childOf reports whether s is in trace traceID, a child of span spanID.
func childOf(s sdktrace.ReadOnlySpan, traceID, spanID string) bool {
	return s.SpanContext().TraceID().String() == traceID && s.Parent().SpanID().String() == spanID
}

// spanEventAttr is the value of attribute key of span event name on s ("":
// none).
func spanEventAttr(s sdktrace.ReadOnlySpan, name, key string) string {
	for _, ev := range s.Events() {
		for _, kv := range ev.Attributes {
			if ev.Name == name && string(kv.Key) == key {
				return kv.Value.String()
			}
		}
	}
	return ""
}

func attr(s sdktrace.ReadOnlySpan, key string) (string, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String(), true
		}
	}
	return "", false
}

// storeTime checks that sp carries projector.store.time_ms, more than 0
// and no more than the span lasted, and returns it.
func storeTime(t *testing.T, sp sdktrace.ReadOnlySpan) float64 {
	t.Helper()
	for _, kv := range sp.Attributes() {
		if kv.Key == "projector.store.time_ms" {
			ms := kv.Value.AsFloat64()
			if lasted := float64(sp.EndTime().Sub(sp.StartTime())) / float64(time.Millisecond); ms <= 0 || ms > lasted {
				t.Errorf("%s: projector.store.time_ms = %v, want more than 0 and at most the span's %v ms", sp.Name(), ms, lasted)
			}
			return ms
		}
	}
	t.Errorf("%s: no projector.store.time_ms among %v", sp.Name(), sp.Attributes())
	return 0
}

// eventSpan returns the projector.event span of the event at revision of
// stream in projection.
func eventSpan(t *testing.T, rec *tracetest.SpanRecorder, projection, stream string, revision uint64) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spansNamed(rec, "projector.event") {
		p, _ := attr(s, "projector.projection")
		st, _ := attr(s, "projector.stream")
		rev, _ := attr(s, "projector.revision")
		if p == projection && st == stream && rev == uintString(revision) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d projector.event spans for %s@%d in %s, want 1", len(found), stream, revision, projection)
	}
	return found[0]
}

func uintString(n uint64) string { return strconv.FormatUint(n, 10) }

// readStream reads the events of stream from the server, as the engine
// sees them, decoded.
func readStream(t *testing.T, es *esdbtest.Server, stream string) []projector.Event {
	t.Helper()
	// A read of a stream gives no positions, as a node's: the events' are
	// those of $all.
	positions := map[string]uint64{}
	client := dialESDB(t, es)
	err := client.ScanAll(context.Background(), nil, 1<<20, func(cp projector.Checkpoint, _, _ string) bool {
		positions[cp.EventID] = cp.Position
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []projector.Event
	err = client.ReadStream(context.Background(), stream, 0, func(ev projector.Event) error {
		ev, err := cart.Registry().Decode(ev)
		ev.Position = positions[ev.ID]
		out = append(out, ev)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runTraced runs r until every one of n events is settled, or fails the
// test after a minute.
func runTraced(t *testing.T, r *projector.Runner, n uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.After(time.Minute)
	for {
		st := r.Stats()
		if st.CaughtUp && st.Applied+st.Duplicates+st.Failed >= n {
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("runner ended: %v", err)
		case <-deadline:
			cancel()
			t.Fatalf("not caught up in a minute: %+v", st)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A command appended through the cart's write side inside a request's span,
// then projected by a runner on the EventStoreDB-protocol server: each
// event's projector span is in the request's trace, a child of the command's
// span that the event's metadata names.
func TestTracing_the_projector_continues_the_trace_of_the_command_that_appended_the_event(t *testing.T) {
	tp, rec := recording(t)
	es := esdbtest.New(t)
	h := cart.NewHandler(cart.NewStore(dialESDB(t, es)), nil, cart.WithTracerProvider(tp))
	ctx, request := tp.Tracer("test").Start(context.Background(), "request")
	for _, cmd := range []cart.Command{
		cart.OpenCart{RequestID: "t1", CartID: "tr1", ClientID: "x"},
		cart.AddItem{RequestID: "t2", CartID: "tr1", Item: cart.ProductItem{ProductID: "p", Quantity: 2}},
	} {
		if _, err := h.Handle(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	request.End()
	trID := request.SpanContext().TraceID()

	s := newStore(t)
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(patient()), projector.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := dialESDB(t, es)
	src, err := subscription.NewAll(c, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := projector.NewRunner("traced", e, src, s)
	if err != nil {
		t.Fatal(err)
	}
	runTraced(t, r, 2)

	commands := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range spansNamed(rec, "cart.command") {
		if sp.Parent().SpanID() != request.SpanContext().SpanID() {
			t.Errorf("cart.command span's parent %v, want the request's", sp.Parent().SpanID())
		}
		commands[sp.SpanContext().SpanID()] = sp
	}
	evs := readStream(t, es, cart.StreamID("tr1"))
	if len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	for _, ev := range evs {
		meta := projector.MetadataContext(ev.Metadata)
		cmd, ok := commands[meta.SpanID()]
		if !ok || meta.TraceID() != trID {
			t.Fatalf("event %d's metadata %s names no command span of the request's trace", ev.StreamRevision, ev.Metadata)
		}
		sp := eventSpan(t, rec, cart.DetailsName, ev.StreamID, ev.StreamRevision)
		if sp.SpanContext().TraceID() != trID {
			t.Errorf("event %d: trace %v, want the request's %v", ev.StreamRevision, sp.SpanContext().TraceID(), trID)
		}
		if sp.Parent().SpanID() != cmd.SpanContext().SpanID() || !sp.Parent().IsRemote() {
			t.Errorf("event %d: parent %v (remote %v), want the command's span %v", ev.StreamRevision, sp.Parent().SpanID(), sp.Parent().IsRemote(), cmd.SpanContext().SpanID())
		}
		for key, want := range map[string]string{"projector.outcome": "applied", "projector.document": "tr1", "projector.event.id": ev.ID,
			"projector.event.type": ev.Type, "projector.position": uintString(ev.Position), "projector.projection": cart.DetailsName} {
			if got, _ := attr(sp, key); got != want {
				t.Errorf("event %d: %s = %q, want %q", ev.StreamRevision, key, got, want)
			}
		}
	}
	assertDocument(t, s, "tr1", evs)
}

// An event delivered before its predecessor is applied waits in the gate:
// each wait is an event on the event's span, which stays in the trace of the
// command that appended it.
func TestTracing_the_gate_s_waits_show_on_the_event_s_span(t *testing.T) {
	tp, rec := recording(t)
	es := esdbtest.New(t)
	h := cart.NewHandler(cart.NewStore(dialESDB(t, es)), nil, cart.WithTracerProvider(tp))
	var traces []trace.TraceID
	for _, cmd := range []cart.Command{
		cart.OpenCart{RequestID: "w1", CartID: "tw1", ClientID: "x"},
		cart.AddItem{RequestID: "w2", CartID: "tw1", Item: cart.ProductItem{ProductID: "p", Quantity: 2}},
	} {
		ctx, request := tp.Tracer("test").Start(context.Background(), "request")
		if _, err := h.Handle(ctx, cmd); err != nil {
			t.Fatal(err)
		}
		request.End()
		traces = append(traces, request.SpanContext().TraceID())
	}
	evs := readStream(t, es, cart.StreamID("tw1"))

	waited := make(chan struct{})
	var once sync.Once
	pol := patient()
	pol.OnRetry = func(retry.Attempt) { once.Do(func() { close(waited) }) }
	s := newStore(t)
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(pol), projector.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	late := make(chan []projector.Result, 1)
	go func() { rs, _ := e.Handle(context.Background(), evs[1]); late <- rs }() // revision 1 first
	select {
	case <-waited:
	case <-time.After(time.Minute):
		t.Fatal("revision 1 did not wait for revision 0")
	}
	handle(t, e, evs[0])
	var rs []projector.Result
	select {
	case rs = <-late:
	case <-time.After(time.Minute):
		t.Fatal("revision 1 still waits after revision 0 was applied")
	}
	if len(rs) != 1 || rs[0].Outcome != projector.Applied || rs[0].Waits < 1 {
		t.Fatalf("revision 1: %+v", rs)
	}
	sp := eventSpan(t, rec, cart.DetailsName, evs[1].StreamID, 1)
	if sp.SpanContext().TraceID() != traces[1] {
		t.Errorf("trace %v, want the command's %v", sp.SpanContext().TraceID(), traces[1])
	}
	if sp.Parent().SpanID() != projector.MetadataContext(evs[1].Metadata).SpanID() {
		t.Errorf("parent %v, want the appended context's span %v", sp.Parent().SpanID(), projector.MetadataContext(evs[1].Metadata).SpanID())
	}
	waits := 0
	for _, ev := range sp.Events() {
		if ev.Name == "projector.wait" {
			waits++
		}
	}
	if waits != rs[0].Waits {
		t.Errorf("%d projector.wait events, want one per wait: %d", waits, rs[0].Waits)
	}
	if got, _ := attr(sp, "projector.waits"); got != uintString(uint64(rs[0].Waits)) {
		t.Errorf("projector.waits = %s, want %d", got, rs[0].Waits)
	}
	storeTime(t, sp) // its reads while it waited, and its write
	if first := eventSpan(t, rec, cart.DetailsName, evs[0].StreamID, 0); first.SpanContext().TraceID() != traces[0] {
		t.Errorf("revision 0 in trace %v, want its command's %v", first.SpanContext().TraceID(), traces[0])
	}
	assertDocument(t, s, "tw1", evs)
}

// With tracing off (no provider given, none set globally), the engine and
// the write side record nothing and write no trace context, and the
// documents are what they are with tracing on.
func TestTracing_off_by_default_records_nothing_and_changes_nothing(t *testing.T) {
	_, rec := recording(t) // never given to anything
	es := esdbtest.New(t)
	h := cart.NewHandler(cart.NewStore(dialESDB(t, es)), nil)
	for _, cmd := range []cart.Command{
		cart.OpenCart{RequestID: "o1", CartID: "off1", ClientID: "x"},
		cart.AddItem{RequestID: "o2", CartID: "off1", Item: cart.ProductItem{ProductID: "p", Quantity: 2}},
		cart.ConfirmCart{RequestID: "o3", CartID: "off1"},
	} {
		if _, err := h.Handle(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	evs := readStream(t, es, cart.StreamID("off1"))
	for _, ev := range evs {
		if string(ev.Metadata) != `{"clientId":"x","requestId":"`+"o"+uintString(ev.StreamRevision+1)+`"}` {
			t.Errorf("metadata %s: want the client and the request only", ev.Metadata)
		}
	}
	off, on := newStore(t), newStore(t)
	handleAll := func(s *mongostore.Store, opts ...projector.Option) []projector.Result {
		e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var all []projector.Result
		for _, rs := range e.HandleBatch(context.Background(), evs) { // batched
			all = append(all, rs...)
		}
		for _, ev := range evs {
			all = append(all, handle(t, e, ev)...) // one by one: duplicates now
		}
		return all
	}
	offResults := handleAll(off)
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans recorded with tracing off", n)
	}
	onTP, onRec := recording(t)
	onResults := handleAll(on, projector.WithTracerProvider(onTP))
	if len(onRec.Ended()) == 0 {
		t.Fatal("no spans with tracing on")
	}
	if len(offResults) != len(onResults) {
		t.Fatalf("results off %v, on %v", offResults, onResults)
	}
	for i := range offResults {
		if offResults[i].Outcome != onResults[i].Outcome {
			t.Errorf("result %d: off %v, on %v", i, offResults[i], onResults[i])
		}
	}
	assertDocument(t, off, "off1", evs)
	assertDocument(t, on, "off1", evs)
}

// The trace context in an event's metadata: W3C traceparent first, then the
// Kurrent clients' $traceId/$spanId; anything else starts a trace.
func TestMetadataContext_reads_traceparent_and_the_kurrent_convention(t *testing.T) {
	const (
		tid = "4bf92f3577b34da6a3ce929d0e0e4736"
		sid = "00f067aa0ba902b7"
		dot = "0af7651916cd43dd8448eb211c80319c"
		dsp = "b7ad6b7169203331"
	)
	for _, tc := range []struct {
		name, meta string
		trace, spn string // "": no context
	}{
		{"traceparent", `{"clientId":"x","traceparent":"00-` + tid + `-` + sid + `-01"}`, tid, sid},
		{"kurrent .NET client", `{"$correlationId":"c","$causationId":"d","$traceId":"` + dot + `","$spanId":"` + dsp + `"}`, dot, dsp},
		{"both: traceparent wins", `{"traceparent":"00-` + tid + `-` + sid + `-01","$traceId":"` + dot + `","$spanId":"` + dsp + `"}`, tid, sid},
		{"bad traceparent, kurrent keys", `{"traceparent":"nope","$traceId":"` + dot + `","$spanId":"` + dsp + `"}`, dot, dsp},
		{"trace id without span id", `{"$traceId":"` + dot + `"}`, "", ""},
		{"not hex", `{"$traceId":"zz","$spanId":"` + dsp + `"}`, "", ""},
		{"all zeros", `{"$traceId":"00000000000000000000000000000000","$spanId":"0000000000000000"}`, "", ""},
		{"no context", `{"clientId":"x"}`, "", ""},
		{"not JSON", `$traceId traceparent`, "", ""},
		{"a JSON array", `["$traceId","traceparent"]`, "", ""},
		{"none", ``, "", ""},
		{"spaces around the colon", "{\"traceparent\" :\n \"00-" + tid + "-" + sid + "-01\"}", tid, sid},
		{"the key's name as a value first", `{"kind":"traceparent","traceparent":"00-` + tid + `-` + sid + `-01"}`, tid, sid},
		{"an escaped value", `{"traceparent":"00-` + tid + `-` + sid + `-0\u0031"}`, tid, sid},
		{"upper case", `{"traceparent":"00-` + strings.ToUpper(tid) + `-` + sid + `-01"}`, "", ""},
		{"version ff", `{"traceparent":"ff-` + tid + `-` + sid + `-01"}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := projector.MetadataContext([]byte(tc.meta))
			if tc.trace == "" {
				if sc.IsValid() {
					t.Fatalf("context %v, want none", sc)
				}
				return
			}
			if sc.TraceID().String() != tc.trace || sc.SpanID().String() != tc.spn || !sc.IsRemote() || !sc.IsSampled() {
				t.Fatalf("context %v/%v remote %v sampled %v, want %s/%s, remote and sampled", sc.TraceID(), sc.SpanID(), sc.IsRemote(), sc.IsSampled(), tc.trace, tc.spn)
			}
		})
	}
}

// An event written by a Kurrent client with its convention is handled in
// the writer's trace: the engine's span is a child of $spanId.
func TestTracing_an_event_with_the_kurrent_convention_continues_its_trace(t *testing.T) {
	tp, rec := recording(t)
	s := newStore(t)
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()}, projector.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	evs, err := log.AppendWithMetadata(cart.StreamID("k1"), []byte(`{"clientId":"x","$traceId":"0af7651916cd43dd8448eb211c80319c","$spanId":"b7ad6b7169203331"}`),
		cart.ShoppingCartOpened{ShoppingCartID: "k1", ClientID: "x", OpenedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if rs := handle(t, e, evs[0]); rs[0].Outcome != projector.Applied {
		t.Fatalf("%+v", rs)
	}
	sp := eventSpan(t, rec, cart.DetailsName, evs[0].StreamID, 0)
	if !childOf(sp, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331") {
		t.Fatalf("span in trace %v, parent %v", sp.SpanContext().TraceID(), sp.Parent().SpanID())
	}
}

// A batch is a span with its read and its bulk write as children; each
// event it folds that carries a trace in its metadata has its own span, a
// child of that trace with a link to the batch; the others are counted on
// the batch's span.
func TestTracing_a_batch_shows_its_read_its_write_and_each_event(t *testing.T) {
	tp, rec := recording(t)
	s := newStore(t)
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()}, projector.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	const tid, sid = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	traced := []byte(`{"clientId":"x","traceparent":"00-` + tid + `-` + sid + `-01"}`)
	a := log.MustAppend(t, cart.StreamID("b1"), cart.ShoppingCartOpened{ShoppingCartID: "b1", ClientID: "x", OpenedAt: t0})
	handle(t, e, a[0]) // stored: the batch reads it
	more, err := log.AppendWithMetadata(cart.StreamID("b1"), traced,
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "b1", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
		cart.ShoppingCartConfirmed{ShoppingCartID: "b1", ConfirmedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	b := log.MustAppend(t, cart.StreamID("b2"), cart.ShoppingCartOpened{ShoppingCartID: "b2", ClientID: "x", OpenedAt: t0})
	batch := append(more, b...)
	for i, rs := range e.HandleBatch(context.Background(), batch) {
		if len(rs) != 1 || rs[0].Outcome != projector.Applied {
			t.Fatalf("event %d: %+v", i, rs)
		}
	}
	batchSpan, _ := oneBatch(t, rec, "projector.batch.read", "projector.batch.write")
	bs := batchSpan.SpanContext()
	for _, ev := range more {
		sp := eventSpan(t, rec, cart.DetailsName, ev.StreamID, ev.StreamRevision)
		if !childOf(sp, tid, sid) {
			t.Errorf("event %d: trace %v parent %v, want the metadata's", ev.StreamRevision, sp.SpanContext().TraceID(), sp.Parent().SpanID())
		}
		if links := sp.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != bs.SpanID() {
			t.Errorf("event %d: links %v, want the batch", ev.StreamRevision, links)
		}
		// The batch's one read and one bulk write, which its documents
		// share: timed within their spans.
		if ms, batchStore := storeTime(t, sp), storeSpans(t, rec); ms > batchStore {
			t.Errorf("event %d: projector.store.time_ms = %v, more than the batch's read and write spans (%v ms)", ev.StreamRevision, ms, batchStore)
		}
	}
	for _, sp := range spansNamed(rec, "projector.event") {
		if st, _ := attr(sp, "projector.stream"); st == cart.StreamID("b2") {
			t.Errorf("a folded event without a trace in its metadata has a span of its own")
		}
	}
	if folded := spanEventAttr(batchSpan, "projector.folded", "projector.batch.folded"); folded != "1" {
		t.Errorf("the batch counts %q folded events without a trace, want 1", folded)
	}
	assertDocument(t, s, "b1", append(a, more...))
}

// A batch that folds a versioned document (a summary fed by many streams)
// shows the same: its read and write as children of the batch, and a span
// for each folded event whose metadata carries a trace, in that trace.
func TestTracing_a_batch_of_a_versioned_document_shows_its_read_its_write_and_each_traced_event(t *testing.T) {
	tp, rec := recording(t)
	s := newStore(t)
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewClientSummaryProjection()}, projector.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	traced := []byte(`{"clientId":"c","traceparent":"00-` + tid + `-` + sid + `-01"}`)
	var batch, tracedEvents []projector.Event
	for _, id := range []string{"v1", "v2", "v3"} {
		evs, err := log.AppendWithMetadata(cart.StreamID(id), traced, cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c", OpenedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		batch, tracedEvents = append(batch, evs...), append(tracedEvents, evs...)
		more, err := log.AppendWithMetadata(cart.StreamID(id), []byte(`{"clientId":"c"}`),
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, more...)
	}
	for i, rs := range e.HandleBatch(context.Background(), batch) {
		if len(rs) != 1 || rs[0].Outcome != projector.Applied {
			t.Fatalf("event %d: %+v", i, rs)
		}
	}
	oneBatch(t, rec, "projector.batch.read", "projector.batch.write") // one document: one read, one write
	if n := len(spansNamed(rec, "projector.event")); n != len(tracedEvents) {
		t.Errorf("%d event spans, want one per traced event (%d)", n, len(tracedEvents))
	}
	for _, ev := range tracedEvents {
		sp := eventSpan(t, rec, cart.ClientSummaryName, ev.StreamID, ev.StreamRevision)
		if !childOf(sp, tid, sid) {
			t.Errorf("event %s@%d: trace %v parent %v, want the metadata's", ev.StreamID, ev.StreamRevision, sp.SpanContext().TraceID(), sp.Parent().SpanID())
		}
		storeTime(t, sp)
	}
}

// storeSpans is the time, in ms, of the batch's read and write spans.
func storeSpans(t *testing.T, rec *tracetest.SpanRecorder) float64 {
	t.Helper()
	var d time.Duration
	for _, name := range []string{"projector.batch.read", "projector.batch.write"} {
		for _, sp := range spansNamed(rec, name) {
			d += sp.EndTime().Sub(sp.StartTime())
		}
	}
	return float64(d) / float64(time.Millisecond)
}

// The stream reads of a batch's folds are one span of the batch: how many
// streams, how many events the folds applied ahead; a read that fails is a
// span event with its stream and error, and the span's status an error.
func TestTracing_a_batch_s_stream_reads_are_one_span(t *testing.T) {
	tp, rec := recording(t)
	log := projectortest.NewLog(cart.Registry())
	var all []projector.Event
	for _, id := range []string{"f1", "f2"} {
		all = append(all, log.MustAppend(t, cart.StreamID(id), cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "x", OpenedAt: t0},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}},
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "q", Quantity: 2}})...)
	}
	h := newStreams(all...)
	h.fail = cart.StreamID("f2")
	e := foldEngine(t, newStore(t), h, projector.WithTracerProvider(tp))
	// The batch holds each cart's first event: the folds read the rest.
	e.HandleBatch(context.Background(), []projector.Event{all[0], all[3]})
	_, children := oneBatch(t, rec, "projector.fold.read")
	sp := children[0]
	streams, _ := attr(sp, "projector.fold.streams")
	events, _ := attr(sp, "projector.fold.events")
	failed, _ := attr(sp, "projector.fold.failed")
	if streams != "2" || events != "2" || failed != "1" {
		t.Errorf("fold reads: streams %s, events %s, failed %s; want 2 streams, 2 events (f1's), 1 failed", streams, events, failed)
	}
	if sp.Status().Code != codes.Error {
		t.Errorf("status %v, want an error", sp.Status())
	}
	var failures []string
	for _, ev := range sp.Events() {
		if ev.Name != "projector.fold.failed" {
			continue
		}
		for _, kv := range ev.Attributes {
			failures = append(failures, string(kv.Key)+"="+kv.Value.String())
		}
	}
	for _, w := range []string{"projector.stream=" + cart.StreamID("f2"), "projector.fold.from=1"} {
		if !slices.Contains(failures, w) {
			t.Errorf("failure events %v, want %s", failures, w)
		}
	}
	if !slices.ContainsFunc(failures, func(f string) bool {
		return strings.HasPrefix(f, "projector.fold.error=") && strings.Contains(f, "connection lost")
	}) {
		t.Errorf("failure events %v, want the error", failures)
	}
}

// An event a batch sends through the gate (its predecessor missing) has the
// store's time of its own handling on its span, not the batch's read: the
// time fits within its span, which starts after the batch's read.
func TestTracing_an_event_a_batch_sends_through_the_gate_carries_its_own_store_time(t *testing.T) {
	tp, rec := recording(t)
	s := newStore(t)
	pol := retry.Default()
	pol.InitialDelay, pol.MaxDelay, pol.MaxRetries = time.Millisecond, time.Millisecond, 3
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()}, projector.WithRetry(pol), projector.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	const tid, sid = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7"
	traced := []byte(`{"clientId":"x","traceparent":"00-` + tid + `-` + sid + `-01"}`)
	log.MustAppend(t, cart.StreamID("g1"), cart.ShoppingCartOpened{ShoppingCartID: "g1", ClientID: "x", OpenedAt: t0}) // never delivered
	late, err := log.AppendWithMetadata(cart.StreamID("g1"), traced,
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "g1", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})
	if err != nil {
		t.Fatal(err)
	}
	rs := e.HandleBatch(context.Background(), late)
	if len(rs) != 1 || len(rs[0]) != 1 || rs[0][0].Outcome != projector.Failed || rs[0][0].Waits == 0 {
		t.Fatalf("results %+v, want the event failed after waiting for its predecessor", rs)
	}
	sp := eventSpan(t, rec, cart.DetailsName, late[0].StreamID, late[0].StreamRevision)
	if got, _ := attr(sp, "projector.waits"); got != uintString(uint64(rs[0][0].Waits)) {
		t.Errorf("projector.waits = %s, want %d", got, rs[0][0].Waits)
	}
	storeTime(t, sp) // its reads, within its own span
}

// traceparentOf is metadata whose trace context is trace tid, span sid.
func traceparentOf(tid, sid string) []byte {
	return []byte(`{"clientId":"x","traceparent":"00-` + tid + `-` + sid + `-01"}`)
}

// linkRevisions is the linked span ids of sp, each with its
// projector.revision ("" for a link without one: the batch's).
func linkRevisions(sp sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, l := range sp.Links() {
		rev := ""
		for _, kv := range l.Attributes {
			if kv.Key == "projector.revision" {
				rev = kv.Value.String()
			}
		}
		out[l.SpanContext.SpanID().String()] = rev
	}
	return out
}

// In a batch larger than WithEventSpans, a document's events share one
// span: the last traced event's, in its trace, counting the events it
// covers, with the other traced events and the batch as links; a document
// without a traced event has none.
func TestTracing_a_large_batch_gives_each_document_one_span_linked_to_its_traced_events(t *testing.T) {
	tp, rec := recording(t)
	s := newStore(t)
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithTracerProvider(tp), projector.WithEventSpans(3))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	const (
		t1, s1 = "11111111111111111111111111111111", "1111111111111111"
		t2, s2 = "22222222222222222222222222222222", "2222222222222222"
		t3, s3 = "33333333333333333333333333333333", "3333333333333333"
	)
	var batch []projector.Event
	for _, step := range []struct {
		meta []byte
		ev   any
	}{
		{traceparentOf(t1, s1), cart.ShoppingCartOpened{ShoppingCartID: "d1", ClientID: "x", OpenedAt: t0}},
		{[]byte(`{"clientId":"x"}`), cart.ProductItemAddedToShoppingCart{ShoppingCartID: "d1", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}}},
		{traceparentOf(t2, s2), cart.ProductItemAddedToShoppingCart{ShoppingCartID: "d1", ProductItem: cart.ProductItem{ProductID: "q", Quantity: 2}}},
		{traceparentOf(t3, s3), cart.ShoppingCartConfirmed{ShoppingCartID: "d1", ConfirmedAt: t0}},
	} {
		evs, err := log.AppendWithMetadata(cart.StreamID("d1"), step.meta, step.ev)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, evs...)
	}
	d1 := slices.Clone(batch)
	batch = append(batch, log.MustAppend(t, cart.StreamID("d2"), cart.ShoppingCartOpened{ShoppingCartID: "d2", ClientID: "x", OpenedAt: t0})...)
	for i, rs := range e.HandleBatch(context.Background(), batch) {
		if len(rs) != 1 || rs[0].Outcome != projector.Applied {
			t.Fatalf("event %d: %+v", i, rs)
		}
	}
	batchSpan, _ := oneBatch(t, rec, "projector.batch.write") // creations: nothing to read
	spans := spansNamed(rec, "projector.event")
	if len(spans) != 1 {
		t.Fatalf("%d projector.event spans, want one for d1 (d2 has no trace)", len(spans))
	}
	sp := eventSpan(t, rec, cart.DetailsName, cart.StreamID("d1"), 3)
	if !childOf(sp, t3, s3) {
		t.Errorf("trace %v parent %v, want the last traced event's (%s, %s)", sp.SpanContext().TraceID(), sp.Parent().SpanID(), t3, s3)
	}
	for key, want := range map[string]string{"projector.events": "4", "projector.document": "d1", "projector.outcome": "applied",
		"projector.event.id": d1[3].ID, "projector.event.type": d1[3].Type} {
		if got, _ := attr(sp, key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	storeTime(t, sp)
	want := map[string]string{s1: "0", s2: "2", batchSpan.SpanContext().SpanID().String(): ""}
	if got := linkRevisions(sp); !maps.Equal(got, want) {
		t.Errorf("links %v, want the other traced events with their revisions and the batch: %v", got, want)
	}
	if folded := spanEventAttr(batchSpan, "projector.folded", "projector.batch.folded"); folded != "1" {
		t.Errorf("the batch counts %q folded events without a span, want 1 (d2's)", folded)
	}
	assertDocument(t, s, "d1", d1)
}

// The events a stream fold applies ahead are links of the fold's span (the
// last traced one its parent), and a later batch that passes over them
// makes no span of its own: it counts them on its span.
func TestTracing_events_a_fold_applies_ahead_are_links_of_its_span(t *testing.T) {
	tp, rec := recording(t)
	log := projectortest.NewLog(cart.Registry())
	const (
		ta, sa = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa"
		tb, sb = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "bbbbbbbbbbbbbbbb"
	)
	first := log.MustAppend(t, cart.StreamID("f9"), cart.ShoppingCartOpened{ShoppingCartID: "f9", ClientID: "x", OpenedAt: t0})
	rest := first
	for _, m := range []struct{ tid, sid, product string }{{ta, sa, "p"}, {tb, sb, "q"}} {
		evs, err := log.AppendWithMetadata(cart.StreamID("f9"), traceparentOf(m.tid, m.sid),
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: "f9", ProductItem: cart.ProductItem{ProductID: m.product, Quantity: 1}})
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, evs...)
	}
	for _, spans := range []int{1, 64} { // a large batch, and a small one
		t.Run(fmt.Sprintf("event spans %d", spans), func(t *testing.T) {
			rec.Reset()
			s := newStore(t)
			e := foldEngine(t, s, newStreams(rest...), projector.WithTracerProvider(tp), projector.WithEventSpans(spans))
			// The first batch holds the opening only (untraced): the fold
			// reads the two traced events ahead.
			id := fmt.Sprintf("f8-%d", spans)
			other := log.MustAppend(t, cart.StreamID(id), cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "x", OpenedAt: t0})
			e.HandleBatch(context.Background(), []projector.Event{first[0], other[0]})
			folds := spansNamed(rec, "projector.event")
			if len(folds) != 1 {
				t.Fatalf("%d projector.event spans, want one for f9's fold", len(folds))
			}
			sp := folds[0]
			if !childOf(sp, tb, sb) {
				t.Errorf("trace %v parent %v, want the last traced event's", sp.SpanContext().TraceID(), sp.Parent().SpanID())
			}
			for key, want := range map[string]string{"projector.revision": "2", "projector.outcome": "applied", "projector.events": "3"} {
				if got, _ := attr(sp, key); got != want {
					t.Errorf("%s = %q, want %q", key, got, want)
				}
			}
			if rev := linkRevisions(sp)[sa]; rev != "1" {
				t.Errorf("links %v, want the first traced event's at revision 1", linkRevisions(sp))
			}
			// The second batch delivers them: applied, passed over, no span.
			rec.Reset()
			for i, rs := range e.HandleBatch(context.Background(), rest[1:]) {
				if len(rs) != 1 || rs[0].Outcome != projector.Applied {
					t.Fatalf("event %d: %+v", i, rs)
				}
			}
			if n := len(spansNamed(rec, "projector.event")); n != 0 {
				t.Errorf("%d projector.event spans for events passed over, want none", n)
			}
			passed := ""
			for _, b := range spansNamed(rec, "projector.batch") {
				if v := spanEventAttr(b, "projector.passed", "projector.batch.passed"); v != "" {
					passed = v
				}
			}
			if passed != "2" {
				t.Errorf("the batch counts %q events passed over, want 2", passed)
			}
			assertDocument(t, s, "f9", rest)
		})
	}
}

// A document's span in a large batch is recorded when one of its events'
// contexts is sampled, although the last is not: its parent is the last
// sampled one (a parent-based sampler follows the parent), the unsampled
// one a link.
func TestTracing_a_document_s_span_follows_its_last_sampled_event(t *testing.T) {
	// The SDK's default sampler, as OTEL_TRACES_SAMPLER's default.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	s := newStore(t)
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithTracerProvider(tp), projector.WithEventSpans(0))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(cart.Registry())
	const (
		ts, ss = "44444444444444444444444444444444", "4444444444444444"
		tu, su = "55555555555555555555555555555555", "5555555555555555"
	)
	sampled, err := log.AppendWithMetadata(cart.StreamID("u1"), traceparentOf(ts, ss), cart.ShoppingCartOpened{ShoppingCartID: "u1", ClientID: "x", OpenedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	unsampled, err := log.AppendWithMetadata(cart.StreamID("u1"), []byte(`{"traceparent":"00-`+tu+`-`+su+`-00"}`),
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: "u1", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})
	if err != nil {
		t.Fatal(err)
	}
	batch := append(sampled, unsampled...)
	for i, rs := range e.HandleBatch(context.Background(), batch) {
		if len(rs) != 1 || rs[0].Outcome != projector.Applied {
			t.Fatalf("event %d: %+v", i, rs)
		}
	}
	spans := spansNamed(rec, "projector.event")
	if len(spans) != 1 {
		t.Fatalf("%d projector.event spans, want the document's, recorded", len(spans))
	}
	sp := spans[0]
	if !childOf(sp, ts, ss) {
		t.Errorf("trace %v parent %v, want the sampled event's", sp.SpanContext().TraceID(), sp.Parent().SpanID())
	}
	if rev, ok := linkRevisions(sp)[su]; !ok || rev != "1" {
		t.Errorf("links %v, want the unsampled event's at revision 1", linkRevisions(sp))
	}
	if events, _ := attr(sp, "projector.events"); events != "2" {
		t.Errorf("projector.events = %q, want 2", events)
	}
}

// A fold that applies more traced events ahead than a span can link keeps
// the latest sampled one, older though it is, as the span's parent: under a
// parent-based sampler, the document's span is recorded in its trace.
func TestTracing_a_long_fold_keeps_its_sampled_event_as_the_span_s_parent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	log := projectortest.NewLog(cart.Registry())
	const ts, ss = "66666666666666666666666666666666", "6666666666666666"
	first := log.MustAppend(t, cart.StreamID("long"), cart.ShoppingCartOpened{ShoppingCartID: "long", ClientID: "x", OpenedAt: t0})
	all := first
	const ahead = 300 // more than twice the 128 a span can carry
	for i := range ahead {
		meta := []byte(fmt.Sprintf(`{"traceparent":"00-%032x-%016x-00"}`, i+1, i+1)) // not sampled
		if i == 2 {
			meta = traceparentOf(ts, ss) // the one sampled, early
		}
		evs, err := log.AppendWithMetadata(cart.StreamID("long"), meta,
			cart.ProductItemAddedToShoppingCart{ShoppingCartID: "long", ProductItem: cart.ProductItem{ProductID: "p", Quantity: 1}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
	}
	s := newStore(t)
	e := foldEngine(t, s, newStreams(all...), projector.WithTracerProvider(tp), projector.WithEventSpans(0))
	other := log.MustAppend(t, cart.StreamID("other"), cart.ShoppingCartOpened{ShoppingCartID: "other", ClientID: "x", OpenedAt: t0})
	e.HandleBatch(context.Background(), []projector.Event{first[0], other[0]})
	spans := spansNamed(rec, "projector.event")
	if len(spans) != 1 {
		t.Fatalf("%d projector.event spans recorded, want the fold's, with its sampled event as parent", len(spans))
	}
	sp := spans[0]
	if !childOf(sp, ts, ss) {
		t.Errorf("trace %v parent %v, want the sampled event's", sp.SpanContext().TraceID(), sp.Parent().SpanID())
	}
	if got, _ := attr(sp, "projector.events"); got != fmt.Sprint(ahead+1) {
		t.Errorf("projector.events = %q, want %d", got, ahead+1)
	}
	if n := len(sp.Links()); n > 128 {
		t.Errorf("%d links, want at most 128", n)
	}
	assertDocument(t, s, "long", all)
}
