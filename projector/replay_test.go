package projector_test

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// parkPoison runs the poisoned cart of holdLog through an engine with the
// park policy while the projection is broken, and returns the store, the
// projection (fixed by then), the parked event and the document as the
// replay found it.
func parkPoison(t *testing.T, strategy projector.Strategy) (*mongostore.Store, *projector.Projection[trail], projector.ParkedEvent, string) {
	t.Helper()
	ctx := context.Background()
	var broken atomic.Bool
	broken.Store(true)
	p := trailProjection(&broken, func(p *projector.Projection[trail]) { p.OnFailure(projector.Park).Idempotency(strategy) })
	_, carts, poisoned := holdLog(t, 200)
	s := newStore(t)
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()), projector.WithParker(s))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range carts[poisoned] {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	parked, err := s.Parked(ctx, "trail")
	if err != nil || len(parked) != 1 || parked[0].StreamRevision != 2 {
		t.Fatalf("parked %+v (%v), want the poison event", parked, err)
	}
	broken.Store(false)
	return s, p, parked[0], poisoned
}

// writeElsewhere writes document id again, as it is, with a write token of
// its own (a rebuild's write, a hand's), and returns its state.
func writeElsewhere(t *testing.T, s *mongostore.Store, p *projector.Projection[trail], id string) trail {
	t.Helper()
	ctx := context.Background()
	state := readTrail(t, s, p, id)
	h, _, err := s.Load(ctx, p.Collection(), id, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Write = ""
	if ok, err := s.Update(ctx, p.Collection(), id, h.Revision, h, state); err != nil || !ok {
		t.Fatalf("write: %v %v", ok, err)
	}
	return state
}

func readTrail(t *testing.T, s *mongostore.Store, p *projector.Projection[trail], id string) trail {
	t.Helper()
	var got trail
	if found, _, err := projector.ReadDocument(context.Background(), s, p, id, &got); err != nil || !found {
		t.Fatalf("read %s: found %v, %v", id, found, err)
	}
	return got
}

// A replay killed between its write and marking the event replayed: run
// again, it finds its write (by the token it recorded on the parked event,
// under the revision gate; by the document's meta, under the other
// strategies) and applies nothing twice: the document is the one a single
// replay gives.
func TestReplay_killed_before_marking_then_run_again_applies_the_event_once(t *testing.T) {
	for _, strategy := range []projector.Strategy{projector.StreamRevision(), projector.RevisionMap()} {
		t.Run(strategy.String(), func(t *testing.T) {
			ctx := context.Background()
			s, p, pe, id := parkPoison(t, strategy)
			e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()), projector.WithParker(s))
			if err != nil {
				t.Fatal(err)
			}
			before := readTrail(t, s, p, id)
			if r := e.Replay(ctx, pe); r.Outcome != projector.Applied {
				t.Fatalf("first replay: %v %v", r.Outcome, r.Err)
			}
			once := readTrail(t, s, p, id)
			if once.Items["poison"] != 1 || reflect.DeepEqual(once, before) {
				t.Fatalf("after one replay: %+v (before %+v)", once, before)
			}
			// Killed here: the event is not marked replayed. The replay
			// runs again on the record as it is now.
			again, err := s.Parked(ctx, "trail")
			if err != nil || len(again) != 1 {
				t.Fatalf("parked after the kill: %+v (%v)", again, err)
			}
			if r := e.Replay(ctx, again[0]); r.Outcome != projector.Duplicate {
				t.Fatalf("second replay: %v %v, want it found applied", r.Outcome, r.Err)
			}
			if got := readTrail(t, s, p, id); !reflect.DeepEqual(got, once) {
				t.Fatalf("after a second replay:\n got %+v\nwant %+v", got, once)
			}
			if err := s.Replayed(ctx, pe, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Under the revision gate, a replay cut short and a document written since
// by something else: whether the document has the event cannot be told, and
// the replay says so instead of applying it a second time.
func TestReplay_cut_short_and_written_since_is_refused_in_one_line(t *testing.T) {
	ctx := context.Background()
	s, p, pe, id := parkPoison(t, projector.StreamRevision())
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()), projector.WithParker(s))
	if err != nil {
		t.Fatal(err)
	}
	if r := e.Replay(ctx, pe); r.Outcome != projector.Applied {
		t.Fatalf("first replay: %v %v", r.Outcome, r.Err)
	}
	// Another write of the document (a rebuild's, a hand's).
	state := writeElsewhere(t, s, p, id)
	again, err := s.Parked(ctx, "trail")
	if err != nil || len(again) != 1 || again[0].Claim == nil {
		t.Fatalf("parked after the kill: %+v (%v)", again, err)
	}
	r := e.Replay(ctx, again[0])
	if r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrReplayUncertain) {
		t.Fatalf("replay: %v %v, want ErrReplayUncertain", r.Outcome, r.Err)
	}
	if got := readTrail(t, s, p, id); !reflect.DeepEqual(got, state) {
		t.Fatalf("the document changed:\n got %+v\nwant %+v", got, state)
	}
}

// An event parked in one build is that build's to replay: replayed into
// another build's collection (a rebuild's), it fails with ErrOtherBuild and
// changes nothing, and the record stays for its own build.
func TestReplay_of_an_event_parked_in_another_build_applies_nothing(t *testing.T) {
	ctx := context.Background()
	s, p, pe, id := parkPoison(t, projector.StreamRevision())
	_, carts, _ := holdLog(t, 200)
	rebuilt := projector.Copy(p, p.Collection()+"_2")
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{rebuilt}, projector.WithRetry(patient()), projector.WithParker(s))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range carts[id] {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := projectortest.CheckDocument(ctx, s, projector.Copy(p, p.Collection()+"_2").(*projector.Projection[trail]), id, carts[id]); err != nil {
		t.Fatal(err)
	}
	if r := e.Replay(ctx, pe); r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrOtherBuild) {
		t.Fatalf("replay into another build: %v %v, want ErrOtherBuild", r.Outcome, r.Err)
	}
	if err := projectortest.CheckDocument(ctx, s, projector.Copy(p, p.Collection()+"_2").(*projector.Projection[trail]), id, carts[id]); err != nil {
		t.Fatalf("after the replay: %v", err)
	}
}

