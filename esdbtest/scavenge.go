package esdbtest

// Scavenge removes from the log what a scavenge of a node removes, and
// returns how many events it removed. Until then $all keeps every event,
// those of deleted and truncated streams included; afterwards $all reads,
// and subscriptions that catch up, no longer see them. Stream reads do not
// change: the metadata already hid those events.
//
// As the node's scavenge calculator (EventCalculator.DecideEvent) does, it
// keeps the last event of every stream, and removes before it: every event
// of a tombstoned stream (the tombstone stays), the events before $tb,
// beyond the last $maxCount and older than $maxAge (measured by
// [Options.Now]; a node goes by the time range of each chunk, so it may
// keep a few more); of a metadata stream, all but its last event, and all
// of them when its stream is tombstoned. Streams without metadata keep all
// their events.
func (s *Server) Scavenge() int {
	n := s.log.scavenge()
	s.logger.Info("esdbtest: scavenged", "events", n)
	return n
}

func (l *eventLog) scavenge() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	removed := 0
	for stream, events := range l.streams {
		for _, r := range events[:l.scavengeUpTo(stream)] {
			if !r.scavenged.Load() {
				r.scavenged.Store(true)
				removed++
			}
		}
	}
	l.scavenged += removed
	return removed
}

// scavengeUpTo returns how many of a stream's events, from its first, a
// scavenge removes; l.mu must be held.
func (l *eventLog) scavengeUpTo(stream string) int {
	events := l.streams[stream]
	if isMetastream(stream) {
		if l.tombstones[originalOf(stream)] != nil {
			return len(events)
		}
		return max(len(events)-1, 0)
	}
	if l.tombstones[stream] != nil {
		return len(events) // the tombstone, the last event, stays
	}
	meta := l.metadataOf(stream)
	last := int64(len(events)) - 1
	from := visibleFrom(meta, last)
	cutoff := l.cutoff(meta)
	n := 0
	for n < len(events)-1 && (int64(n) < from || events[n].created < cutoff) {
		n++
	}
	return n
}
