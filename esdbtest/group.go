package esdbtest

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/persistent"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Consumer strategies, named as the client and the server name them.
const (
	strategyRoundRobin       = "RoundRobin"
	strategyDispatchToSingle = "DispatchToSingle"
	strategyPinned           = "Pinned"
)

// reasonMaxRetry is the park reason of a message redelivered too often.
const reasonMaxRetry = "max retry count exceeded"

// readAhead bounds the messages a group reads from the log before they are
// sent.
const readAhead = 500

// allStream is the stream name of groups on $all.
const allStream = "$all"

// groupKey names a persistent subscription group.
type groupKey struct {
	stream string // allStream for a group on $all
	group  string
}

func (k groupKey) parkedStream() string {
	return "$persistentsubscription-" + k.stream + "::" + k.group + "-parked"
}

// groupSettings are a group's settings as the client sends them. Only
// resolveLinks, maxRetryCount, maxSubscriberCount, strategy and
// messageTimeout change behaviour; the others are reported by GetInfo.
type groupSettings struct {
	resolveLinks       bool
	extraStatistics    bool
	maxRetryCount      int
	minCheckpointCount int32
	maxCheckpointCount int32
	maxSubscriberCount int
	liveBufferSize     int32
	readBatchSize      int32
	historyBufferSize  int32
	strategy           string
	messageTimeout     time.Duration // 0: messages never time out
	checkpointAfter    time.Duration
}

// startKind says where a group starts.
type startKind int

const (
	fromStart startKind = iota
	fromEnd
	fromPoint // a revision of the stream or a position in $all, inclusive
)

type startPoint struct {
	kind  startKind
	point uint64
}

// message is an event of a group's source on its way to the consumers.
type message struct {
	seq      int        // index in the source (revision, or index in $all); -1 for a replayed parked message
	original *record    // the record of the source
	res      resolution // what is sent
	id       uuid.UUID
	retries  int
	consumer *consumer // while in flight
	deadline time.Time // while in flight, zero without a timeout
}

// group is a persistent subscription group: its settings, its position in
// the source, the messages between the log and the consumers, and a
// dispatcher goroutine that reads the log, times messages out and hands
// messages to consumers.
type group struct {
	s      *Server
	key    groupKey
	filter *filter // groups on $all only

	mu         sync.Mutex
	settings   groupSettings
	start      startPoint
	startIdx   int              // source index the group started at; nothing before it counts for the checkpoint
	next       int              // next source index to read
	live       map[int]*message // read, not yet acked, skipped or parked; by seq
	fresh      []*message       // read, never sent
	retry      []*message       // to send again, oldest first
	consumers  []*consumer
	rr         int
	totalItems int64
	stopped    bool
	// caught: the group has read its source to the end, and not fallen
	// more than its live buffer behind since (status).
	caught bool

	wake chan struct{} // capacity 1
	stop chan struct{}
}

func (g *group) isAll() bool { return g.key.stream == allStream }

// resolveStart returns the source index a start point designates now.
func (g *group) resolveStart(sp startPoint) int {
	if g.isAll() {
		all := g.s.log.allSnapshot()
		switch sp.kind {
		case fromEnd:
			return len(all)
		case fromPoint:
			return firstAfter(all, sp.point, true)
		}
		return 0
	}
	switch sp.kind {
	case fromEnd:
		return len(g.s.log.streamSnapshot(g.key.stream))
	case fromPoint:
		return int(sp.point)
	}
	return 0
}

// reset empties the group's queues and reads on from idx.
func (g *group) reset(idx int) {
	g.next, g.caught = idx, false
	g.live = make(map[int]*message)
	g.fresh = nil
	g.retry = nil
}

// signal wakes the dispatcher.
func (g *group) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// run is the dispatcher.
func (g *group) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		g.mu.Lock()
		if g.stopped {
			g.mu.Unlock()
			return
		}
		changed := g.fill()
		now := time.Now()
		g.expire(now)
		g.dispatch(now)
		wait, ok := g.nextDeadline(now)
		g.mu.Unlock()

		var timeout <-chan time.Time
		if ok {
			timer.Reset(wait)
			timeout = timer.C
		}
		select {
		case <-changed:
		case <-g.wake:
		case <-timeout:
		case <-g.stop:
			return
		}
		timer.Stop()
	}
}

// fill reads new events of the source into fresh, up to readAhead, and
// returns the channel closed at the log's next append.
func (g *group) fill() <-chan struct{} {
	var batch []*record
	var changed <-chan struct{}
	if g.isAll() {
		batch, changed = g.s.log.allFrom(g.next)
	} else {
		batch, changed = g.s.log.streamFrom(g.key.stream, uint64(g.next))
	}
	read := 0
	for _, r := range batch {
		if len(g.fresh) >= readAhead {
			break
		}
		read++
		seq := g.next
		g.next++
		if r.scavenged.Load() || g.isAll() && hiddenFromAll(r.stream) || g.filter != nil && !g.filter.match(r) {
			continue
		}
		res := g.s.log.resolve(r, g.settings.resolveLinks)
		m := &message{seq: seq, original: r, res: res, id: r.id}
		g.live[seq] = m
		g.fresh = append(g.fresh, m)
	}
	switch left := len(batch) - read; { // the source's events not read yet
	case left == 0:
		g.caught = true
	case left > int(g.settings.liveBufferSize):
		g.caught = false
	}
	return changed
}

