package projector

import "github.com/revgate/projector/projector/driver"

// None applies every delivery: for operations that are idempotent and
// independent of their order only (adding to a set, keeping a maximum),
// where applying an event twice, or late, changes nothing. Setting a status
// is not one: a late copy of an earlier event sets it back. Writes still
// cannot overwrite each other.
func None() Strategy { return Strategy{none{}} }

type none struct{ versioned }

func (none) String() string { return "none" }

func (none) check(stored, Event, bool) (verdict, error) { return apply, nil }

func (none) record(d stored, _ Event) stored { return d }

func (none) needs(store driver.Store) error { return needGuarded(store, "none") }

func (none) everyRevision() bool { return false }
func (none) orderedSource() bool { return false }
