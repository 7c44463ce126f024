package projector_test

import (
	"context"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
)

// untracked delivers its events without checkpoints (a source that keeps
// its own position), then a checkpoint-only delivery at the head.
type untracked struct{ events []projector.Event }

func (u *untracked) Subscribe(context.Context, *projector.Checkpoint) (projector.Subscription, error) {
	return &untrackedSub{events: u.events}, nil
}
func (*untracked) Ordered() bool { return true }

type untrackedSub struct {
	events []projector.Event
	sent   int
}

func (s *untrackedSub) Next(ctx context.Context) (projector.Delivery, error) {
	if s.sent < len(s.events) {
		ev := s.events[s.sent]
		s.sent++
		return projector.Delivery{Event: &ev}, nil
	}
	if s.sent == len(s.events) {
		s.sent++
		return projector.Delivery{CaughtUp: true, Checkpoint: &projector.Checkpoint{Position: 1000}}, nil
	}
	<-ctx.Done()
	return projector.Delivery{}, ctx.Err()
}
func (*untrackedSub) Close() error { return nil }

type blockedCount struct {
	N int `bson:"n"`
}

// An event delivered before the head without a checkpoint (a source that
// keeps its own position) is still in its handler when the head's
// checkpoint-only delivery comes: the tracker holds only the latter, so
// readiness cannot go by it, and waits for nothing in flight.
func TestRunner_is_not_caught_up_while_an_untracked_event_before_the_head_is_handled(t *testing.T) {
	s := newStore(t)
	release := make(chan struct{})
	p := projector.New[blockedCount]("blocked_counts", projector.StreamSuffix(cart.StreamPrefix))
	projector.On(p, func(b blockedCount, _ cart.ShoppingCartOpened) (blockedCount, error) {
		<-release
		b.N++
		return b, nil
	})
	all, _ := cartEvents(t, 1)
	r, err := projector.NewRunner("untracked", newEngine(t, s, patient(), p), &untracked{events: all[:1]}, nil, projector.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	runInBackground(t, r)
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if r.CaughtUp() {
			t.Fatalf("caught up while the event delivered before the head is still in its handler (in flight %+v)", r.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
