// Package official is the adapter of the event-store sources to the
// official Go clients, written once for both: KurrentDB-Client-Go (package
// kurrentdb) and EventStore-Client-Go v4 (package esdb) are generated from
// the same protocol and declare the same API, method for method and field
// for field, each under its own types. The adapter reaches a client through
// reflection over that shared shape, so that a fix lands once.
//
// Each adapter package (kurrent, subscription/esdbv4) parses its connection
// string with its own package and gives [NewDriver] its client's
// constructor, how its errors are classified, and the few values that
// cannot be found from the client's methods ([Names]). NewDriver finds every
// type and field the adapter uses, and builds every request once, before it
// returns: a client whose API moved fails there, with one line that names
// what is missing, not in the middle of a run.
package official

import (
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"

	"github.com/revgate/projector/internal/neutral"
)

// Names are what a client package declares that the adapter uses and
// cannot reach from the client's methods, each as the package spells it.
type Names struct {
	// Start, End, NoStream and Any are the package's values of these types
	// (kurrentdb.Start{}, ...).
	Start, End, NoStream, Any any
	// Revision is the package's function Revision.
	Revision any
	// Backwards, ContentTypeJson, EventFilterType and StreamFilterType are
	// the package's constants of these names.
	Backwards, ContentTypeJson, EventFilterType, StreamFilterType any
	// ExcludeSystemEventsFilter and SubscriptionSettingsDefault are the
	// package's functions of these names.
	ExcludeSystemEventsFilter, SubscriptionSettingsDefault any
	// PerEvent is the methods the adapter calls once an event ([PerEvent]).
	PerEvent PerEventCalls
}

// PerEventCalls are the methods that the adapter calls once an event: the
// Recv methods of a read, of a catch-up subscription and of a persistent
// one, and the persistent one's Ack and Nack. It calls them directly, not
// through reflection, which would cost more than the rest of an event's way
// through the adapter.
type PerEventCalls struct {
	read, sub, group reflect.Type // *ReadStream, *Subscription, *PersistentSubscription
	resolved         reflect.Type // *ResolvedEvent, what Ack and Nack take
	// Each returns the function that receives the next answer of one
	// read or subscription.
	readNext  func(reflect.Value) func() (reflect.Value, error)
	subNext   func(reflect.Value) func() reflect.Value
	groupNext func(reflect.Value) func() reflect.Value
	// settle returns the Ack and Nack of one persistent subscription, on
	// the client's events (the Handle of a neutral.Resolved).
	settle func(reflect.Value) (ack func(any) error, nack func(string, neutral.Action, any) error)
}

// PerEvent returns the PerEventCalls of a client package from the method
// expressions of its methods: (*ReadStream).Recv, (*Subscription).Recv,
// (*PersistentSubscription).Recv, (*PersistentSubscription).Ack and
// (*PersistentSubscription).Nack.
func PerEvent[R, E, S, N, G, M any, A ~int32](read func(R) (E, error), sub func(S) N, group func(G) M,
	ack func(G, ...E) error, nack func(G, string, A, ...E) error) PerEventCalls {
	return PerEventCalls{
		read: reflect.TypeFor[R](), sub: reflect.TypeFor[S](), group: reflect.TypeFor[G](), resolved: reflect.TypeFor[E](),
		readNext: func(v reflect.Value) func() (reflect.Value, error) {
			r := v.Interface().(R)
			return func() (reflect.Value, error) {
				e, err := read(r)
				return reflect.ValueOf(e), err
			}
		},
		subNext: func(v reflect.Value) func() reflect.Value {
			s := v.Interface().(S)
			return func() reflect.Value { return reflect.ValueOf(sub(s)) }
		},
		groupNext: func(v reflect.Value) func() reflect.Value {
			g := v.Interface().(G)
			return func() reflect.Value { return reflect.ValueOf(group(g)) }
		},
		settle: func(v reflect.Value) (func(any) error, func(string, neutral.Action, any) error) {
			g := v.Interface().(G)
			return func(handle any) error { return ack(g, handle.(E)) },
				func(reason string, a neutral.Action, handle any) error { return nack(g, reason, A(a), handle.(E)) }
		},
	}
}

// NewDriver returns the [neutral.Driver] of the client that open builds
// (one call, one client), whose errors kind classifies, and whose package
// declares names. It fails when the client does not have the shape the
// adapter uses.
func NewDriver[C any](open func() (C, error), kind func(error) neutral.ErrorKind, names Names) (neutral.Driver, error) {
	s, err := newShape(reflect.TypeFor[C](), names)
	if err != nil {
		return nil, err
	}
	return driver{s, func() (any, error) { return open() }, kind}, nil
}

// driver is [neutral.Driver] on one client package.
type driver struct {
	*shape
	open func() (any, error)
	kind func(error) neutral.ErrorKind
}

func (d driver) Open() (neutral.Session, error) {
	cl, err := d.open()
	if err != nil {
		return nil, err
	}
	return session{d.shape, reflect.ValueOf(cl)}, nil
}

func (d driver) Kind(err error) neutral.ErrorKind { return d.kind(err) }

