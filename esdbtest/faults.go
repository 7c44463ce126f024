package esdbtest

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// faults holds the injected faults' settings.
type faults struct {
	refuseUntil atomic.Int64 // UnixNano; 0 when never refused

	mu   sync.Mutex
	rate float64
	rng  *rand.Rand
}

func newFaults(seed int64) *faults {
	return &faults{rng: rand.New(rand.NewPCG(uint64(seed), 0x65736462))}
}

func (f *faults) refuseFor(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := f.refuseUntil.Load()
		if cur >= until || f.refuseUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

func (f *faults) refusing() bool {
	return time.Now().UnixNano() < f.refuseUntil.Load()
}

func (f *faults) setDuplicateRate(rate float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rate = rate
}

// duplicate draws whether the event about to be sent is sent twice.
func (f *faults) duplicate() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.rate <= 0:
		return false
	case f.rate >= 1:
		return true
	default:
		return f.rng.Float64() < f.rate
	}
}

// liveSub is a running subscription, catch-up or persistent consumer, that a
// fault (or Close) can end.
type liveSub struct {
	done chan struct{}
	once sync.Once
	err  error // set before done is closed
}

func newLiveSub() *liveSub { return &liveSub{done: make(chan struct{})} }

// end ends the subscription with err; it reports whether this call ended it.
func (l *liveSub) end(err error) bool {
	ended := false
	l.once.Do(func() {
		l.err = err
		close(l.done)
		ended = true
	})
	return ended
}

// registry holds the running subscriptions.
type registry struct {
	mu   sync.Mutex
	subs map[*liveSub]struct{}
}

func (r *registry) add() *liveSub {
	l := newLiveSub()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs[l] = struct{}{}
	return l
}

func (r *registry) remove(l *liveSub) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.subs, l)
}

// dropAll ends every registered subscription with the given status and
// returns how many it ended.
func (r *registry) dropAll(code codes.Code, msg string) int {
	r.mu.Lock()
	subs := r.subs
	r.subs = make(map[*liveSub]struct{})
	r.mu.Unlock()
	n := 0
	for l := range subs {
		if l.end(status.Error(code, msg)) {
			n++
		}
	}
	return n
}
