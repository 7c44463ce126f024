package projector_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/revgate/projector/projector"
)

// Three shapes of one event, as a board's card moves were stored over the
// years: "CardMoved" {"to": "Done"} (v1, a column name), then
// "CardMoved.v2" {"column": {"name": "Done"}} (v2), and now "CardMovedV3"
// {"column": {"name": "Done", "position": 0}}; and "CardShifted", an old
// name of the v3 shape.
type cardMovedV1 struct {
	To string `json:"to"`
}

type column struct {
	Name     string `json:"name"`
	Position int    `json:"position"`
}

type cardMovedV2 struct {
	Column struct {
		Name string `json:"name"`
	} `json:"column"`
}

type Moved struct {
	Column column `json:"column"`
}

type Archived struct{}

func v1ToV2(old cardMovedV1) (cardMovedV2, error) {
	if old.To == "" {
		return cardMovedV2{}, errors.New("a v1 move with no column")
	}
	if old.To == "-" {
		return cardMovedV2{}, projector.DropEvent // a move to nowhere: none
	}
	var v2 cardMovedV2
	v2.Column.Name = old.To
	return v2, nil
}

func v2ToV3(old cardMovedV2) (Moved, error) {
	return Moved{Column: column{Name: old.Column.Name}}, nil
}

func boardRegistry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[Moved](r, "CardMovedV3",
		projector.Renamed("CardShifted"),
		projector.Upcast("CardMoved", v1ToV2),
		projector.Upcast("CardMoved.v2", v2ToV3))
	projector.Register[Archived](r, "CardArchived")
	return r
}

func decode(t *testing.T, r *projector.Registry, typ, data string) (projector.Event, error) {
	t.Helper()
	return r.Decode(projector.Event{ID: "e-1", Type: typ, StreamID: "card-1", StreamRevision: 4, Data: []byte(data)})
}

func TestUpcast_chained_upcasters_take_v1_through_v2_to_v3(t *testing.T) {
	r := boardRegistry()
	for _, c := range []struct{ name, typ, data string }{
		{"v1, two upcasters", "CardMoved", `{"to": "Done"}`},
		{"v2, one upcaster", "CardMoved.v2", `{"column": {"name": "Done"}}`},
		{"v3, as it is", "CardMovedV3", `{"column": {"name": "Done"}}`},
		{"renamed v3", "CardShifted", `{"column": {"name": "Done"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev, err := decode(t, r, c.typ, c.data)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Moved{Column: column{Name: "Done"}}); ev.Payload != want {
				t.Fatalf("payload %#v, want %#v", ev.Payload, want)
			}
			if ev.Type != c.typ || string(ev.Data) != c.data {
				t.Fatalf("the stored type and data changed: %q %s", ev.Type, ev.Data)
			}
		})
	}
}

// One old shape stored under two names (v1 renamed, then v2 in a new
// shape): the old name upcast into the old shape by the identity enters
// the chain at the same step as the renamed v1, as the README shows.
func TestUpcast_one_old_shape_under_two_names_through_an_identity_step(t *testing.T) {
	r := projector.NewRegistry()
	projector.Register[Moved](r, "CardMovedV2",
		projector.Upcast("CardMovedOld", func(e cardMovedV1) (cardMovedV1, error) { return e, nil }),
		projector.Upcast("CardMoved.v1", func(e cardMovedV1) (Moved, error) { return Moved{Column: column{Name: e.To}}, nil }))
	for _, typ := range []string{"CardMovedOld", "CardMoved.v1"} {
		ev, err := decode(t, r, typ, `{"to": "Done"}`)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if want := (Moved{Column: column{Name: "Done"}}); ev.Payload != want {
			t.Fatalf("%s: payload %#v, want %#v", typ, ev.Payload, want)
		}
	}
}

func TestUpcast_a_rename_is_registered_and_encodes_under_the_name_now(t *testing.T) {
	r := boardRegistry()
	if !r.Has("CardShifted") || !r.Has("CardMoved") || r.Has("CardMovedV4") {
		t.Fatal("Has: want the old names and versions registered, and no others")
	}
	name, _, err := r.Encode(Moved{})
	if err != nil || name != "CardMovedV3" {
		t.Fatalf("Encode: %q, %v; want CardMovedV3", name, err)
	}
}

func TestUpcast_raw_JSON_upcasters_chain_with_typed_ones(t *testing.T) {
	r := projector.NewRegistry()
	rename := func(from, to string) func(json.RawMessage) (json.RawMessage, error) {
		return func(in json.RawMessage) (json.RawMessage, error) {
			var m map[string]any
			if err := json.Unmarshal(in, &m); err != nil {
				return nil, err
			}
			m[to] = m[from]
			delete(m, from)
			return json.Marshal(m)
		}
	}
	projector.Register[Moved](r, "CardMoved.v3",
		projector.Upcast("CardMoved", rename("target", "to")), // v0: {"target": ...}, JSON to JSON
		projector.Upcast("CardMoved.v1", v1ToV2),              // the JSON decodes into cardMovedV1
		projector.Upcast("CardMoved.v2", v2ToV3))
	ev, err := decode(t, r, "CardMoved", `{"target": "Review"}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Moved{Column: column{Name: "Review"}}); ev.Payload != want {
		t.Fatalf("payload %#v, want %#v", ev.Payload, want)
	}
}

// An upcaster from the name the type has now repairs the payloads a
// producer's bug stored under it in a shape that does not decode, and
// passes the others on: both decode.
func TestUpcast_an_upcaster_from_the_name_now_repairs_its_bad_payloads(t *testing.T) {
	bare := projector.NewRegistry()
	projector.Register[Moved](bare, "CardMoved.v3")
	if _, err := decode(t, bare, "CardMoved.v3", `{"column": "Done"}`); !errors.Is(err, projector.ErrUndecodable) {
		t.Fatalf("the bad payload decodes without the repair: %v", err)
	}
	r := projector.NewRegistry()
	projector.Register[Moved](r, "CardMoved.v3", projector.Upcast("CardMoved.v3", func(in json.RawMessage) (json.RawMessage, error) {
		var bad struct{ Column string }
		if json.Unmarshal(in, &bad) != nil {
			return in, nil // the column is an object: good as it is
		}
		return json.Marshal(map[string]any{"column": map[string]any{"name": bad.Column}})
	}))
	for _, data := range []string{`{"column": "Done"}`, `{"column": {"name": "Done"}}`} {
		ev, err := decode(t, r, "CardMoved.v3", data)
		if err != nil || ev.Payload != (Moved{Column: column{Name: "Done"}}) {
			t.Errorf("%s: %#v, %v", data, ev.Payload, err)
		}
	}
}

func TestUpcast_an_upcaster_may_turn_an_event_into_none(t *testing.T) {
	r := boardRegistry()
	ev, err := decode(t, r, "CardMoved", `{"to": "-"}`)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Payload == nil {
		t.Fatal("a dropped event has no payload: it would pass for an event of an unknown type")
	}
	p := laneProjection(r).FailUnknownTypes()
	if projector.Handles(p, ev) {
		t.Fatal("the projection handles a dropped event")
	}
	before := lanes{Columns: map[string]int{"Done": 1}}
	after, err := p.Apply(before, ev)
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("a dropped event changed the state: %+v, %v", after, err)
	}
}

