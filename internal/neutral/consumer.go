package neutral

import (
	"context"
	"fmt"
	"sync"

	"github.com/revgate/projector/projector"
)

// PersistentStream is one client's open connection to a persistent
// subscription group, carrying events of type E (the client's
// *ResolvedEvent).
type PersistentStream[E any] interface {
	// Recv blocks for the next event and how many times it has been
	// delivered, this time included; an error ends the stream.
	Recv() (event E, deliveries int, err error)
	// Ack and Nack settle an event; the consumer never calls them at the
	// same time.
	Ack(E) error
	Nack(reason string, action Action, event E) error
	// Envelope returns the event the engine handles for e.
	Envelope(E) (projector.Event, error)
}

// NewConsumer returns s as a [projector.Subscription] of a consumer with
// options o (validated), keeping its counts and blocked documents in l.
// pkg prefixes its errors. cancel ends s: the consumer's Close calls it
// rather than half-closing the stream (both clients' Close), which would
// race with an acknowledgement being sent.
func NewConsumer[E any](pkg string, s PersistentStream[E], o *ConsumerOptions, l *Ledger, cancel context.CancelFunc) projector.Subscription {
	c := &consumer[E]{pkg: pkg, s: s, opts: o, ledger: l, cancel: cancel,
		msgs: make(chan received[E]), done: make(chan struct{}), pumped: make(chan struct{})}
	go c.pump()
	return c
}

type received[E any] struct {
	event      E
	deliveries int
	err        error
}

// consumer is one open connection to a group.
type consumer[E any] struct {
	pkg    string
	s      PersistentStream[E]
	opts   *ConsumerOptions
	ledger *Ledger
	// send serializes acks and nacks: they share one gRPC stream, which
	// allows one sender at a time.
	send   sync.Mutex
	cancel context.CancelFunc // ends the stream
	msgs   chan received[E]
	done   chan struct{} // closed by Close
	pumped chan struct{} // closed when pump returns
	once   sync.Once
}

// pump receives from the server until the stream ends, so that Next can
// return on its context without ending the stream.
func (c *consumer[E]) pump() {
	defer close(c.pumped)
	for {
		e, n, err := c.s.Recv()
		select {
		case c.msgs <- received[E]{e, n, err}:
		case <-c.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// Next implements [projector.Subscription]. An event that cannot be
// projected (a link to an event that no longer exists) is parked with the
// reason, and the consumer goes on to the next.
func (c *consumer[E]) Next(ctx context.Context) (projector.Delivery, error) {
	for {
		var m received[E]
		select {
		case m = <-c.msgs:
		case <-ctx.Done():
			return projector.Delivery{}, ctx.Err()
		case <-c.done:
			return projector.Delivery{}, fmt.Errorf("%s: consumer closed", c.pkg)
		}
		if m.err != nil {
			return projector.Delivery{}, fmt.Errorf("%s: group %q dropped: %w", c.pkg, c.opts.Group, m.err)
		}
		ev, err := c.s.Envelope(m.event)
		if err != nil {
			c.opts.Logger.Warn("parking a delivery", "group", c.opts.Group, "err", err)
			if err := c.settle(m.event, Settlement{Action: ActionPark, Reason: err.Error()}); err != nil {
				return projector.Delivery{}, err
			}
			continue
		}
		e, deliveries := m.event, m.deliveries
		return projector.Delivery{Event: &ev, Settle: func(results []projector.Result) error {
			s := c.opts.Decide(results, deliveries)
			if why, ok := c.ledger.behind(results); ok && !s.Ack && s.Action == ActionRetry {
				// Its document waits for an event parked here: delivered
				// again, it would wait again, up to MaxDeliveries times,
				// and hold a place in the group's buffer meanwhile.
				s = Settlement{Action: ActionPark, Reason: "its document stays behind an event parked in the group: " + why}
				c.opts.Logger.Warn("parked an event at once: its document stays behind an event parked in the group, until the group's parked events are replayed",
					"group", c.opts.Group, "stream", ev.StreamID, "revision", ev.StreamRevision)
			}
			if s.GaveUp {
				c.opts.Logger.Error("parked an event that kept failing: the documents it feeds stay behind it until the group's parked events are replayed",
					"group", c.opts.Group, "stream", ev.StreamID, "revision", ev.StreamRevision, "deliveries", deliveries, "err", s.Reason)
			}
			c.ledger.Note(results, s)
			return c.settle(e, s)
		}}, nil
	}
}

// settle sends s for e, and counts it once the server has it.
func (c *consumer[E]) settle(e E, s Settlement) error {
	c.send.Lock()
	defer c.send.Unlock()
	var err error
	if s.Ack {
		err = c.s.Ack(e)
	} else {
		err = c.s.Nack(s.Reason, s.Action, e)
	}
	if err != nil {
		return err
	}
	c.ledger.Sent(s)
	return nil
}

// Close implements [projector.Subscription]: it ends the stream and waits
// for its receiving goroutine.
func (c *consumer[E]) Close() error {
	c.once.Do(func() {
		c.cancel()
		close(c.done)
	})
	<-c.pumped
	return nil
}
