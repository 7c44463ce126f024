package esdbtest

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/persistent"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
)

// Keys of the system metadata the client reads from every recorded event.
const (
	metaType        = "type"
	metaContentType = "content-type"
	metaCreated     = "created"
)

// uuidFromProto reads an event id in either of its wire forms.
func uuidFromProto(id *shared.UUID) (uuid.UUID, bool) {
	if s := id.GetStructured(); s != nil {
		var u uuid.UUID
		binary.BigEndian.PutUint64(u[:8], uint64(s.GetMostSignificantBits()))
		binary.BigEndian.PutUint64(u[8:], uint64(s.GetLeastSignificantBits()))
		return u, true
	}
	if str := id.GetString_(); str != "" {
		u, err := uuid.Parse(str)
		return u, err == nil
	}
	return uuid.Nil, false
}

// uuidToProto writes an event id in the form the reader asked for.
func uuidToProto(u uuid.UUID, asString bool) *shared.UUID {
	if asString {
		return &shared.UUID{Value: &shared.UUID_String_{String_: u.String()}}
	}
	return &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
		MostSignificantBits:  int64(binary.BigEndian.Uint64(u[:8])),
		LeastSignificantBits: int64(binary.BigEndian.Uint64(u[8:])),
	}}}
}

// systemMetadata is the metadata map every recorded event must carry.
func systemMetadata(r *record) map[string]string {
	return map[string]string{
		metaType:        r.eventType,
		metaContentType: r.contentType,
		metaCreated:     strconv.FormatInt(r.created, 10),
	}
}

func streamID(name string) *shared.StreamIdentifier {
	return &shared.StreamIdentifier{StreamName: []byte(name)}
}

func recordedForRead(r *record, asString, positionless bool) *streams.ReadResp_ReadEvent_RecordedEvent {
	if r == nil {
		return nil
	}
	pos := r.position
	if positionless {
		pos = noPosition
	}
	return &streams.ReadResp_ReadEvent_RecordedEvent{
		Id:               uuidToProto(r.id, asString),
		StreamIdentifier: streamID(r.stream),
		StreamRevision:   r.revision,
		PreparePosition:  pos,
		CommitPosition:   pos,
		Metadata:         systemMetadata(r),
		CustomMetadata:   r.metadata,
		Data:             r.data,
	}
}

// noPosition is the commit and prepare position a node sends for an event
// it read from a stream: -1 as the unsigned field carries it.
const noPosition = math.MaxUint64

// readEvent builds the Streams.Read message for what a read sends for a
// record: an event, a resolved link, or a dangling link (no event).
//
// A read of one stream (positionless) sends no position, as a node does:
// its storage reader resolves a stream's events without their commit
// position (StorageReaderWorker's ReadStreamEventsForward builds each with
// ResolvedEvent.ForUnresolvedEvent(record), no position), and the gRPC
// Streams.Read then writes -1 for each event's commit and prepare
// positions and NoPosition for the read event's (ConvertToRecordedEvent
// and ConvertToReadEvent in KurrentDB's Services/Transport/Grpc/
// Streams.Read.cs). A read of $all and a subscription send positions.
func readEvent(res resolution, asString, positionless bool) *streams.ReadResp {
	ev := &streams.ReadResp_ReadEvent{
		Event:    recordedForRead(res.event, asString, positionless),
		Link:     recordedForRead(res.link, asString, positionless),
		Position: &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: res.original().position},
	}
	if positionless {
		ev.Position = &streams.ReadResp_ReadEvent_NoPosition{NoPosition: &shared.Empty{}}
	}
	return &streams.ReadResp{Content: &streams.ReadResp_Event{Event: ev}}
}

func recordedForPersistent(r *record, asString bool) *persistent.ReadResp_ReadEvent_RecordedEvent {
	if r == nil {
		return nil
	}
	return &persistent.ReadResp_ReadEvent_RecordedEvent{
		Id:               uuidToProto(r.id, asString),
		StreamIdentifier: streamID(r.stream),
		StreamRevision:   r.revision,
		PreparePosition:  r.position,
		CommitPosition:   r.position,
		Metadata:         systemMetadata(r),
		CustomMetadata:   r.metadata,
		Data:             r.data,
	}
}

// persistentEvent builds the PersistentSubscriptions.Read message for a
// message of a group.
func persistentEvent(res resolution, retryCount int, asString bool) *persistent.ReadResp {
	return &persistent.ReadResp{Content: &persistent.ReadResp_Event{Event: &persistent.ReadResp_ReadEvent{
		Event:    recordedForPersistent(res.event, asString),
		Link:     recordedForPersistent(res.link, asString),
		Position: &persistent.ReadResp_ReadEvent_CommitPosition{CommitPosition: res.original().position},
		Count:    &persistent.ReadResp_ReadEvent_RetryCount{RetryCount: int32(retryCount)},
	}}}
}

func confirmation(id string) *streams.ReadResp {
	return &streams.ReadResp{Content: &streams.ReadResp_Confirmation{
		Confirmation: &streams.ReadResp_SubscriptionConfirmation{SubscriptionId: id},
	}}
}

func checkpoint(pos uint64) *streams.ReadResp {
	return &streams.ReadResp{Content: &streams.ReadResp_Checkpoint_{
		Checkpoint: &streams.ReadResp_Checkpoint{CommitPosition: pos, PreparePosition: pos},
	}}
}

func caughtUp() *streams.ReadResp {
	return &streams.ReadResp{Content: &streams.ReadResp_CaughtUp_{CaughtUp: &streams.ReadResp_CaughtUp{}}}
}

func streamNotFound(name string) *streams.ReadResp {
	return &streams.ReadResp{Content: &streams.ReadResp_StreamNotFound_{
		StreamNotFound: &streams.ReadResp_StreamNotFound{StreamIdentifier: streamID(name)},
	}}
}

// positionString is how SubscriptionInfo writes a position in $all.
func positionString(commit, prepare int64) string {
	return "C:" + strconv.FormatInt(commit, 10) + "/P:" + strconv.FormatInt(prepare, 10)
}
