package projector

import "github.com/revgate/projector/projector/driver"

// None applies every delivery: for naturally idempotent operations only
// (setting a status, deleting), where applying an event twice changes nothing.
// Writes still cannot overwrite each other.
func None() Strategy { return Strategy{none{}} }

type none struct{ versioned }

func (none) String() string { return "none" }

func (none) check(stored, Event, bool) (verdict, error) { return apply, nil }

func (none) record(d stored, _ Event) stored { return d }

func (none) needs(store driver.Store) error { return needGuarded(store, "none") }

func (none) everyRevision() bool { return false }
func (none) orderedSource() bool { return false }
