package esdbtest

import (
	"strconv"
	"strings"
)

// viewStatus is how a stream reads.
type viewStatus int

const (
	viewOK       viewStatus = iota
	viewNotFound            // no events, or soft-deleted: StreamNotFound
	viewDeleted             // tombstoned: StreamDeleted
)

// streamView is a stream as a read sees it.
type streamView struct {
	status viewStatus
	events []*record // the events a read returns, by revision (viewOK only)
	end    uint64    // the revision the stream's next event gets
}

// view returns a stream as the node's IndexReader reads it: nothing for a
// tombstoned or soft-deleted stream, and otherwise its events from the
// lowest revision that $maxCount and $tb allow, without those older than
// $maxAge and those a scavenge removed.
func (l *eventLog) view(stream string) streamView {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.viewLocked(stream)
}

func (l *eventLog) viewLocked(stream string) streamView {
	last := l.lastRevision(stream)
	if last == deletedStream {
		return streamView{status: viewDeleted}
	}
	meta := l.metadataOf(stream)
	if last < 0 || meta.softDeleted() {
		return streamView{status: viewNotFound, end: uint64(last + 1)}
	}
	events := l.streams[stream]
	end := uint64(len(events))
	from := visibleFrom(meta, last)
	if from > last {
		return streamView{end: end}
	}
	cutoff := l.cutoff(meta)
	i := last
	for i >= from && !events[i].scavenged.Load() && events[i].created >= cutoff {
		i--
	}
	return streamView{events: events[i+1 : last+1 : last+1], end: end}
}

// visibleFrom is the lowest revision that $maxCount and $tb leave readable.
func visibleFrom(meta *streamMeta, last int64) int64 {
	from := int64(0)
	if meta.maxCount > 0 {
		from = max(from, last-meta.maxCount+1)
	}
	if meta.hasTB {
		from = max(from, meta.tb)
	}
	return from
}

// cutoff is the "created" below which $maxAge hides events, in ticks.
func (l *eventLog) cutoff(meta *streamMeta) int64 {
	if meta.maxAge <= 0 {
		return minTicks
	}
	return unixEpochTicks(l.now().Add(-meta.maxAge))
}

const minTicks = -1 << 63

// readEvent reads one event of a stream as the node's ReadEvent does for a
// link: -1 is the last event; nil when the stream is deleted or missing, or
// the event is hidden by the metadata or gone.
func (l *eventLog) readEvent(stream string, n int64) *record {
	l.mu.RLock()
	defer l.mu.RUnlock()
	last := l.lastRevision(stream)
	meta := l.metadataOf(stream)
	if last < 0 || last == deletedStream || meta.softDeleted() || n < -1 {
		return nil
	}
	if n == -1 {
		n = last
	}
	if n < visibleFrom(meta, last) || n > last {
		return nil
	}
	r := l.streams[stream][n]
	if r.scavenged.Load() || r.created < l.cutoff(meta) {
		return nil
	}
	return r
}

// resolution is what a read sends for a record: the event and, for a link,
// the link. A dangling link (one whose event is gone) has no event.
type resolution struct {
	event, link *record
}

// original is the record a position or a revision of the message refers to.
func (r resolution) original() *record {
	if r.link != nil {
		return r.link
	}
	return r.event
}

// resolve returns what to send for r, as the node's ResolveLinkToEvent does:
// a link ("$>", data "revision@stream") whose event reads is sent with it; a
// link whose event does not read (deleted, truncated, scavenged) is sent
// with no event; a link whose revision does not parse is sent as an event.
func (l *eventLog) resolve(r *record, resolveLinks bool) resolution {
	if !resolveLinks || r.eventType != linkEventType {
		return resolution{event: r}
	}
	rev, stream, found := strings.Cut(string(r.data), "@")
	n, err := strconv.ParseInt(strings.TrimSpace(rev), 10, 64)
	if err != nil {
		return resolution{event: r}
	}
	if !found {
		return resolution{link: r} // the node fails on the missing stream name
	}
	if target := l.readEvent(stream, n); target != nil {
		return resolution{event: target, link: r}
	}
	return resolution{link: r}
}
