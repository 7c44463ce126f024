package official

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
)

// session is [neutral.Session] on one client.
type session struct {
	*shape
	cl reflect.Value // *Client
}

// call calls method name of v with args, and returns its results but the
// last, which is the error it returns.
func call(v reflect.Value, name string, args ...reflect.Value) ([]reflect.Value, error) {
	out := v.MethodByName(name).Call(args)
	return out[:len(out)-1], errorOf(out[len(out)-1])
}

// errorOf is the error in v (nil for nil).
func errorOf(v reflect.Value) error {
	if v.IsNil() {
		return nil
	}
	return v.Interface().(error)
}

// valuesOf returns the reflect values of xs.
func valuesOf(xs ...any) []reflect.Value {
	vs := make([]reflect.Value, len(xs))
	for i, x := range xs {
		if v, ok := x.(reflect.Value); ok {
			vs[i] = v
		} else {
			vs[i] = reflect.ValueOf(x)
		}
	}
	return vs
}

// build returns a value of the struct type t with the fields of kv set:
// pairs of a name and a value, converted to the field's type (a nil value
// leaves it zero).
func build(t reflect.Type, kv ...any) reflect.Value {
	v := reflect.New(t).Elem()
	set(v, kv...)
	return v
}

// set sets fields of the struct v as [build] does.
func set(v reflect.Value, kv ...any) {
	for i := 0; i+1 < len(kv); i += 2 {
		name := kv[i].(string)
		f := v.FieldByName(name)
		if !f.IsValid() {
			panic(v.Type().String() + " has no field " + name)
		}
		x := valuesOf(kv[i+1])[0]
		if !x.IsValid() {
			continue
		}
		if !x.Type().AssignableTo(f.Type()) {
			x = x.Convert(f.Type())
		}
		f.Set(x)
	}
}

// request is a call of a method of the client: its name and arguments.
type request struct {
	method string
	args   []reflect.Value
}

// req is the request of method with args (see [valuesOf]).
func req(method string, args ...any) request { return request{method, valuesOf(args...)} }

// do sends r to the client.
func (s session) do(r request) ([]reflect.Value, error) { return call(s.cl, r.method, r.args...) }

// check panics unless the client's method of r takes r's arguments.
func (s *shape) check(r request) {
	m, ok := s.client.MethodByName(r.method)
	if !ok {
		panic(s.client.String() + " has no method " + r.method)
	}
	t := m.Type
	for i, a := range r.args {
		in := i + 1
		var want reflect.Type
		switch {
		case t.IsVariadic() && in >= t.NumIn()-1:
			want = t.In(t.NumIn() - 1).Elem()
		case in < t.NumIn():
			want = t.In(in)
		default:
			panic(r.method + " takes fewer arguments")
		}
		if !a.Type().AssignableTo(want) {
			panic(r.method + " takes a " + want.String() + " as argument " + fmt.Sprint(i) + ", not a " + a.Type().String())
		}
	}
	if n := len(r.args) + 1; n < t.NumIn() && !(t.IsVariadic() && n == t.NumIn()-1) {
		panic(r.method + " takes more arguments")
	}
}

// argType is the type of argument i of the client's method name.
func (s *shape) argType(name string, i int) reflect.Type {
	m, _ := s.client.MethodByName(name)
	return m.Type.In(i + 1)
}

// buildAll builds every request the adapter sends, in each of its forms,
// and checks it against the client's method, so that a field, a method or
// an argument that is missing or of another type shows before the first
// request.
func (s *shape) buildAll() {
	ctx, cp, one := context.Background(), &projector.Checkpoint{Position: 1, Prepare: 1}, uint64(1)
	rs := []request{
		s.readAll(ctx, nil, false, 1), s.readAll(ctx, cp, false, 1), s.readAll(ctx, nil, true, 1),
		s.readStream(ctx, "s", 0, 1), s.readStream(ctx, "s", 1, 1),
		s.subscribeStream(ctx, "s", nil, true), s.subscribeStream(ctx, "s", &one, false),
		s.subscribeGroup(ctx, neutral.AllStreams, "g", 1), s.subscribeGroup(ctx, "s", "g", 1),
		s.groupInfo(ctx, "g"), s.listGroups(ctx), s.replayParked(ctx, "g"),
	}
	for _, f := range []neutral.Filter{{}, {ExcludeSystemEvents: true}, {EventTypes: true}} {
		rs = append(rs, s.subscribeAll(ctx, neutral.AllSubscription{From: cp, Filter: f}))
	}
	for _, expected := range []int64{neutral.NoStream, neutral.AnyRevision, 1} {
		rs = append(rs, s.append(ctx, "s", expected, []neutral.NewEvent{{}, {}}))
	}
	for _, stream := range []string{neutral.AllStreams, "s"} {
		for _, fromStart := range []bool{false, true} {
			rs = append(rs, s.createGroup(ctx, stream, "g", neutral.GroupSettings{Strategy: neutral.Pinned, MaxRetryCount: 1, FromStart: fromStart}, neutral.Filter{}))
		}
	}
	for _, r := range rs {
		s.check(r)
	}
	reflect.ValueOf(neutral.ActionPark).Convert(s.names.nackAction)
}