// expire takes timed-out messages back from their consumers.
func (g *group) expire(now time.Time) {
	var expired []*message
	for _, c := range g.consumers {
		for id, m := range c.inflight {
			if !m.deadline.IsZero() && !now.Before(m.deadline) {
				delete(c.inflight, id)
				expired = append(expired, m)
			}
		}
	}
	g.requeue(expired)
}

// nextDeadline returns how long until the next in-flight message times out.
func (g *group) nextDeadline(now time.Time) (time.Duration, bool) {
	var first time.Time
	for _, c := range g.consumers {
		for _, m := range c.inflight {
			if !m.deadline.IsZero() && (first.IsZero() || m.deadline.Before(first)) {
				first = m.deadline
			}
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return max(first.Sub(now), 0), true
}

// requeue queues messages for redelivery in source order, one more retry
// each, and parks those that were already retried MaxRetryCount times.
func (g *group) requeue(ms []*message) {
	slices.SortFunc(ms, func(a, b *message) int { return a.seq - b.seq })
	for _, m := range ms {
		m.consumer = nil
		m.deadline = time.Time{}
		if m.retries >= g.settings.maxRetryCount {
			g.park(m, reasonMaxRetry)
			continue
		}
		m.retries++
		g.retry = append(g.retry, m)
	}
}

// done forgets a message that was acked, skipped or parked.
func (g *group) done(m *message) {
	m.consumer = nil
	if m.seq >= 0 {
		delete(g.live, m.seq)
	}
}

// parkedMeta is the metadata of a parked-message link.
type parkedMeta struct {
	Added                   time.Time `json:"added"`
	Reason                  string    `json:"reason"`
	SubscriptionEventNumber uint64    `json:"subscriptionEventNumber"`
}

// park writes a link to the message's event into the group's parked stream
// and records it with its reason.
func (g *group) park(m *message, reason string) {
	g.done(m)
	meta, err := json.Marshal(parkedMeta{Added: time.Now().UTC(), Reason: reason, SubscriptionEventNumber: m.original.revision})
	if err != nil {
		meta = []byte("{}")
	}
	p := Parked{Reason: reason}
	var data []byte
	if target := m.res.event; target != nil {
		data = []byte(strconv.FormatUint(target.revision, 10) + "@" + target.stream)
		p.EventID, p.Stream, p.Revision = target.id.String(), target.stream, target.revision
	} else {
		// A dangling link is parked as its own data, as the node's
		// PersistentSubscriptionMessageParker.GetLinkToFor does.
		data = m.res.link.data
		p.EventID, p.Stream, p.Revision = m.res.link.id.String(), m.res.link.stream, m.res.link.revision
	}
	link := proposed{
		id:          uuid.New(),
		eventType:   linkEventType,
		contentType: contentBinary,
		data:        data,
		metadata:    meta,
	}
	res, _ := g.s.log.append(g.key.parkedStream(), expectation{kind: expectAny}, []proposed{link})
	g.s.groups.addParked(g.key, parkedEntry{Parked: p, msg: m, parkedRev: res.revision})
	g.s.logger.Debug("esdbtest: parked", "group", g.key.group, "stream", g.key.stream, "event", p.EventID, "reason", reason)
}

// dispatch hands queued messages, retries first, to consumers with room.
func (g *group) dispatch(now time.Time) {
	if len(g.consumers) == 0 {
		return
	}
	g.retry = g.dispatchQueue(g.retry, now)
	g.fresh = g.dispatchQueue(g.fresh, now)
}

func (g *group) dispatchQueue(q []*message, now time.Time) []*message {
	kept := q[:0]
	blocked := false
	for _, m := range q {
		if blocked {
			kept = append(kept, m)
			continue
		}
		c := g.pick(m)
		if c == nil {
			kept = append(kept, m)
			// Pinned: another message may belong to a consumer with room.
			blocked = g.settings.strategy != strategyPinned
			continue
		}
		g.send(c, m, now)
	}
	clear(q[len(kept):])
	return kept
}

// pick chooses the consumer of a message, nil if the strategy's choice has
// no room.
func (g *group) pick(m *message) *consumer {
	n := len(g.consumers)
	switch g.settings.strategy {
	case strategyPinned:
		h := fnv.New32a()
		h.Write([]byte(assignmentSource(m.res)))
		c := g.consumers[int(h.Sum32()%1024)%n]
		if c.room() {
			return c
		}
	case strategyDispatchToSingle:
		for _, c := range g.consumers {
			if c.room() {
				return c
			}
		}
	default:
		for i := range n {
			c := g.consumers[(g.rr+i)%n]
			if c.room() {
				g.rr = (g.rr + i + 1) % n
				return c
			}
		}
	}
	return nil
}

// assignmentSource is the stream a Pinned group hashes: the event's, or for
// a dangling link the stream named in its data, as the node's
// PinnablePersistentSubscriptionConsumerStrategy.GetSourceStreamId does.
func assignmentSource(res resolution) string {
	r := res.event
	if r == nil {
		r = res.link
	}
	if r.eventType == linkEventType {
		if _, stream, ok := strings.Cut(string(r.data), "@"); ok {
			return stream
		}
		return string(r.data)
	}
	return r.stream
}

// send puts a message in flight on a consumer.
func (g *group) send(c *consumer, m *message, now time.Time) {
	c.inflight[m.id] = m
	c.total++
	g.totalItems++
	m.consumer = c
	if g.settings.messageTimeout > 0 {
		m.deadline = now.Add(g.settings.messageTimeout)
	}
	resp := persistentEvent(m.res, m.retries, c.asString)
	c.push(resp)
	g.s.stats.delivered.Add(1)
	if g.s.faults.duplicate() {
		c.push(resp)
		g.s.stats.duplicates.Add(1)
	}
}

// addConsumer connects a consumer.
func (g *group) addConsumer(c *consumer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return status.Errorf(codes.NotFound, "esdbtest: subscription group %s on %s does not exist", g.key.group, g.key.stream)
	}
	if max := g.settings.maxSubscriberCount; max > 0 && len(g.consumers) >= max {
		return status.Errorf(codes.FailedPrecondition, "esdbtest: maximum subscribers (%d) reached for group %s on %s", max, g.key.group, g.key.stream)
	}
	g.consumers = append(g.consumers, c)
	g.signal()
	return nil
}

// removeConsumer disconnects a consumer; its messages in flight are
// redelivered.
func (g *group) removeConsumer(c *consumer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.consumers, c)
	if i < 0 {
		return
	}
	g.consumers = slices.Delete(g.consumers, i, i+1)
	if g.rr >= len(g.consumers) {
		g.rr = 0
	}
	var back []*message
	for id, m := range c.inflight {
		delete(c.inflight, id)
		back = append(back, m)
	}
	g.requeue(back)
	g.signal()
}

