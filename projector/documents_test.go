package projector_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// halfStore is a checkpoint store whose checkpoints cover the documents
// keep accepts only.
type halfStore struct {
	projector.CheckpointStore
	keep func(string) bool
}

func (h halfStore) NeedsEvent(id string, _ projector.Checkpoint) bool { return h.keep(id) }

// Two runners share one projection's documents, each keeping half of them
// (a checkpoint store that covers those only): each applies the events of its own documents only, and
// passes over the others' as checkpoints; together they apply every event
// once, and every document equals its fold.
func TestRunner_checkpoints_of_some_documents_apply_only_the_documents_it_keeps(t *testing.T) {
	s := newStore(t)
	all, by := cartEvents(t, 8)
	mine := map[string]bool{}
	for i, id := range []string{"ra", "rb", "rc", "rd", "re", "rf", "rg", "rh"} {
		if i%2 == 0 {
			mine[id] = true
		}
	}
	half := func(want bool) func(string) bool { return func(id string) bool { return mine[id] == want } }
	applied := uint64(0)
	for i, keep := range []func(string) bool{half(true), half(false)} {
		name := []string{"even", "odd"}[i]
		r, err := projector.NewRunner(name, newEngine(t, s, retry.Default()), &scripted{events: all}, halfStore{s, keep})
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(len(all) / 2)
		if err := runUntil(t, r, func(st projector.RunnerStats) bool { return st.CaughtUp }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		st := r.Stats()
		if st.Applied != want || st.Events != want || st.Checkpoints != uint64(len(all))-want {
			t.Errorf("%s: applied %d of %d deliveries and %d checkpoints; want %d events applied, the other %d passed over",
				name, st.Applied, st.Events, st.Checkpoints, want, uint64(len(all))-want)
		}
		applied += st.Applied
		if cp, err := s.LoadCheckpoint(context.Background(), name); err != nil || cp == nil || cp.Position != all[len(all)-1].Position {
			t.Errorf("%s: checkpoint %v, %v; want the last position, past the events passed over", name, cp, err)
		}
		if i == 0 {
			for id := range by {
				if _, found, err := s.Load(context.Background(), cart.DetailsName, id, 0, new(cart.Details)); err != nil || found != mine[id] {
					t.Errorf("after the even runner, document %s found %v (%v)", id, found, err)
				}
			}
		}
	}
	if applied != uint64(len(all)) {
		t.Errorf("applied %d in all, want %d", applied, len(all))
	}
	for id, evs := range by {
		assertDocument(t, s, id, evs)
	}
}

func TestNewRunner_checkpoints_of_some_documents_need_an_engine_of_one_projection(t *testing.T) {
	s := newStore(t)
	_, err := projector.NewRunner("r", newEngine(t, s, retry.Default(), cart.NewDetailsProjection(), cart.NewClientSummaryProjection()), &scripted{},
		halfStore{s, func(string) bool { return true }}, projector.WithCheckpointEvery(1, time.Second))
	if err == nil || !strings.Contains(err.Error(), "one projection") {
		t.Fatalf("err %v", err)
	}
}

// neededFrom is a checkpoint store that needs every document's events past
// position from only (one whose segments' checkpoints are all there).
type neededFrom struct {
	projector.CheckpointStore
	from uint64
}

func (n neededFrom) NeedsEvent(_ string, at projector.Checkpoint) bool { return at.Position > n.from }

// The events a store covers from a checkpoint at or past them are passed
// over by their position: the engine is handed only those past it.
func TestRunner_checkpoints_that_need_events_past_a_position_pass_over_those_before(t *testing.T) {
	s := newStore(t)
	all, by := cartEvents(t, 8)
	full, err := projector.NewRunner("full", newEngine(t, s, retry.Default()), &scripted{events: all}, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(t, full, func(st projector.RunnerStats) bool { return st.CaughtUp }); err != nil {
		t.Fatal(err)
	}
	half := len(all) / 2
	again, err := projector.NewRunner("again", newEngine(t, s, retry.Default()), &scripted{events: all},
		neededFrom{s, all[half-1].Position})
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(t, again, func(st projector.RunnerStats) bool { return st.CaughtUp }); err != nil {
		t.Fatal(err)
	}
	st := again.Stats()
	if st.Checkpoints != uint64(half) || st.Events != uint64(len(all)-half) || st.Applied != 0 {
		t.Errorf("%d events passed over, %d handed to the engine, %d applied; want %d passed over, %d handed over (all duplicates)",
			st.Checkpoints, st.Events, st.Applied, half, len(all)-half)
	}
	for id, evs := range by {
		assertDocument(t, s, id, evs)
	}
}

// A runner whose checkpoint store keeps none of the documents the events go
// to (a process whose segments hold none of them) passes them over, and
// hands its engine only the events no document wants: it does not warn
// that no event went to a document, which is no routing bug (it did, in
// one process, before).
func TestRunner_that_keeps_none_of_the_documents_does_not_warn_of_its_router(t *testing.T) {
	s := newStore(t)
	all, _ := cartEvents(t, 4)
	stray := projectortest.NewLog(cart.Registry()).MustAppend(t, "ledger-1", cart.ShoppingCartOpened{ShoppingCartID: "x", ClientID: "y", OpenedAt: t0})
	for i := range stray {
		stray[i].Position = all[len(all)-1].Position + uint64(i) + 1
	}
	events := append(append([]projector.Event{}, all...), stray...)
	for _, keep := range []bool{false, true} {
		var mu sync.Mutex
		var logs bytes.Buffer
		e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
			projector.WithRetry(retry.Default()), projector.WithLogger(slog.New(slog.NewTextHandler(lockedbuf.Writer{Mu: &mu, W: &logs}, nil))))
		if err != nil {
			t.Fatal(err)
		}
		var cps projector.CheckpointStore = halfStore{s, func(string) bool { return false }}
		if keep {
			// The control: the same events, only the stray one delivered.
			cps, events = s, stray
		}
		r, err := projector.NewRunner(fmt.Sprintf("none-%v", keep), e, &scripted{events: events}, cps)
		if err != nil {
			t.Fatal(err)
		}
		if err := runUntil(t, r, func(st projector.RunnerStats) bool { return st.CaughtUp }); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		warned := strings.Contains(logs.String(), "none of the events delivered went to a document")
		mu.Unlock()
		if warned != keep {
			t.Errorf("keeps no document %v: warned %v, want %v\n%s", !keep, warned, keep, logs.String())
		}
	}
}

// A source may reach the head with an event (Delivery.CaughtUp on it): the
// runner is caught up once that event is handled, not as it arrives (it
// was, before, and then did not count it for the warning above either).
func TestRunner_is_caught_up_once_the_event_that_reaches_the_head_is_handled(t *testing.T) {
	s := newStore(t)
	reg, _ := crates(1, projector.Block, false)
	release := make(chan struct{})
	var handled atomic.Int32
	p := projector.New[crate]("slow_crates", projector.StreamSuffix("crate-"))
	projector.On(p, func(c crate, e crateIn) (crate, error) {
		handled.Add(1)
		<-release
		c.Yard = e.Yard
		return c, nil
	})
	e, err := projector.NewEngine(s, reg, []projector.Definition{p})
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(reg)
	r, err := projector.NewRunner("slow", e, &scripted{events: log.MustAppend(t, "crate-1", crateIn{Yard: "A"})}, s)
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, r)
	for deadline := time.Now().Add(time.Minute); handled.Load() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the event never reached its handler")
		}
	}
	caught := r.CaughtUp()
	close(release)
	if caught {
		t.Fatal("caught up while the event that reaches the head was in its handler")
	}
	for deadline := time.Now().Add(time.Minute); !r.CaughtUp(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not caught up once every event was handled")
		}
	}
}

