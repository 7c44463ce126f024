package esdbtest

// runFiltered serves a filtered subscription to $all with the checkpoints of
// EventStoreDB 23.10 (Enumerators.AllSubscriptionFiltered, and
// SubscriptionsService.ProcessEventCommited once live):
//
//   - The catch-up reads pages: each scans events until it has
//     readBatchSize (32) that pass the filter or has scanned the filter's
//     window, or reaches the end of the log. Every event counts as scanned,
//     whether the filter keeps it or not.
//   - After a page that does not reach the end, if the events scanned since
//     the last checkpoint reach window x multiplier, a checkpoint goes out
//     (and the count keeps the remainder): at the last event of the page
//     that passed the filter, or, if none did, where the page started (the
//     position before its first event).
//   - At the end of the log the subscription goes live without a
//     checkpoint: CaughtUp, and the count so far carries on.
//   - Live, every event written counts; when the count reaches window x
//     multiplier, a checkpoint at that event's position goes out (after
//     the event itself if it passes) and the count starts again from 0.
//
// From the end, the subscription is live from the start with a count of 0.
// Newer nodes differ; see the package documentation.
func (c *catchUp) runFiltered(next int, from uint64, f *filter, live bool) error {
	scanned := 0
	if !live {
		pageStart := from
		for {
			if err := c.alive(); err != nil {
				return err
			}
			batch, _ := c.s.log.allFrom(next)
			p := readPage(batch, f)
			for _, r := range p.matched {
				if err := c.alive(); err != nil {
					return err
				}
				if err := c.send(r); err != nil {
					return err
				}
			}
			next += p.read
			scanned += p.scanned
			if p.end {
				break
			}
			if scanned >= f.interval {
				scanned %= f.interval
				at := pageStart
				if len(p.matched) > 0 {
					at = p.matched[len(p.matched)-1].position
				}
				if err := c.srv.Send(checkpoint(at)); err != nil {
					return err
				}
			}
			pageStart = p.last.position
		}
	}
	if err := c.srv.Send(caughtUp()); err != nil {
		return err
	}
	return c.liveAll(next, func(r *record) error {
		if f.match(r) {
			if err := c.send(r); err != nil {
				return err
			}
		}
		scanned++
		if scanned >= f.interval {
			scanned = 0
			return c.srv.Send(checkpoint(r.position))
		}
		return nil
	})
}

// page is one page of a filtered catch-up read.
type page struct {
	matched []*record // the events that pass the filter, in order
	read    int       // records of the log read, scavenged ones included
	scanned int       // events scanned (the node's ConsideredEventsCount)
	last    *record   // the last event scanned
	end     bool      // the page reached the end of the log before its limits
}

// readPage reads a page from batch as the node's
// AllReader.ReadAllEventsForwardInternal does for a filtered read of at most
// readBatchSize events with the filter's search window.
func readPage(batch []*record, f *filter) page {
	var p page
	for p.read < len(batch) && len(p.matched) < readBatchSize && p.scanned < f.window {
		r := batch[p.read]
		p.read++
		if r.scavenged.Load() {
			continue // gone from the log
		}
		p.scanned++
		p.last = r
		if f.match(r) {
			p.matched = append(p.matched, r)
		}
	}
	p.end = p.read == len(batch) && len(p.matched) < readBatchSize && p.scanned < f.window
	return p
}
