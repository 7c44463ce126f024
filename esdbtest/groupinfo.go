package esdbtest

import (
	"strconv"
	"time"

	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/persistent"
)

// info describes the group for GetInfo and List.
func (g *group) info() *persistent.SubscriptionInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	inflight := 0
	var conns []*persistent.SubscriptionInfo_ConnectionInfo
	for _, c := range g.consumers {
		inflight += len(c.inflight)
		conns = append(conns, &persistent.SubscriptionInfo_ConnectionInfo{
			From:             c.from,
			TotalItems:       c.total,
			AvailableSlots:   int32(c.bufferSize - len(c.inflight)),
			InFlightMessages: int32(len(c.inflight)),
			ConnectionName:   c.id,
		})
	}
	st := g.settings
	info := &persistent.SubscriptionInfo{
		EventSource:                 g.key.stream,
		GroupName:                   g.key.group,
		Status:                      g.status(),
		Connections:                 conns,
		TotalItems:                  g.totalItems,
		ResolveLinkTos:              st.resolveLinks,
		StartFrom:                   g.startString(),
		MessageTimeoutMilliseconds:  int32(st.messageTimeout / time.Millisecond),
		ExtraStatistics:             st.extraStatistics,
		MaxRetryCount:               int32(st.maxRetryCount),
		LiveBufferSize:              st.liveBufferSize,
		BufferSize:                  st.historyBufferSize,
		ReadBatchSize:               st.readBatchSize,
		CheckPointAfterMilliseconds: int32(st.checkpointAfter / time.Millisecond),
		MinCheckPointCount:          st.minCheckpointCount,
		MaxCheckPointCount:          st.maxCheckpointCount,
		ReadBufferCount:             int32(len(g.fresh)),
		RetryBufferCount:            int32(len(g.retry)),
		TotalInFlightMessages:       int32(inflight),
		OutstandingMessagesCount:    int32(inflight),
		NamedConsumerStrategy:       st.strategy,
		MaxSubscriberCount:          int32(st.maxSubscriberCount),
		ParkedMessageCount:          int64(len(g.s.groups.parkedOf(g.key))),
	}
	if cp, ok := g.checkpoint(); ok {
		info.LastCheckpointedEventPosition = g.pointString(cp)
	}
	if g.isAll() {
		if _, n := g.s.log.head(); n > 0 {
			info.LastKnownEventPosition = g.pointString(n - 1)
		}
	} else if n := len(g.s.log.streamSnapshot(g.key.stream)); n > 0 {
		info.LastKnownEventPosition = g.pointString(n - 1)
	}
	return info
}

// status is the group's state as a node names it: "Behind" while it has
// not read its source to the end, "Live" once it has. A node's group is
// Behind from its start (OnCheckpointLoaded) and reads its source in pages
// into a bounded buffer; it moves to Live once a read reaches the end of the
// source (HandleReadCompleted, isEndOfStream, StreamBuffer.TryMoveToLive),
// and falls Behind again when live events overflow its live buffer
// (NotifyLiveSubscriptionMessage): KurrentDB's
// src/KurrentDB.Core/Services/PersistentSubscription/PersistentSubscription.cs
// and StreamBuffer.cs. Here the group reads into fresh up to readAhead:
// it is Live once a read leaves nothing of its source unread, and Behind
// again when more than its live buffer is left (fill).
func (g *group) status() string {
	if g.caught {
		return "Live"
	}
	return "Behind"
}

// pointString writes a source index as SubscriptionInfo does: a revision, or
// "C:commit/P:prepare" for $all.
func (g *group) pointString(idx int) string {
	if !g.isAll() {
		return strconv.Itoa(idx)
	}
	p := int64(g.s.log.allSnapshot()[idx].position)
	return positionString(p, p)
}

func (g *group) startString() string {
	switch {
	case g.start.kind == fromEnd && g.isAll():
		return positionString(-1, -1)
	case g.start.kind == fromEnd:
		return "-1"
	case g.isAll():
		p := int64(0)
		if g.start.kind == fromPoint {
			p = int64(g.start.point)
		}
		return positionString(p, p)
	case g.start.kind == fromPoint:
		return strconv.FormatUint(g.start.point, 10)
	}
	return "0"
}
