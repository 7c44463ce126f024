package esdbtest

import (
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// catchUp is one running catch-up subscription.
type catchUp struct {
	s        *Server
	srv      streams.Streams_ReadServer
	live     *liveSub
	asString bool
	resolve  bool
}

// subscribe serves a catch-up subscription to a stream or to $all: a
// confirmation, the history, CaughtUp, then live events, until the client
// goes away or a fault ends it.
func (s *Server) subscribe(opts *streams.ReadReq_Options, srv streams.Streams_ReadServer) error {
	c := &catchUp{
		s:        s,
		srv:      srv,
		asString: opts.GetUuidOption().GetString_() != nil,
		resolve:  opts.GetResolveLinks(),
	}
	// The starting point is fixed before the confirmation goes out: the
	// client may append as soon as it has the confirmation.
	var run func() error
	if so := opts.GetStream(); so != nil {
		name := string(so.GetStreamIdentifier().GetStreamName())
		var next uint64
		switch v := so.GetRevisionOption().(type) {
		case *streams.ReadReq_Options_StreamOptions_End:
			next = uint64(len(s.log.streamSnapshot(name)))
		case *streams.ReadReq_Options_StreamOptions_Revision:
			next = v.Revision + 1 // after that revision
		}
		run = func() error { return c.runStream(name, next) }
	} else if ao := opts.GetAll(); ao != nil {
		var f *filter
		if fo := opts.GetFilter(); fo != nil {
			var err error
			if f, err = filterOf(fo); err != nil {
				return err
			}
		}
		var next int
		switch v := ao.GetAllOption().(type) {
		case *streams.ReadReq_Options_AllOptions_End:
			_, next = s.log.head()
		case *streams.ReadReq_Options_AllOptions_Position:
			next = firstAfter(s.log.allSnapshot(), v.Position.GetCommitPosition(), false) // after that position
		}
		run = func() error { return c.runAll(next, f) }
	} else {
		return status.Error(codes.InvalidArgument, "esdbtest: subscription without a stream option")
	}
	c.live = s.subs.add()
	defer s.subs.remove(c.live)
	if err := srv.Send(confirmation(uuid.NewString())); err != nil {
		return err
	}
	return run()
}

func (c *catchUp) runStream(name string, next uint64) error {
	caught := false
	for {
		if err := c.alive(); err != nil {
			return err
		}
		batch, changed := c.s.log.streamFrom(name, next)
		for _, r := range batch {
			if err := c.alive(); err != nil {
				return err
			}
			if err := c.sendEvent(r); err != nil {
				return err
			}
			next++
		}
		if len(batch) > 0 {
			continue
		}
		if !caught {
			if err := c.srv.Send(caughtUp()); err != nil {
				return err
			}
			caught = true
		}
		if err := c.wait(changed); err != nil {
			return err
		}
	}
}

func (c *catchUp) runAll(next int, f *filter) error {
	caught := false
	scanned := 0 // events scanned since the last checkpoint
	var last *record
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
			if f == nil || f.match(r) {
				if err := c.sendEvent(r); err != nil {
					return err
				}
			}
			if f == nil {
				continue
			}
			scanned++
			last = r
			if scanned >= f.interval {
				if err := c.srv.Send(checkpoint(r.position)); err != nil {
					return err
				}
				scanned = 0
			}
		}
		if len(batch) > 0 {
			continue
		}
		// At the head: a quiet filter's checkpoint still advances.
		if scanned > 0 {
			if err := c.srv.Send(checkpoint(last.position)); err != nil {
				return err
			}
			scanned = 0
		}
		if !caught {
			if err := c.srv.Send(caughtUp()); err != nil {
				return err
			}
			caught = true
		}
		if err := c.wait(changed); err != nil {
			return err
		}
	}
}

// sendEvent sends one event, twice when the duplicate fault says so.
func (c *catchUp) sendEvent(r *record) error {
	event, link := c.s.log.resolve(r, c.resolve)
	msg := readEvent(event, link, c.asString)
	if err := c.srv.Send(msg); err != nil {
		return err
	}
	c.s.stats.delivered.Add(1)
	if c.s.faults.duplicate() {
		if err := c.srv.Send(msg); err != nil {
			return err
		}
		c.s.stats.duplicates.Add(1)
	}
	return nil
}

// alive returns the error that ends the subscription, if something has.
func (c *catchUp) alive() error {
	select {
	case <-c.live.done:
		return c.live.err
	case <-c.srv.Context().Done():
		return status.FromContextError(c.srv.Context().Err()).Err()
	default:
		return nil
	}
}

// wait blocks until the log changes or the subscription ends.
func (c *catchUp) wait(changed <-chan struct{}) error {
	select {
	case <-changed:
		return nil
	case <-c.live.done:
		return c.live.err
	case <-c.srv.Context().Done():
		return status.FromContextError(c.srv.Context().Err()).Err()
	}
}