// A runner that resumes from a stored checkpoint and meets only events its
// projection leaves alone (the tail of the log holds other streams') does
// not warn that no event went to a document: its projection routed the
// events before the checkpoint. The same events read from the start do.
func TestRunner_resumed_near_the_head_with_only_unrouted_events_does_not_warn_of_its_router(t *testing.T) {
	s := newStore(t)
	all, _ := cartEvents(t, 2)
	stray := projectortest.NewLog(cart.Registry()).MustAppend(t, "ledger-1", cart.ShoppingCartOpened{ShoppingCartID: "x", ClientID: "y", OpenedAt: t0})
	for i := range stray {
		stray[i].Position = all[len(all)-1].Position + uint64(i) + 1
	}
	if err := s.SaveCheckpoint(context.Background(), "resumed", projector.Checkpoint{Position: all[len(all)-1].Position}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		events []projector.Event
		warn   bool
	}{{"resumed", append(append([]projector.Event{}, all...), stray...), false}, {"from-start", stray, true}} {
		var mu sync.Mutex
		var logs bytes.Buffer
		e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
			projector.WithRetry(retry.Default()), projector.WithLogger(slog.New(slog.NewTextHandler(lockedbuf.Writer{Mu: &mu, W: &logs}, nil))))
		if err != nil {
			t.Fatal(err)
		}
		r, err := projector.NewRunner(tc.name, e, &scripted{events: tc.events}, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := runUntil(t, r, func(st projector.RunnerStats) bool { return st.CaughtUp }); err != nil {
			t.Fatal(err)
		}
		if st := r.Stats(); st.Events != uint64(len(stray)) || st.Unrouted != st.Events {
			t.Fatalf("%s: %d events delivered, %d unrouted; want the %d stray ones only, unrouted", tc.name, st.Events, st.Unrouted, len(stray))
		}
		mu.Lock()
		warned := strings.Contains(logs.String(), "none of the events delivered went to a document")
		mu.Unlock()
		if warned != tc.warn {
			t.Errorf("%s: warned %v, want %v\n%s", tc.name, warned, tc.warn, logs.String())
		}
	}
}

