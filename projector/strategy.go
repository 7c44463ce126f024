package projector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/revgate/projector/retry"
)

// Strategy is how a projection gets exactly-once effect from at-least-once
// delivery. Pick it when the projection is defined ([Projection.Idempotency]).
type Strategy struct {
	kind      strategyKind
	window    int
	retention time.Duration
}

type strategyKind int

const (
	kindStreamRevision strategyKind = iota
	kindRevisionMap
	kindGlobalPosition
	kindHandledIDs
	kindInbox
	kindNone
)

// StreamRevision is the revision gate: one document per stream, holding the
// revision of the last event applied. The default, and the right one whenever
// a document is fed by exactly one stream (cart details).
func StreamRevision() Strategy { return Strategy{kind: kindStreamRevision} }

// RevisionMap gates each source stream on its own: the document holds the
// last revision applied of every stream that feeds it, so a document fed by
// several streams (a per-client summary of the client's carts) gets each
// stream's events exactly once and in order. Every event of a feeding stream
// must be routed to the document (handled or not), as with the gate.
func RevisionMap() Strategy { return Strategy{kind: kindRevisionMap} }

// GlobalPosition applies an event only if its global position is past the
// last one the document applied. Cheap, but valid only when one consumer sees
// the events in log order: the runner refuses it with a persistent
// subscription group or with more than one worker.
func GlobalPosition() Strategy { return Strategy{kind: kindGlobalPosition} }

// HandledIDs keeps the ids of the last n events applied on the document and
// checks and updates them in the same single-document write as the change: no
// transaction needed, any delivery order. An event older than the window
// (its position is below an id that left the window) and not in it cannot be
// told apart from a duplicate: it fails with [ErrOutsideWindow] instead of
// being applied twice. Size n above the redeliveries a document can see at
// once (a global counter fed by every stream needs a larger n).
func HandledIDs(n int) Strategy { return Strategy{kind: kindHandledIDs, window: n} }

// DefaultInboxRetention is how long the inbox keeps a handled event's record
// by default: longer than any redelivery the projector can see (a checkpoint
// interval, a resubscription after a ten-minute outage, a persistent group's
// message timeout and retries), with a wide margin.
const DefaultInboxRetention = 24 * time.Hour

// Inbox records each handled event in an inbox collection keyed by
// (projection, event id), in the same transaction as the change; a duplicate
// hits the key and is discarded. Records go after retention (a TTL index;
// 0 means [DefaultInboxRetention]). It needs multi-document transactions (a
// MongoDB replica set); without them the engine fails at start-up.
func Inbox(retention time.Duration) Strategy {
	if retention <= 0 {
		retention = DefaultInboxRetention
	}
	return Strategy{kind: kindInbox, retention: retention}
}

// None applies every delivery: for naturally idempotent operations only
// (setting a status, deleting), where applying an event twice changes nothing.
// Writes still cannot overwrite each other.
func None() Strategy { return Strategy{kind: kindNone} }

func (s Strategy) String() string {
	switch s.kind {
	case kindStreamRevision:
		return "stream revision"
	case kindRevisionMap:
		return "per-stream revision map"
	case kindGlobalPosition:
		return "global position"
	case kindHandledIDs:
		return fmt.Sprintf("handled ids (last %d)", s.window)
	case kindInbox:
		return fmt.Sprintf("inbox (kept %v)", s.retention)
	case kindNone:
		return "none"
	}
	return "unknown strategy"
}

// NeedsEveryRevision reports whether the strategy needs every event of a
// stream that feeds a document, in revision order: a source that leaves
// events out by type leaves holes it would wait for forever.
func (s Strategy) NeedsEveryRevision() bool {
	return s.kind == kindStreamRevision || s.kind == kindRevisionMap
}

// NeedsOrderedSource reports whether the strategy is valid only with one
// consumer seeing the log in order.
func (s Strategy) NeedsOrderedSource() bool { return s.kind == kindGlobalPosition }

// ErrOutsideWindow: under [HandledIDs], an event older than the window of
// handled ids and not in it: maybe applied, maybe not; reported, not applied.
var ErrOutsideWindow = errors.New("event is older than the window of handled ids")

// ErrNoTransactions: the inbox strategy on a server without transactions.
var ErrNoTransactions = errors.New("the server has no multi-document transactions")

// Meta is what a guarded document holds besides its state: how the engine
// knows which events it has applied. The store keeps it in fields of its own.
type Meta struct {
	// Version counts the writes; every write is conditional on it.
	Version int64
	// Revisions: last revision applied per source stream (RevisionMap).
	Revisions map[string]uint64
	// Position: global position of the last event applied (GlobalPosition).
	Position uint64
	// Handled: the last events applied, oldest first (HandledIDs); Evicted:
	// the highest position among those that left the window.
	Handled []Handled
	Evicted uint64
}

