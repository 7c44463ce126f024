package esdbtest

// runAll serves a subscription to $all from index next of the log; from is
// the position reading starts after (0 from the start). A filtered
// subscription gets checkpoints (see runFiltered). live starts it live
// (from the end): CaughtUp at once.
func (c *catchUp) runAll(next int, from uint64, f *filter, live bool) error {
	if f != nil {
		return c.runFiltered(next, from, f, live)
	}
	if !live {
		var err error
		if next, err = c.catchUpAll(next); err != nil {
			return err
		}
	}
	if err := c.srv.Send(caughtUp()); err != nil {
		return err
	}
	return c.liveAll(next, func(r *record) error {
		if hiddenFromAll(r.stream) {
			return nil
		}
		return c.send(r)
	})
}

// catchUpAll sends $all from index next as a read sees it (without what a
// scavenge removed) up to its end, and returns the index after it.
func (c *catchUp) catchUpAll(next int) (int, error) {
	for {
		batch, _ := c.s.log.allFrom(next)
		if len(batch) == 0 {
			return next, nil
		}
		for _, r := range batch {
			if err := c.alive(); err != nil {
				return next, err
			}
			next++
			if r.scavenged.Load() || hiddenFromAll(r.stream) {
				continue
			}
			if err := c.send(r); err != nil {
				return next, err
			}
		}
	}
}

// liveAll hands every record written to $all from index next on to each, as
// the node's SubscriptionsService pushes events when they are written (a
// scavenge since does not take them back).
func (c *catchUp) liveAll(next int, each func(*record) error) error {
	for {
		if err := c.alive(); err != nil {
			return err
		}
		batch, changed := c.s.log.allFrom(next)
		for _, r := range batch {
			if err := c.alive(); err != nil {
				return err
			}
			next++
			if err := each(r); err != nil {
				return err
			}
		}
		if len(batch) > 0 {
			continue
		}
		if err := c.wait(changed); err != nil {
			return err
		}
	}
}
