package segment_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/segment"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// The segment of a document is a pure function of its id and the number of
// segments: the same in every process, every run and every version (these
// values are FNV-1a 32 of the ids, modulo 16, computed apart from this code).
func TestOf_is_stable_for_fixed_ids(t *testing.T) {
	for id, want := range map[string]int{"": 5, "cart000": 5, "cart001": 2, "c0042": 0, "client-7": 10, "shop": 9} {
		if got := segment.Of(id, 16); got != want {
			t.Errorf("Of(%q, 16) = %d, want %d", id, got, want)
		}
	}
	counts := make([]int, 16)
	for i := range 1600 {
		counts[segment.Of(fmt.Sprintf("cart%04d", i), 16)]++
	}
	for k, n := range counts {
		if n < 50 || n > 150 {
			t.Errorf("segment %d has %d of 1600 ids: the hash does not spread them", k, n)
		}
	}
}

// Every process takes the floor or the ceiling of N/P, and the shares add
// up to N.
func TestShare_gives_each_process_floor_or_ceil_and_adds_up(t *testing.T) {
	const n = 16
	for p := 1; p <= 5; p++ {
		total := 0
		for rank := range p {
			s := segment.Share(n, p, rank)
			if s != n/p && s != (n+p-1)/p {
				t.Errorf("P=%d rank %d: share %d, want %d or %d", p, rank, s, n/p, (n+p-1)/p)
			}
			total += s
		}
		if total != n {
			t.Errorf("P=%d: shares add up to %d, want %d", p, total, n)
		}
	}
	if s := segment.Share(4, 6, 5); s != 0 {
		t.Errorf("more processes than segments: rank 5 of 6 gets %d, want 0", s)
	}
}

// The first segmented run records N; another N is answered with the one
// recorded.
func TestRecord_keeps_the_first_number(t *testing.T) {
	db := mongotest.Database(t)
	ctx := context.Background()
	if n, err := segment.Count(ctx, db, "carts"); err != nil || n != 0 {
		t.Fatalf("before any run: %d, %v", n, err)
	}
	if n, err := segment.Record(ctx, db, "p", "carts", 16); err != nil || n != 16 {
		t.Fatalf("first record: %d, %v", n, err)
	}
	if n, err := segment.Record(ctx, db, "p", "carts", 8); err != nil || n != 16 {
		t.Fatalf("second record with 8: %d, %v; want the first, 16", n, err)
	}
}

// A heartbeat makes a process live until it expires or leaves.
func TestLive_lists_processes_until_they_leave_or_expire(t *testing.T) {
	db := mongotest.Database(t)
	ctx := context.Background()
	for _, h := range []string{"b", "a"} {
		if err := segment.Beat(ctx, db, "p", h, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := segment.Beat(ctx, db, "p", "gone", -time.Second); err != nil {
		t.Fatal(err)
	}
	if err := segment.Beat(ctx, db, "other", "c", time.Minute); err != nil {
		t.Fatal(err)
	}
	live, err := segment.Live(ctx, db, "p")
	if err != nil || fmt.Sprint(live) != "[a b]" {
		t.Fatalf("live: %v, %v; want [a b]", live, err)
	}
	if err := segment.Leave(ctx, db, "p", "a"); err != nil {
		t.Fatal(err)
	}
	if live, err = segment.Live(ctx, db, "p"); err != nil || fmt.Sprint(live) != "[b]" {
		t.Fatalf("after a leaves: %v, %v; want [b]", live, err)
	}
}

// The processes take a free segment in turns, each at its own rank, and
// the turns of a segment differ from those of the next.
func TestRank_gives_each_process_its_own_turn(t *testing.T) {
	members := []string{"run a/1/x", "run b/2/y", "run c/3/z"}
	firsts := map[string]int{}
	for k := range 16 {
		seen := map[int]bool{}
		for _, m := range members {
			r := segment.Rank(members, m, k)
			if r < 0 || r >= len(members) || seen[r] {
				t.Fatalf("segment %d: rank %d of %s (ranks seen %v)", k, r, m, seen)
			}
			seen[r] = true
			if r == 0 {
				firsts[m]++
			}
		}
	}
	if len(firsts) != len(members) {
		t.Errorf("the first turns of 16 segments go to %v: not spread over the processes", firsts)
	}
	if r := segment.Rank(members[:2], "run d/4/w", 3); r > 2 {
		t.Errorf("a process not among the members yet: rank %d, want at most 2", r)
	}
}