func TestUpcast_a_failing_upcaster_is_an_undecodable_event_that_names_the_step(t *testing.T) {
	r := projector.NewRegistry()
	projector.Register[Moved](r, "CardMovedV3",
		projector.Upcast("CardMoved", v1ToV2),
		projector.Upcast("CardMoved.v2", func(cardMovedV2) (Moved, error) { panic("v2 is broken") }))
	for _, c := range []struct{ name, data, want string }{
		{"an error", `{"to": ""}`, `upcaster 1 of 2 of CardMovedV3 (from "CardMoved", projector_test.cardMovedV1 to projector_test.cardMovedV2): a v1 move with no column`},
		{"a panic", `{"to": "Done"}`, `upcaster 2 of 2 of CardMovedV3 (from "CardMoved.v2", projector_test.cardMovedV2 to projector_test.Moved): panicked: v2 is broken`},
		{"JSON that does not decode into the older shape", `{"to": 7}`, `upcaster 1 of 2 of CardMovedV3 (from "CardMoved", projector_test.cardMovedV1 to projector_test.cardMovedV2): decode into projector_test.cardMovedV1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(t, r, "CardMoved", c.data)
			if !errors.Is(err, projector.ErrUndecodable) {
				t.Fatalf("error %v, want one wrapping ErrUndecodable", err)
			}
			for _, part := range []string{"CardMoved event e-1", `stream "card-1", revision 4`, c.want} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %q", err, part)
				}
			}
		})
	}
}

func TestUpcast_versions_from_a_metadata_field(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[Moved](r, "CardMoved",
		projector.Upcast("CardMoved.v1", v1ToV2),
		projector.Upcast("CardMoved.v2", v2ToV3))
	for _, meta := range []string{`{"schemaVersion": 1}`, `{"schemaVersion": "1"}`, `{"schemaVersion": "v1", "other": true}`, `{"schemaVersion": 1.0}`, `{"schemaVersion": "1.0"}`} {
		ev, err := r.Decode(projector.Event{Type: "CardMoved", Metadata: []byte(meta), Data: []byte(`{"to": "Done"}`)})
		if err != nil || ev.Payload != (Moved{Column: column{Name: "Done"}}) {
			t.Errorf("metadata %s: %#v, %v", meta, ev.Payload, err)
		}
	}
	// Every version is stored as type CardMoved: a filter by event type
	// that reads it reads them all; and an event stored under the name
	// "CardMoved.v1" itself (a log that had its versions in its type
	// names before) decodes as that form, so the filter reads it too.
	if got := projector.HandledTypes(r, laneProjection(r)); !slices.Equal(got, []string{"CardMoved", "CardMoved.v1", "CardMoved.v2"}) {
		t.Errorf("HandledTypes = %q, want [CardMoved CardMoved.v1 CardMoved.v2]", got)
	}
	for _, name := range []string{"CardMoved.v1", "CardMoved.v2"} {
		if ev, err := r.Decode(projector.Event{Type: name, Data: []byte(`{"to": "Done"}`)}); err != nil || ev.Payload == nil {
			t.Errorf("an event stored as %s: %#v, %v: want it decoded, as the filter lets it through", name, ev.Payload, err)
		}
	}
	// A type whose name now looks like a version is stored under that name
	// (Encode names its events so), beside the older form's T.
	named := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[Moved](named, "CardMoved.v3", projector.Upcast("CardMoved", v1ToV2), projector.Upcast("CardMoved.v2", v2ToV3))
	if got := projector.HandledTypes(named, laneProjection(named)); !slices.Equal(got, []string{"CardMoved", "CardMoved.v2", "CardMoved.v3"}) {
		t.Errorf("HandledTypes = %q, want [CardMoved CardMoved.v2 CardMoved.v3]", got)
	}
	// Version 3 (the type now) has no form of its own, and no version is
	// the type's name: both decode as they are.
	for _, meta := range []string{`{"schemaVersion": 3}`, `{}`, ``, `not json`, `{"schemaVersion": null}`, `{"schemaVersion": ""}`} {
		ev, err := r.Decode(projector.Event{Type: "CardMoved", Metadata: []byte(meta), Data: []byte(`{"column": {"name": "Done", "position": 2}}`)})
		if err != nil || ev.Payload != (Moved{Column: column{Name: "Done", Position: 2}}) {
			t.Errorf("metadata %q: %#v, %v", meta, ev.Payload, err)
		}
	}
	// A version newer than the registry knows is read as the type now;
	// when its payload does not fit, the error says which version it was.
	_, err := r.Decode(projector.Event{Type: "CardMoved", Metadata: []byte(`{"schemaVersion": 4}`), Data: []byte(`{"column": "Done"}`)})
	if want := "(its metadata names version 4, and no form is registered as CardMoved.v4: read as CardMoved)"; !errors.Is(err, projector.ErrUndecodable) || !strings.Contains(err.Error(), want) {
		t.Errorf("version 4, not registered: %v; want it undecodable, saying %q", err, want)
	}
	// A field that holds no version: the shape cannot be told, and the
	// event does not decode (it did as the current shape).
	for _, meta := range []string{`{"schemaVersion": "one"}`, `{"schemaVersion": {"major": 1}}`, `{"schemaVersion": -1}`, `{"schemaVersion": "1.0.0"}`, `{"schemaVersion": 1.5}`} {
		_, err := r.Decode(projector.Event{Type: "CardMoved", Metadata: []byte(meta), Data: []byte(`{"column": {"name": "Done"}}`)})
		if !errors.Is(err, projector.ErrUndecodable) || !strings.Contains(err.Error(), `its metadata's "schemaVersion" is `) {
			t.Errorf("metadata %s: %v, want it undecodable for its version", meta, err)
		}
	}
}

