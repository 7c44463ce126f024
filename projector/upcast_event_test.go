package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// sandboxRegistry is the board's registry with one more upcaster, last,
// from the name the type has now, that takes the whole event: the moves a
// test tenant made ({"tenant": "sandbox"} in their metadata) are dropped,
// whatever form they were stored in. seen gets each event it is given.
func sandboxRegistry(seen func(projector.Event)) *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[Moved](r, "CardMovedV3",
		projector.Renamed("CardShifted"),
		projector.Upcast("CardMoved", v1ToV2),
		projector.Upcast("CardMoved.v2", v2ToV3),
		projector.Upcast("CardMovedV3", func(e projector.Event) (json.RawMessage, error) {
			if seen != nil {
				seen(e)
			}
			var meta struct{ Tenant string }
			if len(e.Metadata) > 0 {
				if err := json.Unmarshal(e.Metadata, &meta); err != nil {
					return nil, fmt.Errorf("metadata: %w", err)
				}
			}
			if meta.Tenant == "sandbox" {
				return nil, projector.DropEvent
			}
			return e.Data, nil
		}))
	projector.Register[Archived](r, "CardArchived")
	return r
}

// An upcaster that takes an Event gets the event as stored, with its
// metadata, and the payload as the upcasters before it left it: it drops
// a tenant's events of every form, and passes the others on.
func TestUpcast_an_upcaster_of_the_whole_event_decides_by_its_metadata(t *testing.T) {
	var got []projector.Event
	r := sandboxRegistry(func(e projector.Event) { got = append(got, e) })
	p := laneProjection(r)
	sandbox := []byte(`{"tenant": "sandbox", "user": "qa-7"}`)
	for _, c := range []struct{ typ, data, want string }{
		{"CardMoved", `{"to": "Doing"}`, `{"column":{"name":"Doing","position":0}}`},
		{"CardMoved.v2", `{"column": {"name": "Doing"}}`, `{"column":{"name":"Doing","position":0}}`},
		{"CardShifted", `{"column": {"name": "Doing", "position": 2}}`, `{"column": {"name": "Doing", "position": 2}}`},
		{"CardMovedV3", `{"column": {"name": "Doing", "position": 2}}`, `{"column": {"name": "Doing", "position": 2}}`},
	} {
		for _, meta := range [][]byte{nil, []byte(`{"tenant": "acme"}`), sandbox} {
			got = nil
			ev, err := r.Decode(projector.Event{ID: "e-1", Type: c.typ, StreamID: "card-1", StreamRevision: 4, Data: []byte(c.data), Metadata: meta})
			if err != nil {
				t.Fatalf("%s with metadata %s: %v", c.typ, meta, err)
			}
			if len(got) != 1 {
				t.Fatalf("%s: the upcaster ran %d times, want once", c.typ, len(got))
			}
			// What the upcaster was given: the stored event, with the data
			// the steps before it gave (the v1 and v2 shapes upcast).
			in := got[0]
			if in.Type != c.typ || in.StreamID != "card-1" || in.StreamRevision != 4 || in.ID != "e-1" || string(in.Metadata) != string(meta) || in.Payload != nil {
				t.Fatalf("%s: the upcaster got %+v", c.typ, in)
			}
			if !jsonEqual(t, in.Data, []byte(c.want)) {
				t.Fatalf("%s: the upcaster got data %s, want %s", c.typ, in.Data, c.want)
			}
			if ev.Type != c.typ || string(ev.Data) != c.data {
				t.Fatalf("%s: the event's stored type and data changed: %s %s", c.typ, ev.Type, ev.Data)
			}
			m, moved := ev.Payload.(Moved)
			if dropped := string(meta) == string(sandbox); dropped {
				if moved || projector.Handles(p, ev) {
					t.Fatalf("%s: the sandbox's event decodes to %#v, and is handled: %v", c.typ, ev.Payload, projector.Handles(p, ev))
				}
				continue
			}
			if !moved || m.Column.Name != "Doing" {
				t.Fatalf("%s with metadata %s: %#v", c.typ, meta, ev.Payload)
			}
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// The engine moves a document past an event its upcaster dropped by its
// metadata, one by one and in a batch: the document is the fold of the
// other events, at the stream's last revision.
func TestUpcast_an_event_dropped_by_its_metadata_moves_its_document_past_it(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			r := sandboxRegistry(nil)
			p := laneProjection(r)
			e, s := laneEngine(t, r, p)
			log := projectortest.NewLog(r)
			sandbox := []byte(`{"tenant": "sandbox"}`)
			var evs []projector.Event
			for _, ev := range []projector.Event{
				{Type: "CardMovedV3", Data: []byte(`{"column": {"name": "Todo"}}`)},
				{Type: "CardMovedV3", Data: []byte(`{"column": {"name": "Doing"}}`), Metadata: sandbox},
				{Type: "CardMoved", Data: []byte(`{"to": "Done"}`), Metadata: []byte(`{"tenant": "acme"}`)},
				{Type: "CardMoved", Data: []byte(`{"to": "Done"}`), Metadata: sandbox},
				{Type: "CardMoved.v2", Data: []byte(`{"column": {"name": "Done"}}`)},
			} {
				evs = append(evs, log.MustAppend(t, "card-1", ev)...)
			}
			raw := make([]projector.Event, len(evs))
			for i, ev := range evs {
				ev.Payload = nil
				raw[i] = ev
			}
			handleAll(t, e, batched, raw)
			ctx := context.Background()
			if err := projectortest.CheckDocument(ctx, s, p, "1", evs); err != nil {
				t.Error(err)
			}
			var got lanes
			_, rev, err := projector.ReadDocument(ctx, s, p, "1", &got)
			want := map[string]int{"Todo": 1, "Done": 2}
			if err != nil || rev != 4 || !reflect.DeepEqual(got.Columns, want) {
				t.Fatalf("document %+v at revision %d (%v), want %v at 4: the sandbox's moves left out", got.Columns, rev, err, want)
			}
		})
	}
}

