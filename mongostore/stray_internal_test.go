package mongostore

import (
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

type strayInner struct {
	Floor int `bson:"floor"`
}

type strayState struct {
	Charges int64 `bson:"totalcharges"` // renamed, its stored name kept
	Name    string
	Skipped string `bson:"-"`
	Old     string `bson:"legacy,omitempty"`
	Inner   strayInner
	Flat    strayInner `bson:",inline"`
	//lint:ignore U1000 an unexported field, which the driver does not store, is what the test is about
	internal int
}

// strayComputed encodes itself, with a field for readers that it does
// not decode: its own code says its stored fields.
type strayComputed struct {
	Items []int `bson:"items"`
}

func (c strayComputed) MarshalBSON() ([]byte, error) {
	return bson.Marshal(bson.D{{Key: "items", Value: c.Items}, {Key: "count", Value: len(c.Items)}})
}

type strayOpen struct {
	Name string         `bson:"name"`
	Rest map[string]any `bson:",inline"`
}

// The keys a state type stores its fields under are the driver's: a
// bson tag's name, else the field's name in lower case, the fields of an
// inline struct flattened; a field of a stored document that is none of
// them is stray, and the engine's own fields never are. A state that takes
// any field (an inline map, a map) cannot say.
func TestStrayField_is_a_stored_field_the_state_type_has_no_field_for(t *testing.T) {
	doc := func(keys ...string) bson.Raw {
		d := bson.D{{Key: "_id", Value: "x"}, {Key: "revision", Value: int64(3)}, {Key: "_stream", Value: "s"}, {Key: "_meta", Value: bson.D{}}}
		for _, k := range keys {
			var v any = 1
			if k == "note" {
				v = nil // a field removed that only ever held null
			}
			d = append(d, bson.E{Key: k, Value: v})
		}
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for _, c := range []struct {
		name  string
		raw   bson.Raw
		state any
		gated bool
		want  string
	}{
		{"every field known", doc("totalcharges", "name", "legacy", "inner", "floor"), &strayState{}, true, ""},
		{"a field renamed without its stored name", doc("name", "charges"), &strayState{}, true, "charges"},
		{"a field tagged -", doc("skipped"), &strayState{}, true, "skipped"},
		{"an unexported field", doc("internal"), &strayState{}, true, "internal"},
		{"a field the driver matches in another case", doc("TotalCharges", "NAME"), &strayState{}, true, ""},
		{"a field that holds null", doc("note"), &strayState{}, true, ""},
		{"revision, the state's own where the document is not gated", doc("name"), &strayState{}, false, "revision"},
		{"a type that encodes itself", doc("items", "count"), &strayComputed{}, true, ""},
		{"an inline map takes any field", doc("name", "anything"), &strayOpen{}, true, ""},
		{"a map takes any field", doc("anything"), &map[string]any{}, true, ""},
	} {
		if got := strayField(c.raw, stateKeysOf(reflect.TypeOf(c.state)), c.gated); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
