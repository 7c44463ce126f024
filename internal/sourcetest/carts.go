package sourcetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
)

// t0 is when the carts' lives start.
var t0 = time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)

// Carts appends shopping carts through an [Appender] and keeps each cart's
// events as the engine must fold them.
type Carts struct {
	// Prefix starts every cart id, to keep runs apart on a shared server.
	Prefix string
	// Events holds each cart's events as its document must fold them, by
	// cart id.
	Events map[string][]projector.Event
	// Total counts the events in Events.
	Total int
	// Last is the commit position of the last cart event appended: the
	// furthest a subscription filtered to the carts can be sure to get
	// (a node sends no checkpoint for the filtered-out events after it
	// until more are written).
	Last uint64

	to       Appender
	poisoned map[string]int // events of a cart left out of its fold
}

// NewCarts returns carts appended through to.
func NewCarts(to Appender) *Carts {
	return &Carts{to: to, Events: map[string][]projector.Event{}, poisoned: map[string]int{}}
}

// Append appends n carts of size events each, interleaved in $all (round by
// round) with an event of another stream every few appends, and one such
// event last: a filtered subscription must still reach the head.
func (g *Carts) Append(tb testing.TB, seed uint64, n, size int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := rand.New(rand.NewPCG(seed, seed))
	lives := make([][]any, n)
	for i := range lives {
		lives[i] = cart.RandomLife(r, g.id(i), fmt.Sprintf("client%d", i%7), size, t0)
	}
	for round := range size {
		for i, life := range lives {
			if round >= len(life) {
				continue
			}
			g.AppendCart(tb, ctx, g.id(i), life[round])
			if (round*n+i)%9 == 0 {
				g.AppendOther(tb, ctx)
			}
		}
	}
	g.AppendOther(tb, ctx)
}

func (g *Carts) id(i int) string { return fmt.Sprintf("%scart%03d", g.Prefix, i) }

// AppendCart appends payload, a cart event, to cart id.
func (g *Carts) AppendCart(tb testing.TB, ctx context.Context, id string, payload any) {
	tb.Helper()
	name, data, err := cart.Registry().Encode(payload)
	if err != nil {
		tb.Fatal(err)
	}
	g.AppendRaw(tb, ctx, id, name, data, payload)
}

// AppendRaw appends data as an event of cart id; payload is what the fold
// sees (nil: the event is not part of the fold, for a poison event).
func (g *Carts) AppendRaw(tb testing.TB, ctx context.Context, id, name string, data []byte, payload any) {
	tb.Helper()
	stream := cart.StreamID(id)
	rev := uint64(len(g.Events[id]) + g.poisoned[id])
	expected := NoStream
	if rev > 0 {
		expected = int64(rev - 1)
	}
	pos, err := g.to.Append(ctx, stream, expected, Event{ID: uuid.New(), Type: name, Data: data})
	if err != nil {
		tb.Fatalf("append to %s at %d: %v", stream, rev, err)
	}
	g.Last = max(g.Last, pos)
	if payload == nil {
		g.poisoned[id]++
		return
	}
	g.Events[id] = append(g.Events[id], projector.Event{Type: name, StreamID: stream, StreamRevision: rev, Payload: payload})
	g.Total++
}

var others atomic.Int64

// AppendOther appends an event of a stream that is not a cart's.
func (g *Carts) AppendOther(tb testing.TB, ctx context.Context) {
	tb.Helper()
	_, err := g.to.Append(ctx, fmt.Sprintf("audit-%d", others.Add(1)), AnyRevision,
		Event{ID: uuid.New(), Type: "PageViewed", Data: []byte(`{"page":"/"}`)})
	if err != nil {
		tb.Fatal(err)
	}
}

// Check asserts that every cart's document in store equals the fold of its
// events.
func (g *Carts) Check(tb testing.TB, store driver.Store) {
	tb.Helper()
	bad := 0
	for id, evs := range g.Events {
		if err := projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), id, evs); err != nil {
			if bad++; bad <= 3 {
				tb.Error(err)
			}
		}
	}
	if bad > 0 {
		tb.Fatalf("%d of %d carts wrong", bad, len(g.Events))
	}
}

// Reached is a condition that holds once the runner's stored checkpoint is
// at or past the last cart event appended: everything a subscription
// filtered to the carts delivers is handled, and durable.
func (g *Carts) Reached() func(projector.RunnerStats) bool {
	return func(st projector.RunnerStats) bool {
		return st.Checkpoint != nil && st.Checkpoint.Position >= g.Last
	}
}

// AtFold returns a condition that holds once every cart's document in store
// equals the fold of its events.
func (g *Carts) AtFold(store driver.Store) func(projector.RunnerStats) bool {
	return func(projector.RunnerStats) bool {
		for id, evs := range g.Events {
			if projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), id, evs) != nil {
				return false
			}
		}
		return true
	}
}