func TestUpcast_refuses_an_Event_as_a_result_or_a_pointer_to_one(t *testing.T) {
	for name, upcast := range map[string]func(){
		"an Event as the result": func() {
			projector.Upcast("CardMoved", func(e projector.Event) (projector.Event, error) { return e, nil })
		},
		"a pointer to an Event": func() {
			projector.Upcast("CardMoved", func(e *projector.Event) (Moved, error) { return Moved{}, nil })
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			upcast()
		})
	}
}

// An upcaster of the whole event, from the type's name now and listed
// last, sees every event of the type with its metadata: here it drops what
// a test tenant wrote, in every projection.
func ExampleUpcast_byMetadata() {
	type InspectionPassed struct {
		Permit string `json:"permit"`
	}
	r := projector.NewRegistry()
	projector.Register[InspectionPassed](r, "InspectionPassed",
		projector.Renamed("InspectionOk"),
		projector.Upcast("InspectionPassed", func(e projector.Event) (json.RawMessage, error) {
			var meta struct{ Tenant string }
			_ = json.Unmarshal(e.Metadata, &meta) // no metadata: no tenant
			if meta.Tenant == "sandbox" {
				return nil, projector.DropEvent
			}
			return e.Data, nil
		}))
	for _, ev := range []projector.Event{
		{Type: "InspectionPassed", Data: []byte(`{"permit": "p-1"}`), Metadata: []byte(`{"tenant": "city"}`)},
		{Type: "InspectionOk", Data: []byte(`{"permit": "p-2"}`), Metadata: []byte(`{"tenant": "sandbox"}`)},
		{Type: "InspectionOk", Data: []byte(`{"permit": "p-3"}`)},
	} {
		ev, err := r.Decode(ev)
		_, kept := ev.Payload.(InspectionPassed)
		fmt.Println(ev.Type, string(ev.Data), kept, err)
	}
	// Output:
	// InspectionPassed {"permit": "p-1"} true <nil>
	// InspectionOk {"permit": "p-2"} false <nil>
	// InspectionOk {"permit": "p-3"} true <nil>
}

// panicky is a shape whose JSON encoding panics.
type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("a broken MarshalJSON") }

// An upcaster of the whole event after one that gives a value whose JSON
// encoding panics: the event is undecodable, the process goes on.
func TestUpcast_a_whole_event_upcaster_after_a_panicking_encoding_fails_the_event_only(t *testing.T) {
	r := projector.NewRegistry()
	projector.Register[Moved](r, "CardMovedV3",
		projector.Upcast("CardMoved", func(cardMovedV1) (panicky, error) { return panicky{}, nil }),
		projector.Upcast("CardMoved.v2", func(projector.Event) (Moved, error) { return Moved{}, nil }))
	_, err := decode(t, r, "CardMoved", `{"to": "Done"}`)
	if !errors.Is(err, projector.ErrUndecodable) || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("%v, want the event undecodable, saying it panicked", err)
	}
}
