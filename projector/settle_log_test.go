package projector_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// settleFailing delivers its events as a persistent group does, each to be
// settled, and every settling fails (the subscription is gone).
type settleFailing struct{ events []projector.Event }

func (s *settleFailing) Subscribe(context.Context, *projector.Checkpoint) (projector.Subscription, error) {
	return &settleFailingSub{events: s.events}, nil
}

type settleFailingSub struct {
	events []projector.Event
	sent   int
}

func (s *settleFailingSub) Next(ctx context.Context) (projector.Delivery, error) {
	if s.sent == len(s.events) {
		<-ctx.Done()
		return projector.Delivery{}, ctx.Err()
	}
	ev := s.events[s.sent]
	s.sent++
	return projector.Delivery{Event: &ev, Settle: func([]projector.Result) error { return errors.New("EOF") }}, nil
}

func (s *settleFailingSub) Close() error { return nil }

// Deliveries whose settling fails (their subscription dropped: the server
// delivers them again) are not logged one by one, hundreds after a drop:
// the first is, and the run sums the others.
func TestRunner_logs_the_first_delivery_it_cannot_settle_and_sums_the_others(t *testing.T) {
	r := boardRegistry()
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedbuf.Writer{Mu: &mu, W: &logs}, nil))
	e, err := projector.NewEngine(newStore(t), r, []projector.Definition{laneProjection(r)}, projector.WithRetry(patient()), projector.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	log := projectortest.NewLog(r)
	var raw []projector.Event
	for i := range 30 {
		evs, _ := appendStored(t, log, r, fmt.Sprintf("card-%d", i), stored{"CardMovedV3", `{"column": {"name": "Todo"}}`})
		raw = append(raw, evs...)
	}
	runner, err := projector.NewRunner("boards", e, &settleFailing{events: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	waitFor(t, "every event handled", func() bool { return runner.Stats().Applied == 30 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	if n := strings.Count(text, `msg="settling an event"`); n != 1 {
		t.Errorf("%d lines of a delivery not settled, want 1:\n%s", n, text)
	}
	if !strings.Contains(text, `msg="events not settled, their subscription gone: the server delivers them again" runner=boards events=30`) {
		t.Errorf("the log does not sum the 30 deliveries not settled:\n%s", text)
	}
}
