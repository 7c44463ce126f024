package lending

import "github.com/revgate/projector/projector"

// DeskStats is the one document of the whole desk's counters.
type DeskStats struct {
	CheckedOut int `bson:"checkedOut"`
	Returned   int `bson:"returned"`
	OnLoan     int `bson:"onLoan"`
}

// DeskStatsID is the id of the one DeskStats document.
const DeskStatsID = "desk"

// StatsTypes are the only events the desk's counters read: the server sends
// nothing else (app.EventTypes). The older forms of a type are read too.
var StatsTypes = []string{TypeCheckedOut, TypeCheckedOutV1, TypeReturned}

// NewDeskStats returns the desk-stats projection: one document fed by every
// loan, whose steps commute, kept exactly-once by the ids of the last 2,000
// events applied (HandledIDs): no revision order needed, so it can read only
// the two event types it counts.
func NewDeskStats() *projector.Projection[DeskStats] {
	p := projector.New[DeskStats]("desk_stats", func(ev projector.Event) (string, bool) {
		switch ev.Payload.(type) {
		case BookCheckedOut, BookReturned:
			return DeskStatsID, true
		}
		return "", false
	}).Idempotency(projector.HandledIDs(2000))
	projector.On(p, func(s DeskStats, _ BookCheckedOut) (DeskStats, error) {
		s.CheckedOut, s.OnLoan = s.CheckedOut+1, s.OnLoan+1
		return s, nil
	})
	projector.On(p, func(s DeskStats, _ BookReturned) (DeskStats, error) {
		s.Returned, s.OnLoan = s.Returned+1, s.OnLoan-1
		return s, nil
	})
	return p
}
