package projector

import "github.com/revgate/projector/projector/driver"

// GlobalPosition applies an event only if its global position is past the
// last one the document applied. Cheap, but valid only when one consumer sees
// the events in log order: the runner refuses it with a persistent
// subscription group or with more than one worker. Positions are ordered
// as $all orders them ([Checkpoint.After]): by commit position, then by
// prepare position, so that the events of a transaction written by the
// legacy TCP API, which share their commit position, each apply.
func GlobalPosition() Strategy { return Strategy{globalPosition{}} }

type globalPosition struct{ versioned }

func (globalPosition) String() string { return "global position" }

func (g globalPosition) check(d stored, ev Event, _ bool) (verdict, error) {
	if err := needPosition(g, ev); err != nil {
		return 0, err
	}
	if d.found && !ev.at().After(appliedAt(d.meta)) {
		return duplicate, nil
	}
	return apply, nil
}

func (globalPosition) record(d stored, ev Event) stored {
	d.meta.Position, d.meta.Prepare = ev.Position, ev.ownPrepare()
	return d
}

// positionAt is where an event of commit position position and prepare
// position prepare stands in $all, as checkpoints are ordered: a prepare
// position not told (0, or past the commit position, which no event store
// gives) stands at the commit position.
func positionAt(position, prepare uint64) Checkpoint {
	if prepare == 0 || prepare > position {
		prepare = position
	}
	return Checkpoint{Position: position, Prepare: prepare}
}

// at is where ev stands in $all.
func (ev Event) at() Checkpoint { return positionAt(ev.Position, ev.Prepare) }

// ownPrepare is what a document's meta keeps of ev's prepare position: it,
// where it is below ev's commit position (an event of a legacy TCP
// transaction); 0 otherwise.
func (ev Event) ownPrepare() uint64 {
	if at := ev.at(); at.Prepare != at.Position {
		return at.Prepare
	}
	return 0
}

// appliedAt is where the last event a document applied under
// [GlobalPosition] stands in $all: a document whose meta has no prepare
// position (its event's was its commit position, or an earlier version
// wrote it) stands at its commit position, past every event of it.
func appliedAt(m driver.Meta) Checkpoint { return positionAt(m.Position, m.Prepare) }

func (globalPosition) needs(store driver.Store) error { return needGuarded(store, "global position") }

func (globalPosition) everyRevision() bool { return false }
func (globalPosition) orderedSource() bool { return true }