// Handled is an event a [HandledIDs] window remembers.
type Handled struct {
	ID       string
	Position uint64
}

// GuardedStore is what the strategies other than [StreamRevision] need of
// the store: whole-document reads and version-conditional writes.
type GuardedStore interface {
	// LoadGuarded reads document id with its meta, decoding the state into
	// state; found is false when there is none.
	LoadGuarded(ctx context.Context, collection, id string, state any) (Meta, bool, error)
	// PutGuarded writes state and meta (meta.Version is the new version) if
	// the stored version is expected (-1: only if there is no document);
	// written is false otherwise.
	PutGuarded(ctx context.Context, collection, id string, expected int64, meta Meta, state any) (written bool, err error)
}

// InboxStore is what the [Inbox] strategy needs: transactions and an inbox
// collection.
type InboxStore interface {
	GuardedStore
	// Transactions reports whether the server runs multi-document
	// transactions.
	Transactions(ctx context.Context) (bool, error)
	// EnsureInbox creates the inbox collection of projection with a TTL of
	// retention on its records.
	EnsureInbox(ctx context.Context, projection string, retention time.Duration) error
	// InTransaction runs fn in a transaction; fn's store calls take its ctx.
	InTransaction(ctx context.Context, fn func(ctx context.Context) error) error
	// Receive records event id in projection's inbox; ErrDuplicate when it is
	// there already.
	Receive(ctx context.Context, projection, eventID string) error
}

// strategyOf returns p's strategy.
func strategyOf(p Definition) Strategy { return p.strategy() }

// prepareStrategies checks that the store can do what the projections'
// strategies need.
func (e *Engine) prepareStrategies(ctx context.Context) error {
	for _, p := range e.projections {
		s := strategyOf(p)
		if s.kind == kindStreamRevision {
			continue
		}
		if _, ok := e.store.(GuardedStore); !ok {
			return fmt.Errorf("projector: projection %q uses the %s strategy, which the store %T cannot keep", p.Name(), s, e.store)
		}
		if s.kind != kindInbox {
			continue
		}
		is, ok := e.store.(InboxStore)
		if !ok {
			return fmt.Errorf("projector: projection %q uses the inbox strategy, which the store %T cannot keep", p.Name(), e.store)
		}
		tx, err := is.Transactions(ctx)
		if err != nil {
			return err
		}
		if !tx {
			return fmt.Errorf("projector: projection %q uses the inbox strategy, but %w: "+
				"run on a MongoDB replica set, or pick the handled-ids strategy (no transaction needed), "+
				"the per-stream revision map, or the global position with one ordered consumer", p.Name(), ErrNoTransactions)
		}
		if err := is.EnsureInbox(ctx, p.Name(), s.retention); err != nil {
			return err
		}
	}
	return nil
}

// docLocks serializes the read-apply-write of a guarded document within one
// engine (the version check makes it safe across processes, on a store with
// atomic conditional writes).
type docLocks struct {
	mu    sync.Mutex
	locks map[docKey]*docLock
}

type docLock struct {
	sync.Mutex
	users int
}

func (l *docLocks) lock(k docKey) func() {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[docKey]*docLock{}
	}
	d := l.locks[k]
	if d == nil {
		d = &docLock{}
		l.locks[k] = d
	}
	d.users++
	l.mu.Unlock()
	d.Lock()
	return func() {
		d.Unlock()
		l.mu.Lock()
		if d.users--; d.users == 0 {
			delete(l.locks, k)
		}
		l.mu.Unlock()
	}
}

// streamKey makes a stream name usable as a field name: no dots, no dollar
// signs, no percent signs left unescaped.
func streamKey(stream string) string {
	return strings.NewReplacer("%", "%25", ".", "%2E", "$", "%24").Replace(stream)
}

