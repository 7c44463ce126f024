package esdbtest

import (
	"errors"
	"io"
	"math"
	"sort"

	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// streamsService serves the Streams service: Append and Read (plain reads
// here, subscriptions in subscribe.go).
type streamsService struct {
	streams.UnimplementedStreamsServer
	s *Server
}

// Append writes the events that follow the options message, atomically.
func (svc *streamsService) Append(srv streams.Streams_AppendServer) error {
	first, err := srv.Recv()
	if err != nil {
		return err
	}
	opts := first.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "esdbtest: the first append message must be the options")
	}
	stream := string(opts.GetStreamIdentifier().GetStreamName())
	if stream == "" || stream == allStream {
		return status.Errorf(codes.InvalidArgument, "esdbtest: cannot append to stream %q", stream)
	}
	if !svc.s.allowStream(srv.Context(), actionWrite, stream) {
		drainAppend(srv)
		return accessDeniedError().onStream(srv)
	}
	exp := expectationOf(opts)
	events, err := svc.receiveEvents(srv)
	if err != nil {
		return err
	}
	res, err := svc.s.log.append(stream, exp, events)
	var wrong *wrongVersion
	switch {
	case errors.As(err, &wrong):
		svc.s.logger.Debug("esdbtest: wrong expected version", "stream", stream)
		return srv.SendAndClose(wrongVersionResp(wrong))
	case errors.Is(err, errStreamDeleted):
		return streamDeletedError(stream).onStream(srv)
	case err != nil:
		return err
	}
	svc.s.stats.appends.Add(1)
	svc.s.stats.events.Add(int64(res.written))
	svc.s.logger.Debug("esdbtest: append", "stream", stream, "events", res.written, "revision", res.revision, "position", res.position)
	success := &streams.AppendResp_Success{}
	if res.exists {
		success.CurrentRevisionOption = &streams.AppendResp_Success_CurrentRevision{CurrentRevision: res.revision}
		success.PositionOption = &streams.AppendResp_Success_Position{Position: &streams.AppendResp_Position{
			CommitPosition: res.position, PreparePosition: res.position,
		}}
	} else {
		success.CurrentRevisionOption = &streams.AppendResp_Success_NoStream{NoStream: &shared.Empty{}}
		success.PositionOption = &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}
	}
	return srv.SendAndClose(&streams.AppendResp{Result: &streams.AppendResp_Success_{Success: success}})
}

// receiveEvents reads the proposed events of an append up to its end. Their
// data may total at most the server's MaxAppendSize bytes: the node's
// Streams.Append counts Event.SizeOnDisk, which up to 24.10 is the data's
// length alone (an operator-precedence slip drops the metadata and the type;
// 25.0 counts them, the type twice), and answers MaxAppendSizeExceeded as
// soon as the total is over the limit.
func (svc *streamsService) receiveEvents(srv streams.Streams_AppendServer) ([]proposed, error) {
	var events []proposed
	size := 0
	for {
		req, err := srv.Recv()
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return nil, err
		}
		msg := req.GetProposedMessage()
		if msg == nil {
			return nil, status.Error(codes.InvalidArgument, "esdbtest: expected a proposed message")
		}
		p, err := proposedOf(msg)
		if err != nil {
			return nil, err
		}
		size += len(p.data)
		if size > svc.s.maxAppendSize {
			drainAppend(srv)
			return nil, maxAppendSizeError(svc.s.maxAppendSize).onStream(srv)
		}
		events = append(events, p)
	}
}

// drainAppend takes the rest of an append the server refuses, so that the
// client sees the answer rather than io.EOF from a Send (see drainClient).
// A node answers at once, and its client may then see the io.EOF.
func drainAppend(srv streams.Streams_AppendServer) {
	for {
		if _, err := srv.Recv(); err != nil {
			return
		}
	}
}

func expectationOf(opts *streams.AppendReq_Options) expectation {
	switch v := opts.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_NoStream:
		return expectation{kind: expectNoStream}
	case *streams.AppendReq_Options_StreamExists:
		return expectation{kind: expectStreamExists}
	case *streams.AppendReq_Options_Revision:
		return expectation{kind: expectRevision, revision: v.Revision}
	default:
		return expectation{kind: expectAny}
	}
}

func proposedOf(msg *streams.AppendReq_ProposedMessage) (proposed, error) {
	id, ok := uuidFromProto(msg.GetId())
	if !ok {
		return proposed{}, status.Error(codes.InvalidArgument, "esdbtest: proposed message without a valid id")
	}
	eventType, ok := msg.GetMetadata()[metaType]
	if !ok || eventType == "" {
		return proposed{}, status.Error(codes.InvalidArgument, "esdbtest: proposed message without the \"type\" metadata")
	}
	contentType, ok := msg.GetMetadata()[metaContentType]
	if !ok {
		return proposed{}, status.Error(codes.InvalidArgument, "esdbtest: proposed message without the \"content-type\" metadata")
	}
	data := msg.GetData()
	if data == nil {
		data = []byte{}
	}
	meta := msg.GetCustomMetadata()
	if meta == nil {
		meta = []byte{}
	}
	return proposed{id: id, eventType: eventType, contentType: contentType, data: data, metadata: meta}, nil
}

