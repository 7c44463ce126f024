package esdbtest

import (
	"context"
	"errors"

	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// deleteOptions is what DeleteReq and TombstoneReq options have in common.
type deleteOptions interface {
	GetStreamIdentifier() *shared.StreamIdentifier
}

// deleteExpectation reads the expected revision of a delete.
func deleteExpectation(o deleteOptions) expectation {
	switch v := o.(type) {
	case *streams.DeleteReq_Options:
		switch r := v.GetExpectedStreamRevision().(type) {
		case *streams.DeleteReq_Options_Revision:
			return expectation{kind: expectRevision, revision: r.Revision}
		case *streams.DeleteReq_Options_NoStream:
			return expectation{kind: expectNoStream}
		case *streams.DeleteReq_Options_StreamExists:
			return expectation{kind: expectStreamExists}
		}
	case *streams.TombstoneReq_Options:
		switch r := v.GetExpectedStreamRevision().(type) {
		case *streams.TombstoneReq_Options_Revision:
			return expectation{kind: expectRevision, revision: r.Revision}
		case *streams.TombstoneReq_Options_NoStream:
			return expectation{kind: expectNoStream}
		case *streams.TombstoneReq_Options_StreamExists:
			return expectation{kind: expectStreamExists}
		}
	}
	return expectation{kind: expectAny}
}

// Delete soft-deletes a stream (the client's DeleteStream): see softDelete.
func (svc *streamsService) Delete(ctx context.Context, req *streams.DeleteReq) (*streams.DeleteResp, error) {
	opts := req.GetOptions()
	pos, err := svc.deleteStream(ctx, "Delete", opts, svc.s.log.softDelete)
	if err != nil {
		return nil, err
	}
	return &streams.DeleteResp{PositionOption: &streams.DeleteResp_Position_{Position: &streams.DeleteResp_Position{
		CommitPosition: pos, PreparePosition: pos,
	}}}, nil
}

// Tombstone deletes a stream for good (the client's TombstoneStream): see
// tombstone.
func (svc *streamsService) Tombstone(ctx context.Context, req *streams.TombstoneReq) (*streams.TombstoneResp, error) {
	opts := req.GetOptions()
	pos, err := svc.deleteStream(ctx, "Delete", opts, svc.s.log.tombstone)
	if err != nil {
		return nil, err
	}
	return &streams.TombstoneResp{PositionOption: &streams.TombstoneResp_Position_{Position: &streams.TombstoneResp_Position{
		CommitPosition: pos, PreparePosition: pos,
	}}}, nil
}

// deleteStream runs a delete and answers its refusals as the node's
// Streams.DeleteInternal does. Both deletes name themselves "Delete" in a
// WrongExpectedVersion.
func (svc *streamsService) deleteStream(ctx context.Context, op string, opts deleteOptions,
	del func(string, expectation) (uint64, error)) (uint64, error) {
	stream := string(opts.GetStreamIdentifier().GetStreamName())
	if stream == "" || stream == allStream {
		return 0, status.Errorf(codes.InvalidArgument, "esdbtest: cannot delete stream %q", stream)
	}
	if !svc.s.allowStream(ctx, actionDelete, stream) {
		return 0, accessDeniedError().onUnary(ctx)
	}
	exp := deleteExpectation(opts)
	pos, err := del(stream, exp)
	var wrong *wrongVersion
	switch {
	case errors.As(err, &wrong):
		return 0, wrongExpectedVersionError(op, stream, exp.number(), wrong.current).onUnary(ctx)
	case errors.Is(err, errStreamDeleted):
		return 0, streamDeletedError(stream).onUnary(ctx)
	case err != nil:
		return 0, err
	}
	svc.s.logger.Debug("esdbtest: "+op, "stream", stream, "position", pos)
	return pos, nil
}
