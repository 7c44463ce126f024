package projector

import (
	"fmt"
	"slices"

	"github.com/revgate/projector/projector/driver"
)

// HandledIDs keeps the ids of the last n events applied on the document and
// checks and updates them in the same single-document write as the change: no
// transaction needed, any delivery order. An event older than the window
// (its position is below an id that left the window) and not in it cannot be
// told apart from a duplicate: it fails with [ErrOutsideWindow] instead of
// being applied twice. Size n above the redeliveries a document can see at
// once (a global counter fed by every stream needs a larger n).
func HandledIDs(n int) Strategy { return Strategy{handledIDs{window: n}} }

type handledIDs struct {
	versioned
	window int
}

func (h handledIDs) String() string { return fmt.Sprintf("handled ids (last %d)", h.window) }

// check: a duplicate when the event's id is in the window; refused (under
// the failure policy, the document untouched) when it is older than the
// window and not in it.
func (h handledIDs) check(d stored, ev Event, _ bool) (verdict, error) {
	if err := needPosition(h, ev); err != nil {
		return 0, err
	}
	if slices.ContainsFunc(d.meta.Handled, func(x driver.Handled) bool { return x.ID == ev.ID }) {
		return duplicate, nil
	}
	return outsideWindow(d.found, d.meta, ev)
}

// outsideWindow refuses ev, not in a window of a document (found) whose
// meta is m, when it stands at or before the window's start (m's
// evicted position, ordered as $all orders positions: the events of a
// legacy TCP transaction share their commit position).
func outsideWindow(found bool, m driver.Meta, ev Event) (verdict, error) {
	if start := evictedAt(m); found && !ev.at().After(start) {
		return refuse, fmt.Errorf("%w: position %s, window starts after %s", ErrOutsideWindow, ev.at(), start)
	}
	return apply, nil
}

// evictedAt is where the window of m starts: after this position.
func evictedAt(m driver.Meta) Checkpoint { return positionAt(m.Evicted, m.EvictedPrepare) }

// handledOf is ev as a window remembers it.
func handledOf(ev Event) driver.Handled {
	return driver.Handled{ID: ev.ID, Position: ev.Position, Prepare: ev.ownPrepare()}
}

// evict moves m's evicted position to x's, which leaves the window, where
// x is past it.
func evict(m *driver.Meta, x driver.Handled) {
	if positionAt(x.Position, x.Prepare).After(evictedAt(*m)) {
		m.Evicted, m.EvictedPrepare = x.Position, x.Prepare
	}
}

// record: the event's id at the end of the window, the oldest ones out.
func (h handledIDs) record(d stored, ev Event) stored {
	d.meta.Handled = append(slices.Clone(d.meta.Handled), handledOf(ev))
	if over := len(d.meta.Handled) - h.window; over > 0 {
		for _, x := range d.meta.Handled[:over] {
			evict(&d.meta, x)
		}
		d.meta.Handled = d.meta.Handled[over:]
	}
	return d
}

func (h handledIDs) needs(store driver.Store) error { return needGuarded(store, h.String()) }

// valid reports a window that cannot hold an id.
func (h handledIDs) valid() error {
	if h.window < 1 {
		return fmt.Errorf("a handled-ids window must hold at least 1 id, not %d", h.window)
	}
	return nil
}

func (handledIDs) everyRevision() bool { return false }
func (handledIDs) orderedSource() bool { return false }

// tally: the window's ids in a set, so that a check does not scan the
// window, and its events appended once, so that a record does not copy it.
func (h handledIDs) tally(d stored) tally {
	t := &handledTally{h: h, found: d.found, m: d.meta, handled: slices.Clone(d.meta.Handled), ids: make(map[string]struct{}, len(d.meta.Handled))}
	for _, x := range t.handled {
		t.ids[x.ID] = struct{}{}
	}
	return t
}

type handledTally struct {
	h       handledIDs
	found   bool
	m       driver.Meta
	handled []driver.Handled // oldest first; the window is handled[start:]
	start   int
	ids     map[string]struct{} // the ids of the window
}

func (t *handledTally) check(ev Event, _ bool) (verdict, error) {
	if err := needPosition(t.h, ev); err != nil {
		return 0, err
	}
	if _, ok := t.ids[ev.ID]; ok {
		return duplicate, nil
	}
	return outsideWindow(t.found, t.m, ev)
}

func (t *handledTally) record(ev Event) {
	t.handled = append(t.handled, handledOf(ev))
	t.ids[ev.ID] = struct{}{}
	t.found = true
	for len(t.handled)-t.start > t.h.window {
		x := t.handled[t.start]
		delete(t.ids, x.ID)
		evict(&t.m, x)
		t.start++
	}
}

func (t *handledTally) meta() driver.Meta {
	m := t.m
	m.Handled = slices.Clone(t.handled[t.start:])
	return m
}
