package mongostore

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/projector/driver"
)

// Every write sends a document encoded once, in bytes, spliced from the
// engine's fields and the state's: it must be the document those fields
// give encoded one by one.
func TestDocument_is_the_engines_fields_then_the_states(t *testing.T) {
	type item struct {
		SKU string `bson:"sku"`
		N   int    `bson:"n"`
	}
	state := struct {
		Name  string    `bson:"name"`
		Items []item    `bson:"items"`
		At    time.Time `bson:"at"`
		Note  *string   `bson:"note,omitempty"`
	}{Name: "cart", Items: []item{{"a", 1}, {"b", 2}}, At: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}
	for _, head := range []driver.Head{{Revision: 7, Stream: "cart-1", Write: "w1"}, {Revision: 0, Write: "w2", Deleted: true}} {
		fields, err := bson.Marshal(state)
		if err != nil {
			t.Fatal(err)
		}
		var stateD bson.D
		if err := bson.Unmarshal(fields, &stateD); err != nil {
			t.Fatal(err)
		}
		want, err := bson.Marshal(append(bson.D(ownFields("d1", head)), stateD...))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := encode(state, ownFields("d1", head)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Validate(); err != nil {
			t.Fatalf("raw document does not validate: %v", err)
		}
		if !bytes.Equal(raw, want) {
			t.Errorf("raw document\n%v\nwant\n%v", raw, bson.Raw(want))
		}
		if tokenOf(raw) != head.Write {
			t.Errorf("token %q, want %q", tokenOf(raw), head.Write)
		}
	}
	if _, err := encode(struct {
		Revision int `bson:"revision"`
	}{3}, ownFields("d1", driver.Head{})...); !errors.Is(err, driver.ErrUnencodable) {
		t.Errorf("a state with the revision field: err = %v, want driver.ErrUnencodable", err)
	}
}