// shape is what the adapter found in a client package: its names, the
// types of the client's requests and answers, and the fields it reads of
// the answers that come once an event.
type shape struct {
	client reflect.Type // *Client
	recv   PerEventCalls
	names  struct {
		start, end, noStream, anyRevision, revision        reflect.Value
		backwards, json, eventFilter, streamFilter         reflect.Value
		excludeSystemEvents, settings                      reflect.Value
		position, filter, eventData, nackAction, appending reflect.Type
	}
	// expected is the field of an append's options that holds the expected
	// revision (StreamState; ExpectedRevision in v4).
	expected string
	// The fields of the answers, by index.
	resolved    struct{ event, link, commit int }
	recorded    struct{ id, typ, stream, number, position, created, data, metadata int }
	position    struct{ commit, prepare int }
	notice      struct{ appeared, dropped, checkpoint, caughtUp, fellBehind int }
	groupNotice struct{ appeared, dropped, event, retries int }
	dropped     int // SubscriptionDropped.Error
	info        struct{ name, status, stats, parked, conns int }
	written     int // WriteResult.CommitPosition
}

// newShape finds in client (the *Client type) and names what the adapter
// uses, and builds each request once.
func newShape(client reflect.Type, names Names) (s *shape, err error) {
	if client.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("official: the client is a %v, not a pointer to a client package's Client", client)
	}
	s = &shape{client: client}
	l := lookup{pkg: client.Elem().PkgPath()}
	n := &s.names
	n.start, n.end, n.noStream, n.anyRevision = l.value(names.Start, "Start"), l.value(names.End, "End"), l.value(names.NoStream, "NoStream"), l.value(names.Any, "Any")
	n.revision = l.value(names.Revision, "Revision")
	n.backwards, n.json = l.value(names.Backwards, "Backwards"), l.value(names.ContentTypeJson, "ContentTypeJson")
	n.eventFilter, n.streamFilter = l.value(names.EventFilterType, "EventFilterType"), l.value(names.StreamFilterType, "StreamFilterType")
	n.excludeSystemEvents = l.value(names.ExcludeSystemEventsFilter, "ExcludeSystemEventsFilter")
	n.settings = l.value(names.SubscriptionSettingsDefault, "SubscriptionSettingsDefault")
	s.recv = names.PerEvent
	s.findEvents(&l)
	s.findSubscriptions(&l)
	s.findWrites(&l)
	if l.err != nil {
		return nil, l.err
	}
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("%s: %v", l.pkg, p)
		}
	}()
	s.buildAll()
	return s, nil
}

// findEvents finds the types and fields of the events a read returns.
func (s *shape) findEvents(l *lookup) {
	read := l.out(s.client, "ReadStream", 0)
	l.same(s.recv.read, read, "read")
	resolved := l.out(read, "Recv", 0)
	l.same(s.recv.resolved, resolved, "event")
	ptr, u64 := reflect.Pointer, reflect.TypeFor[uint64]()
	s.resolved.event, s.resolved.link = l.field(resolved, "Event", ptr), l.field(resolved, "Link", ptr)
	s.resolved.commit = l.field(resolved, "Commit", reflect.TypeFor[*uint64]())
	recorded := l.fieldType(resolved, "Event")
	r, str, bytes := &s.recorded, reflect.TypeFor[string](), reflect.TypeFor[[]byte]()
	r.id, r.typ = l.field(recorded, "EventID", reflect.TypeFor[uuid.UUID]()), l.field(recorded, "EventType", str)
	r.stream, r.number = l.field(recorded, "StreamID", str), l.field(recorded, "EventNumber", u64)
	r.position, r.created = l.field(recorded, "Position", reflect.Struct), l.field(recorded, "CreatedDate", reflect.TypeFor[time.Time]())
	r.data, r.metadata = l.field(recorded, "Data", bytes), l.field(recorded, "UserMetadata", bytes)
	s.names.position = l.fieldType(recorded, "Position")
	s.position.commit, s.position.prepare = l.field(s.names.position, "Commit", u64), l.field(s.names.position, "Prepare", u64)
}

