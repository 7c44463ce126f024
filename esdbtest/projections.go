package esdbtest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// The "$v" of the links the two projections write: projection id, epoch,
// version and projections subsystem version (4 in 23.10), as a new node
// numbers its system projections ($by_category 3, $by_event_type 4).
const (
	versionByCategory  = "3:-1:1:4"
	versionByEventType = "4:-1:1:4"
)

// outputStreamMetadata is the metadata a projection writes before its first
// event to a stream ("$ce-cart", "$et-CartOpened"): every user may read it
// (EmittedStream.SubmitWriteMetadata, for a stream whose name starts with
// "$").
var outputStreamMetadata = []byte(`{"$acl":{"$r":"$all","$mr":"$all"}}`)

// systemProjections keeps the streams of a node's $by_category (first "-"
// as the separator, its default) and $by_event_type system projections.
// The node's projections read $all and write behind it; here their links
// are written in the same operation as the events they link to, right after
// them, $by_category's before $by_event_type's for each event.
type systemProjections struct{}

func newSystemProjections() *systemProjections { return &systemProjections{} }

// process writes the links for records an operation wrote; l.mu must be
// held. The links are in system streams, which the projections do not read.
func (sp *systemProjections) process(l *eventLog, written []*record) {
	created := unixEpochTicks(l.now())
	for _, r := range written {
		if !projectionsRead(r.stream) {
			continue
		}
		deleted, deletedOf := streamDeletion(r)
		sp.byCategory(l, r, deleted, deletedOf, created)
		sp.byEventType(l, r, deleted, deletedOf, created)
	}
}

// byCategory is the node's CategorizeEventsByStreamPath: every event (links
// included) of a stream "category-..." is linked from "$ce-category"; a
// deletion record (soft-delete metadata, tombstone) is categorized by the
// stream it deletes.
func (sp *systemProjections) byCategory(l *eventLog, r *record, deleted bool, deletedOf string, created int64) {
	source := r.stream
	if deleted {
		source = deletedOf
	}
	category := categoryOf(source)
	if category == "" {
		return
	}
	target := strconv.FormatUint(r.revision, 10) + "@" + r.stream
	if r.eventType == linkEventType {
		target = string(r.data)
	}
	extra := []member{{name: "$o", value: jsonString(source)}}
	if deleted {
		extra = append(extra, member{name: "$deleted", value: json.RawMessage("-1")})
	}
	sp.link(l, "$ce-"+category, target, linkMetadata(versionByCategory, r, extra), created)
}

// byEventType is the node's IndexEventsByEventType: every event but links
// is linked from "$et-<its type>", deletion records from "$et-$deleted".
// For an event of a metadata stream the link names the stream the metadata
// is for, not the metadata stream, as the node's does.
func (sp *systemProjections) byEventType(l *eventLog, r *record, deleted bool, deletedOf string, created int64) {
	if r.eventType == linkEventType {
		return
	}
	eventType := r.eventType
	var extra []member
	if deleted {
		eventType = "$deleted"
		extra = append(extra, member{name: "$deleted", value: json.RawMessage("-1")})
	}
	target := strconv.FormatUint(r.revision, 10) + "@" + deletedOf
	sp.link(l, "$et-"+eventType, target, linkMetadata(versionByEventType, r, extra), created)
}

// link writes a link event to a projection's stream, after the stream's
// metadata if the stream is new.
func (sp *systemProjections) link(l *eventLog, stream, target string, meta []byte, created int64) {
	if len(l.streams[stream]) == 0 {
		mp := proposed{id: uuid.New(), eventType: typeMetadata, contentType: contentJSON, data: outputStreamMetadata, metadata: []byte{}}
		l.write(metaPrefix+stream, uint64(len(l.streams[metaPrefix+stream])), mp, created)
	}
	p := proposed{id: uuid.New(), eventType: linkEventType, contentType: contentBinary, data: []byte(target), metadata: meta}
	l.write(stream, uint64(len(l.streams[stream])), p, created)
}

// projectionsRead reports whether the projections read a stream's events:
// not those of system streams, except the metadata streams of other streams
// (TransactionFileEventFilter.PassesSource).
func projectionsRead(stream string) bool {
	return !isSystemStream(stream) || isMetastream(stream) && !isSystemStream(originalOf(stream))
}

// streamDeletion tells the node's deletion records (StreamDeletedHelper):
// a "$metadata" event whose $tb is that of a soft delete, or a tombstone.
// of is the stream the record is about: the original of a metadata stream,
// else the record's own.
func streamDeletion(r *record) (deleted bool, of string) {
	if isMetastream(r.stream) {
		return r.eventType == typeMetadata && r.meta.softDeleted(), originalOf(r.stream)
	}
	return r.eventType == typeStreamDeleted, r.stream
}

// categoryOf is the node's StreamCategoryExtractorByFirstSeparator with "-":
// the name up to its first "-", none for a system stream or a name without
// one (or starting with one).
func categoryOf(stream string) string {
	if isSystemStream(stream) {
		return ""
	}
	if i := strings.IndexByte(stream, '-'); i > 0 {
		return stream[:i]
	}
	return ""
}

// linkMetadata is the metadata of a projection's link (the CheckpointTag of
// the event it links to, written by CheckpointTag.WriteTo, then the extra
// members, $causedBy and the event's $correlationId if it has one).
func linkMetadata(version string, r *record, extra []member) []byte {
	pos := json.RawMessage(strconv.FormatUint(r.position, 10))
	members := []member{{name: "$v", value: jsonString(version)}, {name: "$c", value: pos}, {name: "$p", value: pos}}
	members = append(members, extra...)
	members = append(members, member{name: "$causedBy", value: jsonString(r.id.String())})
	if id, ok := correlationID(r); ok {
		members = append(members, member{name: "$correlationId", value: jsonString(id)})
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(m.name))
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// correlationID reads "$correlationId" from the metadata of a JSON event, as
// the node's ParseCheckpointTagCorrelationId does.
func correlationID(r *record) (string, bool) {
	if r.contentType != contentJSON || len(r.metadata) == 0 {
		return "", false
	}
	members, ok := objectMembers(r.metadata)
	if !ok {
		return "", false
	}
	for _, m := range members {
		if m.name != "$correlationId" {
			continue
		}
		var s string
		if json.Unmarshal(m.value, &s) == nil {
			return s, true
		}
		return string(m.value), true
	}
	return "", false
}

// jsonString writes s as a JSON string, without the HTML escapes of
// encoding/json (the node's Newtonsoft writer does not make them).
func jsonString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}
