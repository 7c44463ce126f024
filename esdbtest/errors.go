package esdbtest

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// nodeError is an error as the node's RpcExceptions build it: a status, and
// trailers whose "exception" key names the error (the client reads it to
// tell StreamDeleted from the rest).
type nodeError struct {
	code     codes.Code
	msg      string
	trailers metadata.MD
}

// onStream returns the error to return from a streaming handler.
func (e nodeError) onStream(ss grpc.ServerStream) error {
	ss.SetTrailer(e.trailers)
	return status.Error(e.code, e.msg)
}

// onUnary returns the error to return from a unary handler.
func (e nodeError) onUnary(ctx context.Context) error {
	_ = grpc.SetTrailer(ctx, e.trailers)
	return status.Error(e.code, e.msg)
}

// streamDeletedError is RpcExceptions.StreamDeleted; the client turns it into
// ErrorCodeStreamDeleted.
func streamDeletedError(stream string) nodeError {
	return nodeError{
		code:     codes.FailedPrecondition,
		msg:      fmt.Sprintf("Event stream '%s' is deleted.", stream),
		trailers: metadata.Pairs("exception", "stream-deleted", "stream-name", stream),
	}
}

// wrongExpectedVersionError is RpcExceptions.WrongExpectedVersion, which
// Delete and Tombstone answer with (an append answers with a message
// instead); the client has no code for it: ErrorCodeUnknown.
func wrongExpectedVersionError(op, stream string, expected, actual int64) nodeError {
	return nodeError{
		code: codes.FailedPrecondition,
		msg: fmt.Sprintf("%s failed due to WrongExpectedVersion. Stream: %s, Expected version: %d, Actual version: %d",
			op, stream, expected, actual),
		trailers: metadata.Pairs("exception", "wrong-expected-version", "stream-name", stream,
			"expected-version", strconv.FormatInt(expected, 10), "actual-version", strconv.FormatInt(actual, 10)),
	}
}

// accessDeniedError is RpcExceptions.AccessDenied; the client turns it into
// ErrorCodeAccessDenied.
func accessDeniedError() nodeError {
	return nodeError{
		code:     codes.PermissionDenied,
		msg:      "Access Denied",
		trailers: metadata.Pairs("exception", "access-denied"),
	}
}

// maxAppendSizeError is RpcExceptions.MaxAppendSizeExceeded; the client has
// no code for it: ErrorCodeUnknown, wrapping this status.
func maxAppendSizeError(limit int) nodeError {
	return nodeError{
		code: codes.InvalidArgument,
		msg:  fmt.Sprintf("Maximum Append Size of %d Exceeded.", limit),
		trailers: metadata.Pairs("exception", "maximum-append-size-exceeded",
			"maximum-append-size", strconv.Itoa(limit)),
	}
}

// errUnauthenticated is what the node's AuthenticationMiddleware answers a
// call whose credentials do not match a user; the client turns it into
// ErrorCodeUnauthenticated.
var errUnauthenticated = status.Error(codes.Unauthenticated, "Unauthenticated")
