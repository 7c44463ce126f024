package projector

import "sync"

// tracker finds the checkpoint a runner may store: the furthest delivery such
// that it and every delivery before it are done. Deliveries finish in any order
// (they run on several workers); the mark moves only over a done prefix. It
// never moves back: after a resubscription redelivers older positions, the
// mark stays where it was.
//
// It holds one entry per delivery not yet behind the mark, so its size is the
// number of deliveries in flight.
type tracker struct {
	mu      sync.Mutex
	low     uint64 // sequence number of entries[0]
	entries []trackEntry
	mark    *Checkpoint
	moved   int // deliveries the mark has passed since the last take
}

type trackEntry struct {
	cp   *Checkpoint
	done bool
}

func newTracker(from *Checkpoint) *tracker {
	return &tracker{mark: from}
}

// add registers a delivery and returns its sequence number.
func (t *tracker) add(cp *Checkpoint) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries = append(t.entries, trackEntry{cp: cp})
	return t.low + uint64(len(t.entries)) - 1
}

// done marks delivery seq handled and moves the mark over the done prefix. It
// returns how many deliveries the mark has passed since the last take.
func (t *tracker) done(seq uint64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries[seq-t.low].done = true
	n := 0
	for n < len(t.entries) && t.entries[n].done {
		if cp := t.entries[n].cp; cp != nil && (t.mark == nil || cp.After(*t.mark)) {
			c := *cp
			t.mark = &c
		}
		n++
	}
	if n > 0 {
		clear(t.entries[:n])
		t.entries = t.entries[n:]
		t.low += uint64(n)
		t.moved += n
	}
	return t.moved
}

// taken notes that a checkpoint at the mark peek returned, with count n,
// is stored: the deliveries the mark passes after that one are counted
// from it.
func (t *tracker) taken(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.moved = max(t.moved-n, 0)
}

// peek returns the mark, leaving the count.
func (t *tracker) peek() (*Checkpoint, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mark == nil {
		return nil, t.moved
	}
	c := *t.mark
	return &c, t.moved
}

// next returns the sequence number the next delivery added will get.
func (t *tracker) next() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.low + uint64(len(t.entries))
}

// passed reports whether every delivery before sequence number n is done.
func (t *tracker) passed(n uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.low >= n
}

// sinceTaken returns how many deliveries were added since the mark last
// taken: those a run started again from that checkpoint would get again.
func (t *tracker) sinceTaken() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.moved + len(t.entries)
}

// pending returns how many deliveries are not yet behind the mark.
func (t *tracker) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