func wrongVersionResp(w *wrongVersion) *streams.AppendResp {
	wev := &streams.AppendResp_WrongExpectedVersion{}
	if w.current >= 0 {
		current := uint64(w.current)
		wev.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: current}
		wev.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_CurrentRevision_20_6_0{CurrentRevision_20_6_0: current}
	} else {
		wev.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
		wev.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_NoStream_20_6_0{NoStream_20_6_0: &shared.Empty{}}
	}
	switch w.expected.kind {
	case expectNoStream:
		wev.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
	case expectStreamExists:
		wev.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
		wev.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_StreamExists_20_6_0{StreamExists_20_6_0: &shared.Empty{}}
	case expectRevision:
		wev.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: w.expected.revision}
		wev.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision_20_6_0{ExpectedRevision_20_6_0: w.expected.revision}
	default:
		wev.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
		wev.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_Any_20_6_0{Any_20_6_0: &shared.Empty{}}
	}
	return &streams.AppendResp{Result: &streams.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: wev}}
}

// Read serves plain reads and subscriptions.
func (svc *streamsService) Read(req *streams.ReadReq, srv streams.Streams_ReadServer) error {
	opts := req.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "esdbtest: read without options")
	}
	stream := allStream
	if so := opts.GetStream(); so != nil {
		stream = string(so.GetStreamIdentifier().GetStreamName())
	}
	if !svc.s.allowStream(srv.Context(), actionRead, stream) {
		return accessDeniedError().onStream(srv)
	}
	if opts.GetSubscription() != nil {
		return svc.s.subscribe(opts, srv)
	}
	asString := opts.GetUuidOption().GetString_() != nil
	var f *filter
	if fo := opts.GetFilter(); fo != nil {
		var err error
		if f, err = filterOf(fo); err != nil {
			return err
		}
	}
	count := opts.GetCount()
	backwards := opts.GetReadDirection() == streams.ReadReq_Options_Backwards
	var events []*record
	fromEnd := false // events are in log order, read from the last
	if so := opts.GetStream(); so != nil {
		v := svc.s.log.view(stream)
		switch v.status {
		case viewNotFound:
			return srv.Send(streamNotFound(stream))
		case viewDeleted:
			return streamDeletedError(stream).onStream(srv)
		}
		events = streamRange(v.events, so, backwards)
	} else if ao := opts.GetAll(); ao != nil {
		events, fromEnd = allRange(svc.s.log.allSnapshot(), ao, backwards), backwards
	} else {
		return status.Error(codes.InvalidArgument, "esdbtest: read without a stream option")
	}
	var sent uint64
	for i := range events {
		if sent >= count {
			break
		}
		r := events[i]
		if fromEnd {
			r = events[len(events)-1-i]
		}
		if opts.GetAll() != nil && (r.scavenged.Load() || hiddenFromAll(r.stream)) || f != nil && !f.match(r) {
			continue
		}
		if err := srv.Context().Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		if err := srv.SendMsg(svc.s.log.readMessage(svc.s.log.resolve(r, opts.GetResolveLinks()), asString, opts.GetStream() != nil)); err != nil {
			return err
		}
		sent++
	}
	return nil
}

// streamRange returns the events a read sees (by revision) in reading order
// from the requested revision: forwards from it (inclusive), or backwards
// from it (inclusive).
func streamRange(visible []*record, so *streams.ReadReq_Options_StreamOptions, backwards bool) []*record {
	if len(visible) == 0 {
		return nil
	}
	// index of the first visible event at or after revision rev
	at := func(rev uint64) int {
		return sort.Search(len(visible), func(i int) bool { return visible[i].revision >= rev })
	}
	if !backwards {
		switch v := so.GetRevisionOption().(type) {
		case *streams.ReadReq_Options_StreamOptions_End:
			return nil
		case *streams.ReadReq_Options_StreamOptions_Revision:
			return visible[at(v.Revision):]
		}
		return visible
	}
	end := len(visible) // exclusive
	switch v := so.GetRevisionOption().(type) {
	case *streams.ReadReq_Options_StreamOptions_Start:
		end = at(1)
	case *streams.ReadReq_Options_StreamOptions_Revision:
		if v.Revision < math.MaxUint64 {
			end = at(v.Revision + 1)
		}
	}
	return reversed(visible[:end])
}

// allRange returns the part of $all a read from the requested position
// reads, in log order: forwards from it (the event at that position
// included), or, read backwards from its end, the events before that
// position (a read of a few events at the end costs no copy of the log).
func allRange(all []*record, ao *streams.ReadReq_Options_AllOptions, backwards bool) []*record {
	if !backwards {
		switch v := ao.GetAllOption().(type) {
		case *streams.ReadReq_Options_AllOptions_End:
			return nil
		case *streams.ReadReq_Options_AllOptions_Position:
			return all[firstAfter(all, v.Position.GetCommitPosition(), true):]
		}
		return all
	}
	switch v := ao.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Start:
		return nil
	case *streams.ReadReq_Options_AllOptions_Position:
		return all[:firstAfter(all, v.Position.GetCommitPosition(), true)]
	}
	return all
}

func reversed(rs []*record) []*record {
	out := make([]*record, len(rs))
	for i, r := range rs {
		out[len(rs)-1-i] = r
	}
	return out
}