func TestRegister_refuses_upcasters_that_do_not_chain(t *testing.T) {
	for name, register := range map[string]func(){
		"a step's result is not the next one's input": func() {
			projector.Register[Moved](projector.NewRegistry(), "CardMoved.v3",
				projector.Upcast("CardMoved", func(cardMovedV1) (cardMovedV1, error) { return cardMovedV1{}, nil }),
				projector.Upcast("CardMoved.v2", v2ToV3))
		},
		"the last step does not give the registered type": func() {
			projector.Register[Moved](projector.NewRegistry(), "CardMoved.v3", projector.Upcast("CardMoved", v1ToV2))
		},
		"an old name given twice": func() {
			projector.Register[Moved](projector.NewRegistry(), "CardMoved.v3", projector.Renamed("CardMoved"), projector.Upcast("CardMoved", v2ToV3))
		},
		"an old name that is another type's": func() {
			r := projector.NewRegistry()
			projector.Register[Archived](r, "CardArchived")
			projector.Register[Moved](r, "CardMoved", projector.Renamed("CardArchived"))
		},
		"an old form given again with another upcaster": func() {
			r := projector.NewRegistry()
			projector.Register[Moved](r, "CardMovedV3", projector.Upcast("CardMoved", func(cardMovedV1) (Moved, error) { return Moved{}, nil }))
			projector.Register[Moved](r, "CardMovedV3", projector.Upcast("CardMoved", func(old cardMovedV1) (Moved, error) {
				return Moved{Column: column{Name: old.To}}, nil
			}))
		},
		"a repair from the name now before an older form's upcaster": func() {
			mend := func(in json.RawMessage) (json.RawMessage, error) { return in, nil }
			projector.Register[Moved](projector.NewRegistry(), "CardMoved.v3", projector.Upcast("CardMoved.v3", mend), projector.Upcast("CardMoved.v2", v2ToV3))
		},
		"an empty name": func() {
			projector.Register[Moved](projector.NewRegistry(), "")
		},
		"an empty old name": func() {
			projector.Register[Moved](projector.NewRegistry(), "CardMoved", projector.Renamed(" "))
		},
		"[]byte for raw JSON": func() {
			projector.Upcast("CardMoved", func(b []byte) (Moved, error) { return Moved{}, nil })
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			register()
		})
	}
}

