package projector

import (
	"math/rand/v2"
	"testing"
)

func TestTracker_moves_only_over_a_done_prefix(t *testing.T) {
	tr := newTracker(nil)
	cp := func(p uint64) *Checkpoint { return &Checkpoint{Position: p} }
	a, b, c := tr.add(cp(10)), tr.add(nil), tr.add(cp(30))
	tr.done(c)
	if m, _ := tr.peek(); m != nil {
		t.Fatalf("mark %v before the first delivery is done", m)
	}
	tr.done(a)
	if m, _ := tr.peek(); m == nil || m.Position != 10 {
		t.Fatalf("mark %v, want 10", m)
	}
	if n := tr.done(b); n != 3 {
		t.Fatalf("passed %d, want 3", n)
	}
	m, n := tr.peek()
	if m == nil || m.Position != 30 || n != 3 {
		t.Fatalf("peek %v %d, want 30 3", m, n)
	}
	tr.done(tr.add(cp(40))) // passed while the checkpoint at 30 is stored
	tr.taken(n)
	if _, n := tr.peek(); n != 1 || tr.sinceTaken() != 1 {
		t.Fatalf("after the checkpoint at 30 is stored: passed %d, since %d, want 1 and 1 (the delivery at 40)", n, tr.sinceTaken())
	}
	// A resubscription redelivers older positions: the mark does not go back.
	tr.done(tr.add(cp(20)))
	if m, _ := tr.peek(); m.Position != 40 || tr.pending() != 0 {
		t.Fatalf("mark %v pending %d", m, tr.pending())
	}
}

func TestTracker_random_completion_order(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for round := range 200 {
		tr := newTracker(&Checkpoint{Position: 5})
		n := 1 + r.IntN(50)
		seqs := make([]uint64, n)
		for i := range seqs {
			seqs[i] = tr.add(&Checkpoint{Position: uint64(10 * (i + 1))})
		}
		order := r.Perm(n)
		done := make([]bool, n)
		for _, i := range order {
			tr.done(seqs[i])
			done[i] = true
			prefix := 0
			for prefix < n && done[prefix] {
				prefix++
			}
			want := uint64(5)
			if prefix > 0 {
				want = uint64(10 * prefix)
			}
			if m, _ := tr.peek(); m.Position != want {
				t.Fatalf("round %d: mark %d, want %d", round, m.Position, want)
			}
		}
		if tr.pending() != 0 {
			t.Fatalf("round %d: %d pending", round, tr.pending())
		}
	}
}

// The events of a transaction written by the legacy TCP API share their
// commit position: the mark moves over them by their prepare positions, so
// that a checkpoint can be stored inside a large transaction.
func TestTracker_moves_within_one_commit_by_prepare_position(t *testing.T) {
	tr := newTracker(&Checkpoint{Position: 100, Prepare: 100})
	for i := range 3 {
		tr.done(tr.add(&Checkpoint{Position: 1000, Prepare: uint64(1000 + 10*i)}))
	}
	if m, n := tr.peek(); m == nil || m.Position != 1000 || m.Prepare != 1020 || n != 3 {
		t.Fatalf("mark %v after 3 events of one commit (passed %d), want 1000/1020 (3)", m, n)
	}
	tr.done(tr.add(&Checkpoint{Position: 1000, Prepare: 1010})) // delivered again
	if m, _ := tr.peek(); m.Prepare != 1020 {
		t.Fatalf("mark %v after a redelivery inside the commit: want it to stay at 1000/1020", m)
	}
}