func (s session) Close() error {
	_, err := call(s.cl, "Close")
	return err
}

// allFrom is the position of $all after cp (the start for nil).
func (s *shape) allFrom(cp *projector.Checkpoint) reflect.Value {
	if cp == nil {
		return s.names.start
	}
	return build(s.names.position, "Commit", cp.Position, "Prepare", cp.Prepare)
}

// revision is the client's revision n, or its start for nil.
func (s *shape) revision(n *uint64) reflect.Value {
	if n == nil {
		return s.names.start
	}
	return s.names.revision.Call(valuesOf(*n))[0]
}

func (s *shape) readAll(ctx context.Context, from *projector.Checkpoint, backwards bool, n uint64) request {
	o := build(s.argType("ReadAll", 1), "From", s.allFrom(from))
	if backwards {
		o = build(s.argType("ReadAll", 1), "Direction", s.names.backwards, "From", s.names.end)
	}
	return req("ReadAll", ctx, o, n)
}

func (s session) ReadAll(ctx context.Context, from *projector.Checkpoint, backwards bool, n uint64) (neutral.Reader, error) {
	out, err := s.do(s.readAll(ctx, from, backwards, n))
	if err != nil {
		return nil, err
	}
	return reader{s.shape, out[0], s.recv.readNext(out[0])}, nil
}

func (s *shape) readStream(ctx context.Context, stream string, from, n uint64) request {
	start := &from
	if from == 0 {
		start = nil
	}
	return req("ReadStream", ctx, stream, build(s.argType("ReadStream", 2), "From", s.revision(start)), n)
}

func (s session) ReadStream(ctx context.Context, stream string, from, n uint64) (neutral.Reader, error) {
	out, err := s.do(s.readStream(ctx, stream, from, n))
	if err != nil {
		return nil, err
	}
	return reader{s.shape, out[0], s.recv.readNext(out[0])}, nil
}

// reader is an open read (a *ReadStream), and its Recv.
type reader struct {
	*shape
	rs   reflect.Value
	next func() (reflect.Value, error)
}

func (r reader) Recv() (*neutral.Resolved, error) {
	re, err := r.next()
	if err != nil {
		return nil, err
	}
	return r.resolvedOf(re), nil
}

func (r reader) Close() error {
	r.rs.MethodByName("Close").Call(nil)
	return nil
}

// filter is f as the client's *SubscriptionFilter.
func (s *shape) filter(f neutral.Filter) reflect.Value {
	kind := s.names.streamFilter
	switch {
	case f.ExcludeSystemEvents:
		return s.names.excludeSystemEvents.Call(nil)[0]
	case f.EventTypes:
		kind = s.names.eventFilter
	}
	p := reflect.New(s.names.filter.Elem())
	set(p.Elem(), "Type", kind, "Prefixes", f.Prefixes, "Regex", f.Regex)
	return p
}

func (s *shape) subscribeAll(ctx context.Context, o neutral.AllSubscription) request {
	return req("SubscribeToAll", ctx, build(s.argType("SubscribeToAll", 1), "From", s.allFrom(o.From), "ResolveLinkTos", o.ResolveLinks,
		"Filter", s.filter(o.Filter), "MaxSearchWindow", o.MaxSearchWindow, "CheckpointInterval", o.CheckpointInterval))
}

func (s session) SubscribeAll(ctx context.Context, o neutral.AllSubscription) (neutral.Feed, error) {
	out, err := s.do(s.subscribeAll(ctx, o))
	if err != nil {
		return nil, err
	}
	return &feed{shape: s.shape, sub: out[0], next: s.recv.subNext(out[0])}, nil
}

func (s *shape) subscribeStream(ctx context.Context, stream string, from *uint64, resolveLinks bool) request {
	return req("SubscribeToStream", ctx, stream, build(s.argType("SubscribeToStream", 2), "From", s.revision(from), "ResolveLinkTos", resolveLinks))
}

func (s session) SubscribeStream(ctx context.Context, stream string, from *uint64, resolveLinks bool) (neutral.Feed, error) {
	out, err := s.do(s.subscribeStream(ctx, stream, from, resolveLinks))
	if err != nil {
		return nil, err
	}
	return &feed{shape: s.shape, sub: out[0], next: s.recv.subNext(out[0])}, nil
}

