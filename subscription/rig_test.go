package subscription_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/revgate/projector/cart"
	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
	"github.com/revgate/projector/subscription"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Main(m)) }

var t0 = time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)

// rig is an EventStoreDB-protocol test server with carts appended through the
// official client, and a store on the embedded Mongo-wire server.
type rig struct {
	server *esdbtest.Server // nil on a real EventStoreDB
	prefix string           // of the cart ids, to keep runs apart on a shared server
	esdb   *esdb.Client
	store  *mongostore.Store
	// carts holds each cart's events as the engine must fold them.
	carts    map[string][]projector.Event
	poisoned map[string]int // events of a cart left out of its fold
	total    int            // cart events in the folds
}

func newRig(t *testing.T) *rig {
	t.Helper()
	s := esdbtest.New(t)
	return &rig{server: s, esdb: s.Client(t), store: mongostore.New(mongotest.Database(t)), carts: map[string][]projector.Event{}}
}

// appendCarts appends n carts of size events each, interleaved in $all (round
// by round) with an event of another stream every few appends, and one such
// event last: a filtered subscription must still reach the head.
func (g *rig) appendCarts(t *testing.T, seed uint64, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := rand.New(rand.NewPCG(seed, seed))
	lives := make([][]any, n)
	for i := range lives {
		lives[i] = cart.RandomLife(r, fmt.Sprintf("%scart%03d", g.prefix, i), fmt.Sprintf("client%d", i%7), size, t0)
	}
	for round := 0; round < size; round++ {
		for i, life := range lives {
			if round >= len(life) {
				continue
			}
			id := fmt.Sprintf("%scart%03d", g.prefix, i)
			g.appendCart(t, ctx, id, life[round])
			if (round*n+i)%9 == 0 {
				g.appendOther(t, ctx)
			}
		}
	}
	g.appendOther(t, ctx)
}

func (g *rig) appendCart(t *testing.T, ctx context.Context, id string, payload any) {
	t.Helper()
	name, data, err := cart.Registry().Encode(payload)
	if err != nil {
		t.Fatal(err)
	}
	g.appendRaw(t, ctx, id, name, data, payload)
}

// appendRaw appends data as an event of cart id; payload is what the fold sees
// (nil: the event is not part of the fold, for a poison event).
func (g *rig) appendRaw(t *testing.T, ctx context.Context, id, name string, data []byte, payload any) {
	t.Helper()
	stream := cart.StreamID(id)
	rev := uint64(len(g.carts[id]))
	if n := g.poisoned[id]; n > 0 {
		rev += uint64(n)
	}
	expected := esdb.ExpectedRevision(esdb.NoStream{})
	if rev > 0 {
		expected = esdb.Revision(rev - 1)
	}
	_, err := g.esdb.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: expected},
		esdb.EventData{EventID: uuid.New(), EventType: name, ContentType: esdb.ContentTypeJson, Data: data})
	if err != nil {
		t.Fatalf("append to %s at %d: %v", stream, rev, err)
	}
	if payload == nil {
		if g.poisoned == nil {
			g.poisoned = map[string]int{}
		}
		g.poisoned[id]++
		return
	}
	g.carts[id] = append(g.carts[id], projector.Event{Type: name, StreamID: stream, StreamRevision: rev, Payload: payload})
	g.total++
}

var others atomic.Int64

func (g *rig) appendOther(t *testing.T, ctx context.Context) {
	t.Helper()
	_, err := g.esdb.AppendToStream(ctx, fmt.Sprintf("audit-%d", others.Add(1)), esdb.AppendToStreamOptions{},
		esdb.EventData{EventType: "PageViewed", ContentType: esdb.ContentTypeJson, Data: []byte(`{"page":"/"}`)})
	if err != nil {
		t.Fatal(err)
	}
}

// check asserts every cart document equals the fold of its events.
func (g *rig) check(t *testing.T, store driver.Store) {
	t.Helper()
	bad := 0
	for id, evs := range g.carts {
		if err := projectortest.CheckDocument(context.Background(), store, cart.NewDetailsProjection(), id, evs); err != nil {
			if bad++; bad <= 3 {
				t.Error(err)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d carts wrong", bad, len(g.carts))
	}
}

// patient is a gate policy for tests where many events wait at once on a slow
// embedded server: short waits, bounded by time rather than by count.
func patient() retry.Policy {
	p := retry.Default()
	p.InitialDelay = 10 * time.Millisecond
	p.MaxDelay = 500 * time.Millisecond
	p.MaxRetries = -1
	p.MaxElapsed = 2 * time.Minute
	return p
}

func fastReconnect() retry.Policy {
	p := projector.DefaultReconnect()
	p.InitialDelay, p.MaxDelay, p.MaxElapsed = 20*time.Millisecond, 200*time.Millisecond, 2*time.Minute
	return p
}

func engine(t *testing.T, store driver.Store, opts ...projector.Option) *projector.Engine {
	t.Helper()
	e, err := projector.NewEngine(store, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		append([]projector.Option{projector.WithRetry(patient())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// dial returns a client on s, or on uri when s is nil.
func dial(t *testing.T, s *esdbtest.Server, uri ...string) *subscription.Client {
	t.Helper()
	if s != nil {
		uri = []string{s.URI()}
	}
	c, err := subscription.Dial(uri[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func cartsOnAll(t *testing.T, c *subscription.Client) *subscription.All {
	t.Helper()
	src, err := subscription.NewAll(c, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}, MaxSearchWindow: 8, CheckpointInterval: 2})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// running is a runner started in the background.
type running struct {
	r      *projector.Runner
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, r *projector.Runner) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	x := &running{r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { x.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-x.done
	})
	return x
}

// waitFor polls cond until it holds, failing the test after a bound or when
// the runner ends early.
func (x *running) waitFor(t *testing.T, what string, cond func(projector.RunnerStats) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond(x.r.Stats()) {
		select {
		case err := <-x.done:
			x.done <- err
			t.Fatalf("runner ended before %s: %v (stats %+v)", what, err, x.r.Stats())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within the bound: stats %+v", what, x.r.Stats())
		}
	}
}

// stop cancels the runner and returns what Run returned.
func (x *running) stop() error {
	x.cancel()
	err := <-x.done
	x.done <- err
	return err
}

func atHead(s *esdbtest.Server) func(projector.RunnerStats) bool {
	return func(st projector.RunnerStats) bool {
		return st.Checkpoint != nil && st.Checkpoint.Position == s.Head()
	}
}
