package mongostore

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Revisions survive their binary form, streams sharing a prefix or not,
// empty or long, revisions small or the largest; a truncated form is an
// error, not a wrong map.
func TestRevisions_round_trip(t *testing.T) {
	revs := map[string]uint64{"": 3, "a": 0, "ab": 1, "abc": 1 << 63, "b": 7, "proposal-7": 2, "proposal-70": 5, "z\x00y": 9}
	for i := range 1000 {
		revs[fmt.Sprintf("observation-%05d", i)] = uint64(i * 3)
	}
	b := encodeRevisions(revs)
	got, err := decodeRevisions(b)
	if err != nil || !maps.Equal(got, revs) {
		t.Fatalf("decoded %d revisions (%v), want the %d encoded", len(got), err, len(revs))
	}
	if n := len(b); n > 1000*8 {
		t.Errorf("1,000 streams of one prefix took %d bytes, want the prefix shared (under 8,000)", n)
	}
	for cut := 1; cut < 12; cut++ {
		if _, err := decodeRevisions(b[:len(b)-cut]); !errors.Is(err, errRevisions) {
			t.Errorf("cut %d bytes short: %v, want errRevisions", cut, err)
		}
	}
	// The same stream twice, and streams out of order, are refused: the
	// form holds each stream once, in order.
	for name, bad := range map[string][]byte{
		"twice":        {2, 0, 1, 'a', 1, 1, 0, 5},
		"out of order": {2, 0, 1, 'b', 1, 0, 1, 'a', 2},
		"left over":    {1, 0, 1, 'a', 1, 0, 1, 'b', 2},
	} {
		if got, err := decodeRevisions(bad); !errors.Is(err, errRevisions) {
			t.Errorf("%s: %v (%v), want errRevisions", name, got, err)
		}
	}
	if b := encodeRevisions(nil); b != nil {
		t.Errorf("no revisions encoded as %v, want nothing (the field left out)", b)
	}
}

// The field's BSON value: a binary of the encoded revisions, read back; a
// binary whose length is wrong, or a value of another type, is an error.
func TestRevisions_field_reads_what_it_writes_and_refuses_other_values(t *testing.T) {
	in := revisionsField{"order-1": 4, "order-2": 0}
	typ, data, err := in.MarshalBSONValue()
	if err != nil || bson.Type(typ) != bson.TypeBinary {
		t.Fatalf("marshalled as %v (%v), want binary", bson.Type(typ), err)
	}
	var out revisionsField
	if err := out.UnmarshalBSONValue(typ, data); err != nil || !maps.Equal(out, in) {
		t.Fatalf("read back %v (%v), want %v", out, err, in)
	}
	if err := out.UnmarshalBSONValue(typ, data[:len(data)-1]); !errors.Is(err, errRevisions) {
		t.Errorf("a binary one byte short: %v, want errRevisions", err)
	}
	if err := out.UnmarshalBSONValue(byte(bson.TypeString), []byte{1, 0, 0, 0, 0}); !errors.Is(err, errRevisions) {
		t.Errorf("a string: %v, want errRevisions", err)
	}
}
