package neutral

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/revgate/projector/projector"
)

// Message is one thing a client's catch-up subscription delivered,
// translated by its source package. At most one of Dropped, Event,
// EventErr, a lone Checkpoint and CaughtUp is set; a message with none (the
// server's FellBehind) is passed over.
type Message struct {
	// Dropped ends the subscription with the client's error.
	Dropped error
	// Event is an event that appeared, and Checkpoint where to resume after
	// it; EventErr replaces Event for a delivery that cannot be projected (a
	// link to an event that no longer exists), which only moves the
	// checkpoint.
	Event    *projector.Event
	EventErr error
	// Checkpoint alone is the server's checkpoint message of a filtered
	// subscription to $all.
	Checkpoint *projector.Checkpoint
	// CaughtUp: the subscription has reached the head of its log.
	CaughtUp bool
}

// CatchUpStream is an open catch-up subscription of one client.
type CatchUpStream interface {
	// Recv blocks for the next message; after Close it returns one that
	// says the subscription dropped.
	Recv() Message
	Close() error
}

// NewCatchUp returns s as a [projector.Subscription]. pkg prefixes its
// errors; logger logs the deliveries it passes over.
func NewCatchUp(pkg string, s CatchUpStream, logger *slog.Logger) projector.Subscription {
	return &catchUp{pkg: pkg, s: s, logger: OrDiscard(logger)}
}

// NewAllCatchUp returns s, a subscription to $all that started after from
// (nil: at the start), as a [projector.Subscription] that also moves the
// checkpoint to the head each time it catches up, by head (see [Head]).
func NewAllCatchUp(pkg string, s CatchUpStream, logger *slog.Logger, from *projector.Checkpoint, head *Head) projector.Subscription {
	c := &catchUp{pkg: pkg, s: s, logger: OrDiscard(logger), head: head}
	if from != nil {
		last := *from
		c.last = &last
	}
	if head != nil && head.quiet > 0 {
		// Received on a goroutine of its own, so that Next can also wait
		// for quiet at the head; up to receivedAhead messages ahead of
		// Next, so that the two need not meet for every event of a
		// catch-up.
		c.msgs, c.done = make(chan Message, receivedAhead), make(chan struct{})
		go c.receive()
	}
	return c
}

// receivedAhead is how many messages the receiving goroutine of a subscription
// to $all may have received ahead of Next: a bound on the events it holds,
// above the client's own.
const receivedAhead = 64

type catchUp struct {
	pkg    string
	s      CatchUpStream
	logger *slog.Logger
	head   *Head
	last   *projector.Checkpoint // of the last delivery, or where it started

	// With a scan when quiet: the messages received, and done, closed by
	// Close. live: the subscription is at the head.
	msgs      chan Message
	done      chan struct{}
	closeOnce sync.Once
	live      bool
}

// receive hands the stream's messages to Next until the subscription drops
// or is closed.
func (c *catchUp) receive() {
	for {
		m := c.s.Recv()
		select {
		case c.msgs <- m:
		case <-c.done:
			return
		}
		if m.Dropped != nil {
			return
		}
	}
}

// recv returns the next message; at the head, after a quiet spell, a
// checkpoint at the head, if the head scan moved past the last one.
func (c *catchUp) recv(ctx context.Context) Message {
	if c.msgs == nil {
		stop := context.AfterFunc(ctx, func() { c.s.Close() })
		defer stop()
		return c.s.Recv()
	}
	for {
		m, ok := c.wait(ctx)
		switch {
		case ok && m.CaughtUp:
			c.live = true
		case ok && m.Event == nil && m.EventErr == nil && m.Checkpoint == nil && m.Dropped == nil:
			c.live = false // fell behind
		}
		if ok || ctx.Err() != nil {
			return m
		}
		if last := c.last; c.atHead(ctx) != nil && c.last != last {
			return Message{Checkpoint: c.last}
		}
	}
}

// wait waits for the next message (ok), ctx, or, at the head, a quiet
// spell.
func (c *catchUp) wait(ctx context.Context) (m Message, ok bool) {
	var quiet <-chan time.Time
	if c.live {
		t := time.NewTimer(c.head.quiet)
		defer t.Stop()
		quiet = t.C
	}
	select {
	case m := <-c.msgs:
		return m, true
	case <-ctx.Done():
	case <-quiet:
	}
	return Message{}, false
}

// Next implements [projector.Subscription].
func (c *catchUp) Next(ctx context.Context) (projector.Delivery, error) {
	for {
		m := c.recv(ctx)
		lone := m.Checkpoint != nil && m.Event == nil && m.EventErr == nil
		if lone && c.last != nil && c.last.After(*m.Checkpoint) {
			continue // the node's, behind where a head scan moved: not backwards
		}
		if m.Checkpoint != nil {
			c.last = m.Checkpoint
		}
		switch {
		case ctx.Err() != nil:
			return projector.Delivery{}, ctx.Err()
		case m.Dropped != nil:
			return projector.Delivery{}, fmt.Errorf("%s: dropped: %w", c.pkg, m.Dropped)
		case m.EventErr != nil:
			// A link to a deleted event: there is nothing to project, and
			// its stream's projection sees the hole in its revisions.
			c.logger.Warn("skipping a delivery", "err", m.EventErr)
			return projector.Delivery{Checkpoint: m.Checkpoint}, nil
		case m.Event != nil:
			return projector.Delivery{Event: m.Event, Checkpoint: m.Checkpoint}, nil
		case m.Checkpoint != nil:
			return projector.Delivery{Checkpoint: m.Checkpoint}, nil
		case m.CaughtUp:
			return projector.Delivery{CaughtUp: true, Checkpoint: c.atHead(ctx)}, nil
		}
		// FellBehind: nothing to do; the runner keeps reading.
	}
}

// atHead returns the checkpoint to store at the head, or nil: none to move
// to, no head scan, or a scan that failed (logged; the next checkpoint
// message or event moves the position instead).
func (c *catchUp) atHead(ctx context.Context) *projector.Checkpoint {
	if c.head == nil {
		return nil
	}
	cp, err := c.head.After(ctx, c.last)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("reading $all to the head for the caught-up checkpoint", "err", err)
		}
		return nil
	}
	if cp != nil {
		c.last = cp
	}
	return cp
}

// Close implements [projector.Subscription].
func (c *catchUp) Close() error {
	if c.done != nil {
		c.closeOnce.Do(func() { close(c.done) })
	}
	return c.s.Close()
}
