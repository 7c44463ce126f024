package projector_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// plainStore keeps revisions only: a driver.Store and nothing more.
type plainStore struct{}

func (plainStore) Load(context.Context, string, string, uint64, any) (driver.Head, bool, error) {
	return driver.Head{}, false, errors.New("plainStore: not for I/O")
}
func (plainStore) Insert(context.Context, string, string, driver.Head, any) error {
	return errors.New("plainStore: not for I/O")
}
func (plainStore) Update(context.Context, string, string, uint64, driver.Head, any) (bool, error) {
	return false, errors.New("plainStore: not for I/O")
}
func (plainStore) Delete(context.Context, string, string, uint64) (bool, error) {
	return false, errors.New("plainStore: not for I/O")
}
func (plainStore) EnsureIndexes(context.Context, string, []driver.Index) error {
	return errors.New("plainStore: not for I/O")
}

// guardedOnly keeps versioned documents too, but has no transactions.
type guardedOnly struct{ plainStore }

func (guardedOnly) LoadGuarded(context.Context, string, string, any) (driver.Meta, bool, error) {
	return driver.Meta{}, false, errors.New("guardedOnly: not for I/O")
}
func (guardedOnly) PutGuarded(context.Context, string, string, int64, driver.Meta, any) (bool, error) {
	return false, errors.New("guardedOnly: not for I/O")
}

// NewEngine refuses, with one error and no I/O, a store that cannot keep a
// projection's strategy, and settings that cannot work; before, a store
// with only driver.Store and a RevisionMap projection made Handle panic at
// the first event.
func TestNewEngine_refuses_what_cannot_work_before_the_first_event(t *testing.T) {
	cases := []struct {
		name  string
		store driver.Store
		def   projector.Definition
		opts  []projector.Option
		want  string
	}{
		{"a revision map on a store of revisions only", plainStore{}, cart.NewClientSummaryProjection(), nil,
			`projection "cart_client_summary": the per-stream revision map strategy needs whole-document reads and version-conditional writes (driver.GuardedStore); projector_test.plainStore has not`},
		{"handled ids on a store of revisions only", plainStore{}, cart.NewShopSummaryProjection(), nil,
			`the handled ids (last 2000) strategy needs whole-document reads and version-conditional writes`},
		{"global position on a store of revisions only", plainStore{}, cart.NewDetailsProjection().Idempotency(projector.GlobalPosition()), nil,
			`the global position strategy needs whole-document reads`},
		{"none on a store of revisions only", plainStore{}, cart.NewDetailsProjection().Idempotency(projector.None()), nil,
			`the none strategy needs whole-document reads`},
		{"an inbox on a store without transactions", guardedOnly{}, cart.NewDetailsProjection().Idempotency(projector.Inbox(time.Hour)), nil,
			`the inbox strategy needs a store with transactions and an inbox (driver.InboxStore); projector_test.guardedOnly has not`},
		{"an empty handled-ids window", guardedOnly{}, cart.NewDetailsProjection().Idempotency(projector.HandledIDs(0)), nil,
			`a handled-ids window must hold at least 1 id, not 0`},
		{"the park policy without a parker", plainStore{}, cart.NewDetailsProjection(), []projector.Option{projector.WithFailurePolicy(projector.Park)},
			`the park policy needs a place to record parked events`},
		{"a projection's own park policy without a parker", plainStore{}, cart.NewDetailsProjection().OnFailure(projector.Park), nil,
			`the park policy needs a place to record parked events`},
		{"an unknown failure policy", plainStore{}, cart.NewDetailsProjection().OnFailure(projector.FailurePolicy(7)), nil,
			`unknown failure policy 7`},
		{"no projection", plainStore{}, nil, nil, `engine has no projections`},
		{"a nil store in an interface", (*mongostore.Store)(nil), cart.NewDetailsProjection(), nil, `engine needs a store and a registry`},
		{"a negative inbox retention", guardedOnly{}, cart.NewDetailsProjection().Idempotency(projector.Inbox(-time.Hour)), nil,
			`Inbox(-1h0m0s): want a retention of 0 (24h0m0s) or more`},
		{"a known-documents cache of less than nothing", plainStore{}, cart.NewDetailsProjection(), []projector.Option{projector.WithKnownDocuments(-1)},
			`WithKnownDocuments(-1): want 0 (the default, 65536) or more`},
		{"an empty tie prefix", guardedOnly{}, cart.NewClientSummaryProjection().TieStreams(""), nil,
			`projection "cart_client_summary" ties streams by an empty prefix`},
		{"a retry policy that cannot work", plainStore{}, cart.NewDetailsProjection(), []projector.Option{projector.WithRetry(func() retry.Policy { p := retry.Default(); p.Multiplier = 0.5; return p }())},
			`multiplier must be >= 1`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defs := []projector.Definition{c.def}
			if c.def == nil {
				defs = nil
			}
			e, err := projector.NewEngine(c.store, cart.Registry(), defs, c.opts...)
			if err == nil || e != nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("NewEngine: %v, %v; want one line with %q", e, err, c.want)
			}
		})
	}
}

// What a store can do is found at construction: a store of revisions only
// runs the revision gate, event by event (no batch path without bulk
// writes), and HandleBatch falls back to Handle instead of asserting.
func TestNewEngine_a_store_of_revisions_only_runs_the_gate_without_the_batch_path(t *testing.T) {
	e, err := projector.NewEngine(plainStore{}, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
		projector.WithRetry(func() retry.Policy { p := retry.Default(); p.MaxRetries = 0; return p }()))
	if err != nil {
		t.Fatal(err)
	}
	evs := projectortest.NewLog(cart.Registry()).MustAppend(t, cart.StreamID("c1"),
		cart.ShoppingCartOpened{ShoppingCartID: "c1", ClientID: "x", OpenedAt: t0},
		cart.ShoppingCartConfirmed{ShoppingCartID: "c1", ConfirmedAt: t0})
	out := e.HandleBatch(context.Background(), evs)
	if len(out) != 2 || len(out[0]) != 1 || out[0][0].Outcome != projector.Failed || !strings.Contains(out[0][0].Err.Error(), "plainStore: not for I/O") {
		t.Fatalf("results %+v: want the first event to go through the gate (and fail on this store's I/O)", out)
	}
	if len(out[1]) != 1 || !errors.Is(out[1][0].Err, projector.ErrNotHandled) {
		t.Fatalf("results %+v: want the second left alone after the first failed", out[1])
	}
}