// headSignalled is a source whose subscription delivers its events, with
// a bare caught-up delivery (no event, no checkpoint: the head had nothing
// past the last event) after the first head of them.
type headSignalled struct {
	events []projector.Event
	head   int
}

func (h *headSignalled) Subscribe(context.Context, *projector.Checkpoint) (projector.Subscription, error) {
	return &headSignalledSub{h: h}, nil
}

func (*headSignalled) Ordered() bool { return true }

type headSignalledSub struct {
	h    *headSignalled
	sent int
	said bool
}

func (s *headSignalledSub) Next(ctx context.Context) (projector.Delivery, error) {
	if s.sent == s.h.head && !s.said {
		s.said = true
		return projector.Delivery{CaughtUp: true}, nil
	}
	if s.sent == len(s.h.events) {
		<-ctx.Done()
		return projector.Delivery{}, ctx.Err()
	}
	ev := s.h.events[s.sent]
	s.sent++
	return projector.Delivery{Event: &ev, Checkpoint: &projector.Checkpoint{Position: ev.Position}}, nil
}

func (*headSignalledSub) Close() error { return nil }

// A runner whose source says it reached the head with a delivery of no
// event and no checkpoint is caught up once the events before that are
// handled, while a live event after it is still being handled: under
// steady appends that each take a while to write, there is always one in
// flight, and it was caught up only once none was (a rebuild under traffic
// never switched, and /readyz stayed not ready).
func TestRunner_caught_up_by_a_bare_head_signal_does_not_wait_for_the_live_events(t *testing.T) {
	s := newStore(t)
	reg, _ := crates(1, projector.Block, false)
	release := make(chan struct{})
	var live atomic.Bool
	p := projector.New[crate]("live_crates", projector.StreamSuffix("crate-"))
	projector.On(p, func(c crate, e crateIn) (crate, error) {
		if e.Yard == "live" {
			live.Store(true)
			<-release
		}
		c.Yard = e.Yard
		return c, nil
	})
	patient := retry.Policy{InitialDelay: time.Millisecond, Multiplier: 2, MaxDelay: time.Second, MaxRetries: -1, MaxElapsed: time.Hour}
	e, err := projector.NewEngine(s, reg, []projector.Definition{p}, projector.WithRetry(patient))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(reg)
	events := append(log.MustAppend(t, "crate-1", crateIn{Yard: "A"}), log.MustAppend(t, "crate-2", crateIn{Yard: "live"})...)
	// One event at a time: in a batch, the event before the signal would
	// wait for the live one's handler with it.
	r, err := projector.NewRunner("bare", e, &headSignalled{events: events, head: 1}, s, projector.WithBatch(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, r)
	defer close(release)
	for deadline := time.Now().Add(time.Minute); !live.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the live event never reached its handler")
		}
	}
	for deadline := time.Now().Add(30 * time.Second); !r.CaughtUp(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not caught up 30 s after the event before the head signal, while the live event after it is in its handler (stats %+v)", r.Stats())
		}
	}
}