// moving is a store whose conditional updates match nothing while misses
// lasts: the document moves under each write, as when live events keep
// coming.
type moving struct {
	*mongostore.Store
	misses atomic.Int32
}

func (m *moving) Update(ctx context.Context, coll, id string, from uint64, head driver.Head, state any) (bool, error) {
	if m.misses.Add(-1) >= 0 {
		return false, nil
	}
	return m.Store.Update(ctx, coll, id, from, head, state)
}

// A replay whose writes all miss (the document keeps moving) gives up having
// written nothing, and leaves no claim behind: run again, once the document
// was written by something else, it applies the event instead of refusing
// it as a replay cut short.
func TestReplay_a_replay_that_wrote_nothing_leaves_no_claim_behind(t *testing.T) {
	ctx := context.Background()
	s, p, pe, id := parkPoison(t, projector.StreamRevision())
	few := retry.Default()
	few.InitialDelay, few.MaxRetries = time.Millisecond, 2
	m := &moving{Store: s}
	m.misses.Store(3)
	e, err := projector.NewEngine(m, cart.Registry(), []projector.Definition{p}, projector.WithRetry(few), projector.WithParker(s))
	if err != nil {
		t.Fatal(err)
	}
	if r := e.Replay(ctx, pe); r.Outcome != projector.Failed {
		t.Fatalf("replay while the document moves: %v %v, want failed", r.Outcome, r.Err)
	}
	again, err := s.Parked(ctx, "trail")
	if err != nil || len(again) != 1 || again[0].Claim != nil {
		t.Fatalf("parked after the failed replay: %+v (%v), want the record without a claim", again, err)
	}
	// Something else writes the document meanwhile.
	writeElsewhere(t, s, p, id)
	if r := e.Replay(ctx, again[0]); r.Outcome != projector.Applied {
		t.Fatalf("replay run again: %v %v, want applied", r.Outcome, r.Err)
	}
}