// feed is an open catch-up subscription (a *Subscription). It is read by
// one goroutine at a time.
type feed struct {
	*shape
	sub  reflect.Value
	next func() reflect.Value
	live bool // the last of CaughtUp and FellBehind was CaughtUp
}

func (f *feed) Recv() neutral.Notice {
	m := f.next().Elem()
	c := f.notice
	switch {
	case !m.Field(c.dropped).IsNil():
		return neutral.Notice{Dropped: errorOf(m.Field(c.dropped).Elem().Field(f.dropped))}
	case !m.Field(c.appeared).IsNil():
		return neutral.Notice{Event: f.resolvedOf(m.Field(c.appeared))}
	case !m.Field(c.checkpoint).IsNil():
		p := m.Field(c.checkpoint).Elem()
		return neutral.Notice{Checkpoint: &projector.Checkpoint{Position: p.Field(f.position.commit).Uint(), Prepare: p.Field(f.position.prepare).Uint()}}
	case !m.Field(c.caughtUp).IsNil():
		f.live = true
		return neutral.Notice{CaughtUp: true}
	case !m.Field(c.fellBehind).IsNil():
		f.live = false
		return neutral.Notice{}
	}
	// Every field nil: a CaughtUp or a FellBehind without a timestamp (older
	// servers, and esdbtest, built on protocol types that have no such
	// field, send none, and KurrentDB-Client-Go then loses which of the two
	// it was). The server sends them in turn, CaughtUp first (a
	// subscription falls behind only after it was live).
	f.live = !f.live
	return neutral.Notice{CaughtUp: f.live}
}

func (f *feed) Close() error {
	_, err := call(f.sub, "Close")
	return err
}

func (s *shape) append(ctx context.Context, stream string, expected int64, events []neutral.NewEvent) request {
	want := s.names.anyRevision
	switch expected {
	case neutral.NoStream:
		want = s.names.noStream
	case neutral.AnyRevision:
	default:
		want = s.names.revision.Call(valuesOf(uint64(expected)))[0]
	}
	r := req("AppendToStream", ctx, stream, build(s.names.appending, s.expected, want))
	for _, e := range events {
		r.args = append(r.args, build(s.names.eventData, "EventID", e.ID, "EventType", e.Type,
			"ContentType", s.names.json, "Data", e.Data, "Metadata", e.Metadata))
	}
	return r
}

func (s session) Append(ctx context.Context, stream string, expected int64, events []neutral.NewEvent) (uint64, error) {
	out, err := s.do(s.append(ctx, stream, expected, events))
	if err != nil {
		return 0, err
	}
	return out[0].Elem().Field(s.written).Uint(), nil
}

// createGroup is the creation of group on stream.
func (s *shape) createGroup(ctx context.Context, stream, group string, g neutral.GroupSettings, f neutral.Filter) request {
	settings := reflect.New(s.names.settings.Type().Out(0))
	settings.Elem().Set(s.names.settings.Call(nil)[0])
	set(settings.Elem(), "ResolveLinkTos", g.ResolveLinks)
	if g.Strategy != "" {
		set(settings.Elem(), "ConsumerStrategyName", string(g.Strategy))
	}
	if g.MaxRetryCount > 0 {
		set(settings.Elem(), "MaxRetryCount", g.MaxRetryCount)
	}
	start := s.names.end
	if g.FromStart {
		start = s.names.start
		set(settings.Elem(), "StartFrom", start)
	}
	if stream == neutral.AllStreams {
		return req("CreatePersistentSubscriptionToAll", ctx, group,
			build(s.argType("CreatePersistentSubscriptionToAll", 2), "Settings", settings, "StartFrom", start, "Filter", s.filter(f)))
	}
	return req("CreatePersistentSubscription", ctx, stream, group,
		build(s.argType("CreatePersistentSubscription", 3), "Settings", settings, "StartFrom", start))
}

func (s session) CreateGroup(ctx context.Context, stream, group string, g neutral.GroupSettings, f neutral.Filter) error {
	_, err := s.do(s.createGroup(ctx, stream, group, g, f))
	return err
}

func (s *shape) subscribeGroup(ctx context.Context, stream, group string, bufferSize int) request {
	o := build(s.argType("SubscribeToPersistentSubscriptionToAll", 2), "BufferSize", bufferSize)
	if stream == neutral.AllStreams {
		return req("SubscribeToPersistentSubscriptionToAll", ctx, group, o)
	}
	return req("SubscribeToPersistentSubscription", ctx, stream, group, o)
}

func (s session) SubscribeGroup(ctx context.Context, stream, group string, bufferSize int) (neutral.GroupFeed, error) {
	out, err := s.do(s.subscribeGroup(ctx, stream, group, bufferSize))
	if err != nil {
		return nil, err
	}
	ack, nack := s.recv.settle(out[0])
	return groupFeed{s.shape, out[0], s.recv.groupNext(out[0]), ack, nack}, nil
}

