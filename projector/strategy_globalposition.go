package projector

import "github.com/revgate/projector/projector/driver"

// GlobalPosition applies an event only if its global position is past the
// last one the document applied. Cheap, but valid only when one consumer sees
// the events in log order: the runner refuses it with a persistent
// subscription group or with more than one worker.
func GlobalPosition() Strategy { return Strategy{globalPosition{}} }

type globalPosition struct{ versioned }

func (globalPosition) String() string { return "global position" }

func (g globalPosition) check(d stored, ev Event, _ bool) (verdict, error) {
	if err := needPosition(g, ev); err != nil {
		return 0, err
	}
	if d.found && d.meta.Position >= ev.Position {
		return duplicate, nil
	}
	return apply, nil
}

func (globalPosition) record(d stored, ev Event) stored {
	d.meta.Position = ev.Position
	return d
}

func (globalPosition) needs(store driver.Store) error { return needGuarded(store, "global position") }

func (globalPosition) everyRevision() bool { return false }
func (globalPosition) orderedSource() bool { return true }
