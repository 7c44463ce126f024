package esdbtest

import "sort"

// runStream catches a stream subscription up from revision next, then goes
// live. The catch-up reads the stream as a read does (its metadata applies;
// a stream without events, or soft-deleted, has nothing to read); once it
// has read everything it sends CaughtUp.
func (c *catchUp) runStream(name string, next uint64) error {
	for {
		if err := c.alive(); err != nil {
			return err
		}
		v := c.s.log.view(name)
		if v.status == viewDeleted {
			// Tombstoned during the catch-up: the subscription ends.
			return streamDeletedError(name).onStream(c.srv)
		}
		events := v.events[sort.Search(len(v.events), func(i int) bool { return v.events[i].revision >= next }):]
		for _, r := range events {
			if err := c.alive(); err != nil {
				return err
			}
			if err := c.send(r); err != nil {
				return err
			}
		}
		next = max(next, v.end)
		if len(events) == 0 {
			break
		}
	}
	if err := c.srv.Send(caughtUp()); err != nil {
		return err
	}
	return c.liveStream(name, next, nil)
}

// goLiveStream serves a subscription from the end of a stream: CaughtUp at
// once, then live events. seen is the tombstone the stream already had, if
// any: the node's live subscription does not send it.
func (c *catchUp) goLiveStream(name string, next uint64, seen *record) error {
	if err := c.srv.Send(caughtUp()); err != nil {
		return err
	}
	return c.liveStream(name, next, seen)
}

// liveStream sends every event written to the stream from revision next on,
// whatever its metadata says, as the node's SubscriptionsService pushes them
// when they are written. A tombstone is sent too, and then the subscription
// ends with StreamDeleted.
func (c *catchUp) liveStream(name string, next uint64, seen *record) error {
	for {
		if err := c.alive(); err != nil {
			return err
		}
		batch, changed := c.s.log.streamFrom(name, next)
		for _, r := range batch {
			if err := c.alive(); err != nil {
				return err
			}
			if err := c.send(r); err != nil {
				return err
			}
			next++
		}
		if len(batch) > 0 {
			continue
		}
		if t := c.s.log.tombstoneOf(name); t != nil && t != seen {
			if err := c.send(t); err != nil {
				return err
			}
			return streamDeletedError(name).onStream(c.srv)
		}
		if err := c.wait(changed); err != nil {
			return err
		}
	}
}
