package esdbtest

import (
	"encoding/binary"
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

func recordedForRead(r *record, asString bool) *streams.ReadResp_ReadEvent_RecordedEvent {
	if r == nil {
		return nil
	}
	return &streams.ReadResp_ReadEvent_RecordedEvent{
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

// readEvent builds the Streams.Read message for what a read sends for a
// record: an event, a resolved link, or a dangling link (no event).
func readEvent(res resolution, asString bool) *streams.ReadResp {
	return &streams.ReadResp{Content: &streams.ReadResp_Event{Event: &streams.ReadResp_ReadEvent{
		Event:    recordedForRead(res.event, asString),
		Link:     recordedForRead(res.link, asString),
		Position: &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: res.original().position},
	}}}
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
