package app

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// As TestRebuildSegments_processes_with_different_heads_do_not_wait_for_each_other,
// but B's run, past A's head, does not end caught up: it stops at an event that may
// succeed later (retryable), again and again. A is done and switches: it takes the
// finish lease and waits for every segment's lease. B, whose run cannot
// catch up now, sees A finishing and lets go of its segment, rather than
// the two waiting for each other for ever.
func TestRebuildSegments_a_process_whose_run_keeps_failing_lets_go_when_another_finishes(t *testing.T) {
	ctx := context.Background()
	store := mongostore.New(mongotest.Database(t))
	p := Projection{Definition: cart.NewDetailsProjection()}
	building, err := store.StartRebuild(ctx, p.Definition.Name(), "x")
	if err != nil {
		t.Fatal(err)
	}
	const lease = time.Second
	proc := func(holder string, end uint64, fails bool) (*segmentedRebuild, segmentWork) {
		s := &session{c: &runConfig{lease: lease, segments: 2}, store: store, holder: holder, logger: slog.New(slog.DiscardHandler)}
		rb := &segmentedRebuild{c: &rebuildConfig{segments: 2, lease: lease}, p: p, s: s, store: store, building: building, end: end,
			sl: &slot{name: p.Definition.Name(), projection: p}, caught: map[int]bool{}}
		return rb, segmentWork{group: rebuildGroup(building), done: rb.done,
			run: func(ctx context.Context, cps func() *segmentCheckpoints) error {
				c := cps()
				if _, err := c.LoadCheckpoint(ctx, building); err != nil {
					return err
				}
				if err := c.SaveCheckpoint(ctx, building, projector.Checkpoint{Position: end}); err != nil {
					return err
				}
				if fails {
					return &projector.Error{Projection: p.Definition.Name(), Err: errors.New("the store did not answer"), Wanted: -1, Seen: -1}
				}
				rb.caughtUp(c.keys)
				return nil
			}}
	}
	a, workA := proc("A", 100, false)
	b, workB := proc("B", 200, true)
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	bDone := make(chan error, 1)
	go func() { bDone <- b.s.shareSegments(bctx, b.sl, workB) }()
	if err := a.s.shareSegments(ctx, a.sl, workA); err != nil {
		t.Fatal(err)
	}
	h, _, err := holdLease(ctx, store, rebuildGroup(building)+"/finish", a.s.holder, lease, a.s.logger)
	if err != nil {
		t.Fatal(err)
	}
	defer h.release()
	hctx, cancel := context.WithTimeout(ctx, 15*lease)
	defer cancel()
	held, err := a.holdAll(hctx)
	for _, h := range held {
		h.release()
	}
	if err != nil {
		t.Fatalf("A holding every segment to switch: %v (held %d of 2): B, whose run keeps failing, never lets go", err, len(held))
	}
	select {
	case err := <-bDone:
		t.Logf("B: %v", err)
	case <-time.After(10 * lease):
		t.Fatal("B did not stop once A was switching")
	}
}