// ack settles messages a consumer processed.
func (g *group) ack(c *consumer, ids []uuid.UUID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		if m, ok := c.inflight[id]; ok {
			delete(c.inflight, id)
			g.done(m)
		}
	}
	g.signal()
}

// nack settles messages a consumer failed to process, by action. It reports
// whether the consumer asked to stop.
func (g *group) nack(c *consumer, ids []uuid.UUID, action persistent.ReadReq_Nack_Action, reason string) (stop bool) {
	if action == persistent.ReadReq_Nack_Stop {
		return true // the consumer goes away; its messages are redelivered
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var retry []*message
	for _, id := range ids {
		m, ok := c.inflight[id]
		if !ok {
			continue
		}
		delete(c.inflight, id)
		switch action {
		case persistent.ReadReq_Nack_Park:
			if reason == "" {
				reason = "parked by nack"
			}
			g.park(m, reason)
		case persistent.ReadReq_Nack_Skip:
			g.done(m)
		default: // Retry, Unknown
			retry = append(retry, m)
		}
	}
	g.requeue(retry)
	g.signal()
	return false
}

// checkpoint returns the source index of the last event up to which every
// event was acked, skipped, parked or filtered out, if there is one.
func (g *group) checkpoint() (int, bool) {
	low := g.next
	for seq := range g.live {
		low = min(low, seq)
	}
	if low <= g.startIdx {
		return 0, false
	}
	return low - 1, true
}

// restart drops the consumers and starts the group again after its
// checkpoint, or from its start point if it has none, as the real server
// does after an update or a subsystem restart.
func (g *group) restart(settings groupSettings, start startPoint, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cp, ok := g.checkpoint()
	g.settings = settings
	g.start = start
	if ok {
		g.reset(cp + 1)
	} else {
		g.startIdx = g.resolveStart(start)
		g.reset(g.startIdx)
	}
	g.dropConsumers(codes.Aborted, why)
	g.signal()
}

// dropConsumers ends every consumer's Read call; their messages are
// forgotten (the caller has reset the group).
func (g *group) dropConsumers(code codes.Code, why string) {
	for _, c := range g.consumers {
		clear(c.inflight)
		c.live.end(status.Error(code, why))
	}
	g.consumers = nil
	g.rr = 0
}

// shutdown stops the dispatcher and drops the consumers.
func (g *group) shutdown(code codes.Code, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.stopped = true
	g.dropConsumers(code, why)
	close(g.stop)
}

// replay queues parked messages for delivery again, as new messages.
func (g *group) replay(entries []parkedEntry) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range entries {
		m := &message{seq: -1, original: e.msg.original, res: e.msg.res, id: e.msg.id}
		g.retry = append(g.retry, m)
	}
	g.signal()
}
