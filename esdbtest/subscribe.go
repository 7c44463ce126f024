package esdbtest

import (
	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
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
			// Live only: what the stream already has, a tombstone
			// included, is not sent.
			next = uint64(len(s.log.streamSnapshot(name)))
			seen := s.log.tombstoneOf(name)
			run = func() error { return c.goLiveStream(name, next, seen) }
		case *streams.ReadReq_Options_StreamOptions_Revision:
			next = v.Revision + 1 // after that revision
		}
		if run == nil {
			// A tombstoned stream is refused before the confirmation,
			// as 23.10's Enumerators.StreamSubscription does.
			if s.log.view(name).status == viewDeleted {
				return streamDeletedError(name).onStream(srv)
			}
			run = func() error { return c.runStream(name, next) }
		}
	} else if ao := opts.GetAll(); ao != nil {
		var f *filter
		if fo := opts.GetFilter(); fo != nil {
			var err error
			if f, err = filterOf(fo); err != nil {
				return err
			}
		}
		var next int
		var from uint64 // the position reading starts after, for checkpoints
		live := false
		switch v := ao.GetAllOption().(type) {
		case *streams.ReadReq_Options_AllOptions_End:
			_, next = s.log.head()
			live = true
		case *streams.ReadReq_Options_AllOptions_Position:
			from = v.Position.GetCommitPosition()
			next = firstAfter(s.log.allSnapshot(), from, false) // after that position
		}
		run = func() error { return c.runAll(next, from, f, live) }
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

// send sends what a subscription sends for a record, twice when the
// duplicate fault says so.
func (c *catchUp) send(r *record) error {
	msg := c.s.log.readMessage(c.s.log.resolve(r, c.resolve), c.asString, false)
	if err := c.srv.SendMsg(msg); err != nil {
		return err
	}
	c.s.stats.delivered.Add(1)
	if c.s.faults.duplicate() {
		if err := c.srv.SendMsg(msg); err != nil {
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