// groupFeed is an open connection to a group (a *PersistentSubscription),
// and its Recv.
type groupFeed struct {
	*shape
	sub  reflect.Value
	next func() reflect.Value
	ack  func(any) error
	nack func(string, neutral.Action, any) error
}

func (g groupFeed) Recv() (*neutral.Resolved, int, error) {
	m := g.next().Elem()
	n := g.groupNotice
	switch {
	case !m.Field(n.dropped).IsNil():
		return nil, 0, errorOf(m.Field(n.dropped).Elem().Field(g.dropped))
	case m.Field(n.appeared).IsNil():
		return nil, 0, errors.New("empty message from the server")
	}
	appeared := m.Field(n.appeared).Elem()
	return g.resolvedOf(appeared.Field(n.event)), 1 + max(int(appeared.Field(n.retries).Int()), 0), nil
}

func (g groupFeed) Ack(re *neutral.Resolved) error { return g.ack(re.Handle) }

func (g groupFeed) Nack(reason string, a neutral.Action, re *neutral.Resolved) error {
	return g.nack(reason, a, re.Handle)
}

func (s *shape) groupInfo(ctx context.Context, group string) request {
	return req("GetPersistentSubscriptionInfoToAll", ctx, group, build(s.argType("GetPersistentSubscriptionInfoToAll", 2)))
}

func (s session) GroupInfo(ctx context.Context, group string) (neutral.GroupInfo, error) {
	out, err := s.do(s.groupInfo(ctx, group))
	if err != nil {
		return neutral.GroupInfo{}, err
	}
	info := out[0].Elem()
	g := neutral.GroupInfo{Name: info.Field(s.info.name).String(), Consumers: info.Field(s.info.conns).Len(),
		Live: liveStatus(info.Field(s.info.status).String())}
	if stats := info.Field(s.info.stats); !stats.IsNil() {
		g.Parked = stats.Elem().Field(s.info.parked).Int()
	}
	return g, nil
}

// liveStatus reports whether a group's status says it is live: the node
// writes its state flags (PersistentSubscriptionState) by name, "Behind"
// while it reads its source's history, "Live" once it reached the end
// (PersistentSubscription.SetLive), with "OutstandingPageRequest" or
// "ReplayingParkedMessages" beside.
func liveStatus(status string) bool {
	for f := range strings.SplitSeq(status, ",") {
		if strings.TrimSpace(f) == "Live" {
			return true
		}
	}
	return false
}

func (s *shape) listGroups(ctx context.Context) request {
	return req("ListPersistentSubscriptionsToAll", ctx, build(s.argType("ListPersistentSubscriptionsToAll", 1)))
}

func (s session) ListGroups(ctx context.Context) ([]string, error) {
	out, err := s.do(s.listGroups(ctx))
	gs := out[0]
	names := make([]string, 0, gs.Len())
	for i := range gs.Len() {
		names = append(names, gs.Index(i).Field(s.info.name).String())
	}
	return names, err
}

func (s *shape) replayParked(ctx context.Context, group string) request {
	return req("ReplayParkedMessagesToAll", ctx, group, build(s.argType("ReplayParkedMessagesToAll", 2)))
}

func (s session) ReplayParked(ctx context.Context, group string) error {
	_, err := s.do(s.replayParked(ctx, group))
	return err
}

// resolvedOf is the client's *ResolvedEvent v in the neutral package's terms
// (nil for nil).
func (s *shape) resolvedOf(v reflect.Value) *neutral.Resolved {
	if v.IsNil() {
		return nil
	}
	e := v.Elem()
	r := &neutral.Resolved{Event: s.recordedOf(e.Field(s.resolved.event)), Link: s.recordedOf(e.Field(s.resolved.link)), Handle: v.Interface()}
	if c := e.Field(s.resolved.commit); !c.IsNil() {
		r.Commit = c.Interface().(*uint64)
	}
	return r
}

// recordedOf is the client's *RecordedEvent v in the neutral package's
// terms (nil for nil).
func (s *shape) recordedOf(v reflect.Value) *neutral.Recorded {
	if v.IsNil() {
		return nil
	}
	e, f := v.Elem(), s.recorded
	p := e.Field(f.position)
	return &neutral.Recorded{
		ID: *e.Field(f.id).Addr().Interface().(*uuid.UUID), Type: e.Field(f.typ).String(), Stream: e.Field(f.stream).String(),
		Revision: e.Field(f.number).Uint(), Commit: p.Field(s.position.commit).Uint(), Prepare: p.Field(s.position.prepare).Uint(),
		Created: *e.Field(f.created).Addr().Interface().(*time.Time), Data: e.Field(f.data).Bytes(), Metadata: e.Field(f.metadata).Bytes(),
	}
}