// findSubscriptions finds the types and fields of the messages of the
// catch-up and persistent subscriptions.
func (s *shape) findSubscriptions(l *lookup) {
	sub := l.out(s.client, "SubscribeToAll", 0)
	l.same(s.recv.sub, sub, "catch-up subscription")
	notice, ptr := l.out(sub, "Recv", 0), reflect.Pointer
	c := &s.notice
	c.appeared = l.field(notice, "EventAppeared", l.out(l.out(s.client, "ReadStream", 0), "Recv", 0))
	var position any = ptr
	if s.names.position != nil {
		position = reflect.PointerTo(s.names.position)
	}
	c.dropped, c.checkpoint = l.field(notice, "SubscriptionDropped", ptr), l.field(notice, "CheckPointReached", position)
	c.caughtUp, c.fellBehind = l.field(notice, "CaughtUp", ptr), l.field(notice, "FellBehind", ptr)
	s.dropped = l.field(l.fieldType(notice, "SubscriptionDropped"), "Error", reflect.TypeFor[error]())
	s.names.filter = l.fieldType(l.in(s.client, "SubscribeToAll", 1), "Filter")

	group := l.out(s.client, "SubscribeToPersistentSubscriptionToAll", 0)
	l.same(s.recv.group, group, "persistent subscription")
	groupNotice := l.out(group, "Recv", 0)
	g := &s.groupNotice
	g.appeared, g.dropped = l.field(groupNotice, "EventAppeared", ptr), l.field(groupNotice, "SubscriptionDropped", l.fieldType(notice, "SubscriptionDropped"))
	appeared := l.fieldType(groupNotice, "EventAppeared")
	g.event, g.retries = l.field(appeared, "Event", l.out(l.out(s.client, "ReadStream", 0), "Recv", 0)), l.field(appeared, "RetryCount", reflect.Int)
	s.names.nackAction = l.in(group, "Nack", 1)

	info := l.out(s.client, "GetPersistentSubscriptionInfoToAll", 0)
	s.info.name, s.info.stats = l.field(info, "GroupName", reflect.TypeFor[string]()), l.field(info, "Stats", ptr)
	s.info.parked = l.field(l.fieldType(info, "Stats"), "ParkedMessagesCount", reflect.Int64)
	s.info.conns = l.field(info, "Connections", reflect.Slice)
	s.info.status = l.field(info, "Status", reflect.TypeFor[string]())
}

// findWrites finds the types and fields of an append.
func (s *shape) findWrites(l *lookup) {
	s.names.appending = l.in(s.client, "AppendToStream", 2)
	s.expected = "StreamState"
	if t := s.names.appending; t != nil {
		if _, ok := t.FieldByName(s.expected); !ok {
			s.expected = "ExpectedRevision"
		}
	}
	if events := l.in(s.client, "AppendToStream", 3); events != nil {
		s.names.eventData = events.Elem()
	}
	s.written = l.field(l.out(s.client, "AppendToStream", 0), "CommitPosition", reflect.TypeFor[uint64]())
}

// lookup finds methods, fields and names, and keeps the first that is
// missing. A type it could not find is nil, and what is looked up in it is
// missing too.
type lookup struct {
	pkg string
	err error
}

func (l *lookup) fail(format string, args ...any) {
	if l.err == nil {
		l.err = fmt.Errorf("%s: "+format+" (the adapter does not know this version of the client)", append([]any{l.pkg}, args...)...)
	}
}

// same checks that the type of what [Names.PerEvent] calls is the
// client's.
func (l *lookup) same(got, want reflect.Type, what string) {
	if want != nil && got != want {
		l.fail("Names.PerEvent calls a %v as a %s, not the client's %v", got, what, want)
	}
}

// value is the reflect value of a name, which must be set.
func (l *lookup) value(v any, name string) reflect.Value {
	if v == nil {
		l.fail("Names.%s is not set", name)
	}
	return reflect.ValueOf(v)
}

// method is the method name of t, with its receiver as its first argument.
func (l *lookup) method(t reflect.Type, name string) reflect.Type {
	if t == nil {
		return nil
	}
	m, ok := t.MethodByName(name)
	if !ok {
		l.fail("%s has no method %s", t, name)
		return nil
	}
	return m.Type
}

// in is the type of argument i of method name of t, after the receiver.
func (l *lookup) in(t reflect.Type, name string, i int) reflect.Type {
	m := l.method(t, name)
	if m == nil {
		return nil
	}
	if m.NumIn() <= i+1 {
		l.fail("%s.%s has no argument %d", t, name, i)
		return nil
	}
	return m.In(i + 1)
}

// out is the type of result i of method name of t.
func (l *lookup) out(t reflect.Type, name string, i int) reflect.Type {
	m := l.method(t, name)
	if m == nil {
		return nil
	}
	if m.NumOut() <= i {
		l.fail("%s.%s has no result %d", t, name, i)
		return nil
	}
	return m.Out(i)
}

// field is the index of field name of the struct t (or *t), which is of
// the type want (a reflect.Type) or of its kind (a reflect.Kind): what the
// adapter reads of it.
func (l *lookup) field(t reflect.Type, name string, want any) int {
	if t == nil {
		return 0
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	f, ok := reflect.StructField{}, false
	if t.Kind() == reflect.Struct {
		f, ok = t.FieldByName(name)
	}
	if !ok || len(f.Index) != 1 {
		l.fail("%s has no field %s", t, name)
		return 0
	}
	switch w := want.(type) {
	case reflect.Type:
		if f.Type != w {
			l.fail("%s.%s is a %v, not a %v", t, name, f.Type, w)
		}
	case reflect.Kind:
		if f.Type.Kind() != w {
			l.fail("%s.%s is a %v, not a %v", t, name, f.Type, w)
		}
	}
	return f.Index[0]
}

// fieldType is the type of field name of the struct t (or *t).
func (l *lookup) fieldType(t reflect.Type, name string) reflect.Type {
	i := l.field(t, name, nil)
	if t == nil || l.err != nil {
		return nil
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Field(i).Type
}
