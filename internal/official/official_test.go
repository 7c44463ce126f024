package official

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// The adapter's shape on each client package it serves. (The adapter
// packages hold the same names; their suites run the adapter end to end.)
var shapes = map[string]func() (*shape, error){
	"kurrentdb": func() (*shape, error) {
		return newShape(reflect.TypeFor[*kurrentdb.Client](), kurrentdbNames())
	},
	"esdb": func() (*shape, error) {
		return newShape(reflect.TypeFor[*esdb.Client](), Names{
			Start: esdb.Start{}, End: esdb.End{}, NoStream: esdb.NoStream{}, Any: esdb.Any{}, Revision: esdb.Revision,
			Backwards: esdb.Backwards, ContentTypeJson: esdb.ContentTypeJson,
			EventFilterType: esdb.EventFilterType, StreamFilterType: esdb.StreamFilterType,
			ExcludeSystemEventsFilter: esdb.ExcludeSystemEventsFilter, SubscriptionSettingsDefault: esdb.SubscriptionSettingsDefault,
			PerEvent: PerEvent((*esdb.ReadStream).Recv, (*esdb.Subscription).Recv, (*esdb.PersistentSubscription).Recv,
				(*esdb.PersistentSubscription).Ack, (*esdb.PersistentSubscription).Nack),
		})
	},
}

// kurrentdbNames are what package kurrentdb declares that the adapter
// uses, as package kurrent gives them.
func kurrentdbNames() Names {
	return Names{
		Start: kurrentdb.Start{}, End: kurrentdb.End{}, NoStream: kurrentdb.NoStream{}, Any: kurrentdb.Any{},
		Revision: kurrentdb.Revision, Backwards: kurrentdb.Backwards, ContentTypeJson: kurrentdb.ContentTypeJson,
		EventFilterType: kurrentdb.EventFilterType, StreamFilterType: kurrentdb.StreamFilterType,
		ExcludeSystemEventsFilter: kurrentdb.ExcludeSystemEventsFilter, SubscriptionSettingsDefault: kurrentdb.SubscriptionSettingsDefault,
		PerEvent: PerEvent((*kurrentdb.ReadStream).Recv, (*kurrentdb.Subscription).Recv, (*kurrentdb.PersistentSubscription).Recv,
			(*kurrentdb.PersistentSubscription).Ack, (*kurrentdb.PersistentSubscription).Nack),
	}
}

// recordedOfClient builds the client's *RecordedEvent with the fields of
// the client's shape.
func recordedOfClient(s *shape, stream string, rev, commit uint64) reflect.Value {
	p := reflect.New(reflect.TypeOf(s.resolvedType()).Elem().Field(s.resolved.event).Type.Elem())
	set(p.Elem(), "EventID", uuid.MustParse("6f9619ff-8b86-d011-b42d-00c04fc964ff"), "EventType", "Opened",
		"ContentType", "application/json", "StreamID", stream, "EventNumber", rev,
		"Position", build(s.names.position, "Commit", commit, "Prepare", commit-1),
		"CreatedDate", time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC),
		"Data", []byte(`{"id":"c1"}`), "UserMetadata", []byte(`{"requestId":"r1"}`),
		"SystemMetadata", map[string]string{"type": "Opened"})
	return p
}

// resolvedType is a nil *ResolvedEvent of the client.
func (s *shape) resolvedType() any {
	m, _ := s.client.MethodByName("ReadStream")
	recv, _ := m.Type.Out(0).MethodByName("Recv")
	return reflect.Zero(recv.Type.Out(0)).Interface()
}

// envelope is the event the engine handles for a delivery of the event
// (and the link, when link is set) the client read, as the adapter maps it.
func envelope(s *shape, event, link reflect.Value) (projector.Event, error) {
	re := reflect.New(reflect.TypeOf(s.resolvedType()).Elem())
	if event.IsValid() {
		re.Elem().Field(s.resolved.event).Set(event)
	}
	if link.IsValid() {
		re.Elem().Field(s.resolved.link).Set(link)
	}
	r := s.resolvedOf(re)
	if r.Handle != re.Interface() {
		return projector.Event{}, errors.New("the handle is not the client's event")
	}
	e, err := neutral.Envelope(r.Event, r.Link, r.Commit)
	return e, err
}

