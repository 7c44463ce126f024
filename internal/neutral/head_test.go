package neutral_test

import (
	"context"
	"errors"
	"testing"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
)

// log is $all as a scan reads it.
type log []neutral.Record

func (l log) scan(ctx context.Context, after *projector.Checkpoint, max int, each func(neutral.Record) bool) error {
	read := 0
	for _, r := range l {
		if after != nil && (r.Checkpoint.Position < after.Position ||
			r.Checkpoint.Position == after.Position && r.Checkpoint.Prepare < after.Prepare) {
			continue // a forward read from a position starts at it
		}
		if read++; read > max || !each(r) {
			return nil
		}
	}
	return nil
}

func rec(pos, prepare uint64, stream, typ string) neutral.Record {
	return neutral.Record{Checkpoint: projector.Checkpoint{Position: pos, Prepare: prepare}, Stream: stream, Type: typ}
}

func at(pos, prepare uint64) *projector.Checkpoint {
	return &projector.Checkpoint{Position: pos, Prepare: prepare}
}

// The checkpoint at the head is the last record before the first one the
// subscription's filter keeps, after the last position it delivered: never
// past an event still to come.
func TestHead_stops_before_the_first_record_the_filter_keeps(t *testing.T) {
	carts := neutral.AllOptions{StreamPrefixes: []string{"cart-"}}
	all := log{
		rec(10, 10, "cart-1", "Opened"),
		rec(20, 20, "audit-1", "Viewed"),
		rec(30, 30, "audit-2", "Viewed"),
		rec(40, 40, "cart-2", "Opened"),
		rec(50, 50, "audit-3", "Viewed"),
		rec(60, 58, "audit-4", "Viewed"), // one append of three: one commit position
		rec(60, 59, "cart-3", "Opened"),
		rec(60, 60, "audit-4", "Viewed"),
		rec(70, 70, "audit-5", "Viewed"),
	}
	for _, c := range []struct {
		name string
		o    neutral.AllOptions
		last *projector.Checkpoint
		want *projector.Checkpoint // nil: no checkpoint to store
	}{
		{"from the start: the records before the first cart", carts, nil, nil},
		{"after the first cart: up to the record before the next", carts, at(10, 10), at(30, 30)},
		{"a kept record right after the last: nothing", carts, at(30, 30), nil},
		{"inside one commit: stops before its kept record", carts, at(40, 40), at(60, 58)},
		{"after the last cart: the head", carts, at(60, 59), at(70, 70)},
		{"no filter: only system types are passed over", neutral.AllOptions{}, at(10, 10), nil},
		{"a regular expression", neutral.AllOptions{StreamRegex: "^cart-[0-9]+$"}, at(10, 10), at(30, 30)},
		{"an event-type filter", neutral.AllOptions{EventTypePrefixes: []string{"Open"}}, at(40, 40), at(60, 58)},
	} {
		got, err := neutral.NewHead(c.o, all.scan).After(context.Background(), c.last)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (got == nil) != (c.want == nil) || got != nil && (got.Position != c.want.Position || got.Prepare != c.want.Prepare) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// System records are passed over without a filter; a name that is not all
// ASCII stops the scan under a regular expression (the server's engine
// matches Unicode classes that Go's does not).
func TestHead_is_conservative_where_the_server_could_keep_more(t *testing.T) {
	all := log{
		rec(10, 10, "$stats", "$statsCollected"),
		rec(20, 20, "user-José", "Renamed"),
		rec(30, 30, "other", "Viewed"),
	}
	got, err := neutral.NewHead(neutral.AllOptions{}, all.scan).After(context.Background(), nil)
	if err != nil || got == nil || got.Position != 10 {
		t.Fatalf("no filter: %v %v, want the system record's position", got, err)
	}
	got, err = neutral.NewHead(neutral.AllOptions{StreamRegex: `^user-\w+$`}, all.scan).After(context.Background(), at(10, 10))
	if err != nil || got != nil {
		t.Fatalf(`^user-\w+$ over "user-José": %v %v, want a stop before it`, got, err)
	}
}

// A scan that fails gives no checkpoint; one that reaches its limit gives
// the last position it read, short of the head.
func TestHead_a_failed_or_long_scan(t *testing.T) {
	boom := errors.New("unavailable")
	failing := func(context.Context, *projector.Checkpoint, int, func(neutral.Record) bool) error { return boom }
	if got, err := neutral.NewHead(neutral.AllOptions{}, failing).After(context.Background(), nil); !errors.Is(err, boom) || got != nil {
		t.Fatalf("failed scan: %v %v", got, err)
	}
	long := make(log, neutral.HeadScanLimit+10)
	for i := range long {
		long[i] = rec(uint64(i+1), uint64(i+1), "audit", "Viewed")
	}
	got, err := neutral.NewHead(neutral.AllOptions{StreamPrefixes: []string{"cart-"}}, long.scan).After(context.Background(), nil)
	if err != nil || got == nil || got.Position != neutral.HeadScanLimit {
		t.Fatalf("long scan: %v %v, want position %d", got, err, neutral.HeadScanLimit)
	}
}
