package projector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/revgate/projector/projector/driver"
)

// defaultInboxRetention is how long the inbox keeps a handled event's record
// by default: longer than any redelivery the projector can see (a checkpoint
// interval, a resubscription after a ten-minute outage, a persistent group's
// message timeout and retries), with a wide margin.
const defaultInboxRetention = 24 * time.Hour

// Inbox records each handled event in an inbox collection keyed by
// (projection, event id), in the same transaction as the change; a duplicate
// hits the key and is discarded. Records go after retention (a TTL index;
// 0 means 24 hours; [NewEngine] refuses a negative one). It needs
// multi-document transactions (a MongoDB replica set); without them the
// engine fails at start-up.
func Inbox(retention time.Duration) Strategy {
	if retention == 0 {
		retention = defaultInboxRetention
	}
	return Strategy{inbox{retention: retention}}
}

func (i inbox) valid() error {
	if i.retention < 0 {
		return fmt.Errorf("Inbox(%v): want a retention of 0 (%v) or more", i.retention, defaultInboxRetention)
	}
	return nil
}

type inbox struct {
	versioned
	retention time.Duration
}

func (i inbox) String() string { return fmt.Sprintf("inbox (kept %v)", i.retention) }

// check: every event the inbox lets through applies (within).
func (inbox) check(stored, Event, bool) (verdict, error) { return apply, nil }

// record: nothing on the document; the inbox record is written in within.
func (inbox) record(d stored, _ Event) stored { return d }

func (inbox) needs(store driver.Store) error {
	if _, ok := store.(driver.InboxStore); !ok {
		return fmt.Errorf("the inbox strategy needs a store with transactions and an inbox (driver.InboxStore); %T has not", store)
	}
	return nil
}

// prepare checks that the server runs transactions and creates the inbox
// with its retention.
func (i inbox) prepare(ctx context.Context, e *Engine, projection string) error {
	tx, err := e.inboxStore.Transactions(ctx)
	if err != nil {
		return err
	}
	if !tx {
		return fmt.Errorf("projector: projection %q uses the inbox strategy, but %w: "+
			"run on a MongoDB replica set, or pick the handled-ids strategy (no transaction needed), "+
			"the per-stream revision map, or the global position with one ordered consumer", projection, ErrNoTransactions)
	}
	return e.inboxStore.EnsureInbox(ctx, projection, i.retention)
}

// within records the event in the inbox and runs the attempt in the same
// transaction; an event recorded already is a duplicate.
func (inbox) within(ctx context.Context, e *Engine, t target, ev Event, attempt func(context.Context) (step, error)) (step, error) {
	var out step
	err := e.docs().InTransaction(ctx, func(ctx context.Context) error {
		if err := e.docs().Receive(ctx, t.p.Name(), ev.ID); errors.Is(err, driver.ErrDuplicate) {
			out = step{outcome: Duplicate}
			return nil
		} else if err != nil {
			return err
		}
		var err error
		out, err = attempt(ctx)
		if err == nil && out.outcome == Duplicate {
			err = errors.New("inbox and document disagree")
		}
		return err
	})
	return out, err
}

func (inbox) everyRevision() bool { return false }
func (inbox) orderedSource() bool { return false }