func TestShape_maps_every_field_of_an_event_on_both_clients(t *testing.T) {
	for name, shapeOf := range shapes {
		s, err := shapeOf()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		e, err := envelope(s, recordedOfClient(s, "cart-c1", 4, 1234), reflect.Value{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e.ID != "6f9619ff-8b86-d011-b42d-00c04fc964ff" || e.Type != "Opened" || e.StreamID != "cart-c1" ||
			e.StreamRevision != 4 || e.Position != 1234 || string(e.Data) != `{"id":"c1"}` ||
			string(e.Metadata) != `{"requestId":"r1"}` || !e.Created.Equal(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: envelope %+v", name, e)
		}
		link := recordedOfClient(s, "$ce-cart", 99, 5000)
		if e, err := envelope(s, recordedOfClient(s, "cart-c1", 4, 1234), link); err != nil || e.StreamID != "cart-c1" || e.Position != 1234 {
			t.Errorf("%s: a link's envelope %+v, %v is not its original event", name, e, err)
		}
		if _, err := envelope(s, reflect.Value{}, link); !errors.Is(err, subscription.ErrUnresolvedLink) {
			t.Errorf("%s: a dangling link: %v", name, err)
		}
		if r := s.resolvedOf(reflect.ValueOf(s.resolvedType())); r != nil {
			t.Errorf("%s: a nil event is %+v", name, r)
		}
	}
}

func TestShape_builds_requests_with_the_values_asked(t *testing.T) {
	for name, shapeOf := range shapes {
		s, err := shapeOf()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r := s.createGroup(context.Background(), neutral.AllStreams, "g", neutral.GroupSettings{Strategy: neutral.Pinned, MaxRetryCount: 3, FromStart: true}, neutral.Filter{EventTypes: true, Prefixes: []string{"Cart"}})
		o := r.args[2]
		settings := o.FieldByName("Settings").Elem()
		if got := settings.FieldByName("ConsumerStrategyName").String(); got != "Pinned" {
			t.Errorf("%s: strategy %q", name, got)
		}
		if got := settings.FieldByName("MaxRetryCount").Int(); got != 3 {
			t.Errorf("%s: max retries %d", name, got)
		}
		if got := o.FieldByName("StartFrom").Elem().Type(); got != s.names.start.Type() {
			t.Errorf("%s: starts from %v", name, got)
		}
		f := o.FieldByName("Filter").Elem()
		if f.FieldByName("Type").Interface() != s.names.eventFilter.Interface() || f.FieldByName("Prefixes").Len() != 1 {
			t.Errorf("%s: filter %+v", name, f.Interface())
		}
		args := s.append(context.Background(), "s", 7, []neutral.NewEvent{{Type: "Opened", Data: []byte("{}")}}).args[2:]
		if len(args) != 2 || args[1].FieldByName("EventType").String() != "Opened" ||
			args[0].FieldByName(s.expected).Interface() != s.names.revision.Call(valuesOf(uint64(7)))[0].Interface() {
			t.Errorf("%s: append %v", name, args)
		}
	}
}

// oldClient stands for a client package whose API moved: it has no method
// the adapter reads with.
type oldClient struct{}

func (*oldClient) Close() error { return nil }

func TestNewDriver_refuses_a_client_of_another_shape_in_one_line(t *testing.T) {
	_, err := NewDriver(func() (*oldClient, error) { return &oldClient{}, nil }, nil, Names{Start: 1, End: 1, NoStream: 1, Any: 1,
		Revision: 1, Backwards: 1, ContentTypeJson: 1, EventFilterType: 1, StreamFilterType: 1, ExcludeSystemEventsFilter: 1, SubscriptionSettingsDefault: 1})
	if err == nil || !strings.Contains(err.Error(), "has no method ReadStream") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
	_, err = NewDriver(func() (*kurrentdb.Client, error) { return nil, nil }, nil, Names{})
	if err == nil || !strings.Contains(err.Error(), "Names.Start is not set") {
		t.Fatalf("err = %v", err)
	}
	// A name of the other client package is of another type: the dry run
	// of the requests finds it.
	wrong := kurrentdbNames()
	wrong.Start = esdb.Start{}
	_, err = NewDriver(func() (*kurrentdb.Client, error) { return nil, nil }, nil, wrong)
	if err == nil || !strings.Contains(err.Error(), "esdb.Start") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
	// The per-event calls of the other client package.
	names := kurrentdbNames()
	names.PerEvent = PerEvent((*esdb.ReadStream).Recv, (*esdb.Subscription).Recv, (*esdb.PersistentSubscription).Recv,
		(*esdb.PersistentSubscription).Ack, (*esdb.PersistentSubscription).Nack)
	_, err = NewDriver(func() (*kurrentdb.Client, error) { return nil, nil }, nil, names)
	if err == nil || !strings.Contains(err.Error(), "Names.PerEvent calls a *esdb.ReadStream") {
		t.Fatalf("err = %v", err)
	}
}

// movedClient is KurrentDB-Client-Go as a later version could declare it:
// every method and name the same, but RecordedEvent.EventNumber an int64.
type movedClient struct{ *kurrentdb.Client }

type movedRecorded struct {
	EventID      uuid.UUID
	EventType    string
	StreamID     string
	EventNumber  int64 // uint64 in v1.1.2
	Position     kurrentdb.Position
	CreatedDate  time.Time
	Data         []byte
	UserMetadata []byte
}

type movedResolved struct {
	Event, Link *movedRecorded
	Commit      *uint64
}

type movedReadStream struct{}

func (*movedReadStream) Recv() (*movedResolved, error) {
	return &movedResolved{Event: &movedRecorded{}}, nil
}
func (*movedReadStream) Close() {}

type movedGroup struct{}

func (*movedGroup) Recv() *kurrentdb.PersistentSubscriptionEvent               { return nil }
func (*movedGroup) Ack(...*movedResolved) error                                { return nil }
func (*movedGroup) Nack(string, kurrentdb.NackAction, ...*movedResolved) error { return nil }

func (*movedClient) ReadStream(context.Context, string, kurrentdb.ReadStreamOptions, uint64) (*movedReadStream, error) {
	return &movedReadStream{}, nil
}

// A field whose type moved (not its name) fails NewDriver in one line that
// names it, rather than panicking on the first event.
func TestNewDriver_refuses_a_client_whose_field_changed_its_type(t *testing.T) {
	moved := kurrentdbNames()
	moved.PerEvent = PerEvent((*movedReadStream).Recv, (*kurrentdb.Subscription).Recv, (*movedGroup).Recv, (*movedGroup).Ack, (*movedGroup).Nack)
	_, err := NewDriver(func() (*movedClient, error) { return &movedClient{}, nil }, nil, moved)
	if err == nil || !strings.Contains(err.Error(), "movedRecorded.EventNumber is a int64, not a uint64") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
	if _, err := NewDriver(func() (kurrentdb.Client, error) { return kurrentdb.Client{}, nil }, nil, Names{}); err == nil || !strings.Contains(err.Error(), "not a pointer") {
		t.Fatalf("a client that is not a pointer: %v", err)
	}
}
