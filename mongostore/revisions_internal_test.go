package mongostore

import (
	"errors"
	"fmt"
	"maps"
	"testing"
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
	if b := encodeRevisions(nil); b != nil {
		t.Errorf("no revisions encoded as %v, want nothing (the field left out)", b)
	}
}