// Registering a type again as it was registered (a helper called twice)
// is no error, and changes nothing.
func TestRegister_the_same_registration_twice_is_one(t *testing.T) {
	r := boardRegistry()
	projector.Register[Moved](r, "CardMovedV3", projector.Renamed("CardShifted"), projector.Upcast("CardMoved", v1ToV2), projector.Upcast("CardMoved.v2", v2ToV3))
	if ev, err := decode(t, r, "CardMoved", `{"to": "Done"}`); err != nil || ev.Payload != (Moved{Column: column{Name: "Done"}}) {
		t.Errorf("%+v, %v", ev.Payload, err)
	}
}

// An event with no body at all (a client may write one with no data) of a
// type with no fields is that type's zero value, not an undecodable one.
func TestRegistry_an_event_with_no_body_decodes_as_the_zero_value(t *testing.T) {
	r := boardRegistry()
	for _, data := range [][]byte{nil, {}, []byte(" ")} {
		ev, err := r.Decode(projector.Event{ID: "e", Type: "CardArchived", StreamID: "card-1", Data: data})
		if err != nil || ev.Payload != (Archived{}) {
			t.Errorf("data %q: payload %#v, err %v; want Archived{}", data, ev.Payload, err)
		}
	}
}

func TestRegistry_Near_finds_a_registered_type_but_for_case_or_version(t *testing.T) {
	r := boardRegistry()
	for typ, want := range map[string]string{
		"CardMovedV4":  "CardMovedV3", // the name its kin's type has now, not an older form's
		"cardmoved":    "CardMovedV3",
		"CardMoved_v7": "CardMovedV3",
		"V2.CardMoved": "CardMovedV3",
		"cardArchived": "CardArchived",
		"CardMoved":    "", // registered
		"CardDeleted":  "",
		"Card":         "",
	} {
		got, ok := r.Near(typ)
		if got != want || ok != (want != "") {
			t.Errorf("Near(%q) = %q, %v; want %q", typ, got, ok, want)
		}
	}
}

// lanes counts a board's cards by column.
type lanes struct {
	Columns map[string]int `bson:"columns"`
}

func laneProjection(r *projector.Registry) *projector.Projection[lanes] {
	_ = r
	p := projector.New[lanes]("boards", projector.StreamSuffix("card-"))
	projector.On(p, func(b lanes, e Moved) (lanes, error) {
		if b.Columns == nil {
			b.Columns = map[string]int{}
		}
		b.Columns[e.Column.Name]++
		return b, nil
	})
	return p
}

func ExampleUpcast() {
	type memberV1 struct {
		MemberID string `json:"memberId"`
	}
	type Member struct {
		ID string `json:"id"`
	}
	type BookCheckedOut struct {
		Member Member `json:"member"`
	}
	r := projector.NewRegistry()
	projector.Register[BookCheckedOut](r, "book-checked-out.v2",
		projector.Upcast("book-checked-out.v1", func(old memberV1) (BookCheckedOut, error) {
			return BookCheckedOut{Member: Member{ID: old.MemberID}}, nil
		}))
	ev, err := r.Decode(projector.Event{Type: "book-checked-out.v1", Data: []byte(`{"memberId": "m-7"}`)})
	fmt.Printf("%+v %v\n", ev.Payload, err)
	// Output: {Member:{ID:m-7}} <nil>
}
