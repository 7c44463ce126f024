package esdbtest

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"
)

// encoded is a message the server has encoded already: its codec sends it
// as it is.
type encoded []byte

// wireCodec is the server's codec: protobuf, but for an [encoded] message,
// which it sends as it is.
//
// Every read and subscription sends an event as the same Streams.Read
// message, so the server encodes it once (see [eventLog.readMessage]) and
// a read of an event served before costs a copy, not an encoding. The
// server shares its machine with what it serves in tests and benchmarks;
// what it spends there is not what a node on its own machine would take
// from them.
type wireCodec struct{ proto encoding.CodecV2 }

func newWireCodec() wireCodec { return wireCodec{proto: encoding.GetCodecV2(proto.Name)} }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(encoded); ok {
		// A SliceBuffer is not returned to a pool when gRPC is done with
		// it: the bytes stay the record's.
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c wireCodec) Name() string { return c.proto.Name() }

// readMessage is what a read or a subscription sends for a record, as
// readEvent builds it: for an event that is not a resolved link, encoded
// once and kept with the record.
func (l *eventLog) readMessage(res resolution, asString, positionless bool) any {
	r := res.event
	if r == nil || res.link != nil {
		return readEvent(res, asString, positionless)
	}
	n := 0
	if asString {
		n++
	}
	if positionless {
		n += 2
	}
	slot := &r.wire[n]
	if b := slot.Load(); b != nil {
		return encoded(*b)
	}
	b, err := protobuf.Marshal(readEvent(res, asString, positionless))
	if err != nil {
		return readEvent(res, asString, positionless) // the codec reports it
	}
	slot.Store(&b)
	return encoded(b)
}