// guarded applies ev to document id of p under a strategy other than the
// revision gate.
func (e *Engine) guarded(ctx context.Context, p Definition, id string, ev Event, apply applyStep) Result {
	s := strategyOf(p)
	gs := e.store.(GuardedStore)
	key := docKey{p.Collection(), id}
	waits, attempts := 0, 0
	var skipped error
	outcome, err := retry.DoValue(ctx, e.policyCounting(p, id, ev, &waits), func(ctx context.Context) (Outcome, error) {
		attempts++
		unlock := e.locks.lock(key)
		defer unlock()
		if s.kind == kindInbox {
			var out Outcome
			err := e.store.(InboxStore).InTransaction(ctx, func(ctx context.Context) error {
				if err := e.store.(InboxStore).Receive(ctx, p.Name(), ev.ID); errors.Is(err, ErrDuplicate) {
					out = Duplicate
					return nil
				} else if err != nil {
					return err
				}
				var err error
				out, skipped, err = e.guardedStep(ctx, gs, p, id, ev, s, apply, attempts)
				if err == nil && out == Duplicate {
					err = errors.New("inbox and document disagree")
				}
				return err
			})
			return out, err
		}
		out, why, err := e.guardedStep(ctx, gs, p, id, ev, s, apply, attempts)
		skipped = why
		return out, err
	}, e.retryOpts...)
	if err == nil {
		return e.result(p, id, ev, outcome, waits, skipped)
	}
	wanted := int64(-1)
	switch {
	case retry.IsPermanent(err), ctx.Err() != nil:
	case errors.Is(err, errNotVisible) || errors.Is(err, errMoved):
		wanted = int64(ev.StreamRevision) - 1
		err = fmt.Errorf("%w: %w", ErrPredecessorMissing, err)
	}
	r := e.fail(p, id, ev, wanted, -1, attempts, err)
	r.Waits = waits
	return r
}

// guardedStep is one read-decide-write of a guarded document.
func (e *Engine) guardedStep(ctx context.Context, gs GuardedStore, p Definition, id string, ev Event, s Strategy, apply applyStep, attempts int) (Outcome, error, error) {
	state := p.newState()
	meta, found, err := gs.LoadGuarded(ctx, p.Collection(), id, state)
	if err != nil {
		return 0, nil, err
	}
	sk := streamKey(ev.StreamID)
	if (s.kind == kindGlobalPosition || s.kind == kindHandledIDs) && ev.Position == 0 {
		return 0, nil, retry.Permanent(fmt.Errorf("the %s strategy needs the event's global position, and it has none", s))
	}
	switch s.kind {
	case kindRevisionMap:
		have, seen := meta.Revisions[sk]
		switch {
		case seen && have >= ev.StreamRevision:
			return Duplicate, nil, nil
		case !seen && ev.StreamRevision > 0, seen && have < ev.StreamRevision-1:
			return 0, nil, errNotVisible // the stream's previous event first
		}
	case kindGlobalPosition:
		if found && meta.Position >= ev.Position {
			return Duplicate, nil, nil
		}
	case kindHandledIDs:
		if slices.ContainsFunc(meta.Handled, func(h Handled) bool { return h.ID == ev.ID }) {
			return Duplicate, nil, nil
		}
		if found && ev.Position <= meta.Evicted {
			why := fmt.Errorf("%w: position %d, window starts after %d", ErrOutsideWindow, ev.Position, meta.Evicted)
			if e.policyOf(p) == Block {
				return 0, nil, retry.Permanent(why)
			}
			// Skipped or parked, per the policy: reported, the document untouched.
			if err := e.park(ctx, p, id, ev, why, attempts); err != nil {
				return 0, nil, err
			}
			return Applied, why, nil
		}
	}
	var from any
	if found {
		from = state
	}
	next, skipped, err := e.step(p, from, apply)
	if err != nil {
		return 0, nil, err
	}
	if skipped != nil {
		if found { // as stored: the step may have changed it in place
			fresh := p.newState()
			if _, _, err := gs.LoadGuarded(ctx, p.Collection(), id, fresh); err != nil {
				return 0, nil, err
			}
			next = fresh
		}
		if err := e.park(ctx, p, id, ev, skipped, attempts); err != nil {
			return 0, nil, err
		}
	}
	expected := int64(-1)
	if found {
		expected = meta.Version
	}
	nm := meta
	nm.Version = meta.Version + 1
	switch s.kind {
	case kindRevisionMap:
		nm.Revisions = make(map[string]uint64, len(meta.Revisions)+1)
		for k, v := range meta.Revisions {
			nm.Revisions[k] = v
		}
		nm.Revisions[sk] = ev.StreamRevision
	case kindGlobalPosition:
		nm.Position = ev.Position
	case kindHandledIDs:
		nm.Handled = append(slices.Clone(meta.Handled), Handled{ID: ev.ID, Position: ev.Position})
		if over := len(nm.Handled) - s.window; over > 0 {
			for _, h := range nm.Handled[:over] {
				nm.Evicted = max(nm.Evicted, h.Position)
			}
			nm.Handled = nm.Handled[over:]
		}
	}
	written, err := gs.PutGuarded(ctx, p.Collection(), id, expected, nm, next)
	switch {
	case err != nil:
		return 0, nil, err
	case !written:
		return 0, nil, errMoved
	}
	return Applied, skipped, nil
}
