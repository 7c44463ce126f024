package esdbtest

import "github.com/google/uuid"

// appendResult is what an append did.
type appendResult struct {
	exists   bool   // the stream has events (false only for an empty append to a missing stream)
	revision uint64 // revision of the stream's last event
	position uint64 // position of the stream's last event written or matched
	written  int    // events written; 0 for an idempotent repeat
}

// append writes events to a stream if the expectation holds. It returns a
// *wrongVersion or errStreamDeleted when the node would refuse the write.
//
// Writing to a soft-deleted stream recreates it as the node's
// StorageWriterService does: the events continue its revisions, and a new
// metadata event, the old metadata with $tb set to the first new revision,
// hides the events before them. Writing metadata to a soft-deleted stream's
// metadata stream does the same with the metadata just written.
func (l *eventLog) append(stream string, exp expectation, events []proposed) (appendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.check(stream, exp, events)
	switch c.outcome {
	case checkRepeat:
		return c.repeat, nil
	case checkDeleted:
		return appendResult{}, errStreamDeleted
	case checkWrong:
		return appendResult{}, &wrongVersion{expected: exp, current: c.current}
	}
	undeleteOriginal := isMetastream(stream) && !isMetastream(originalOf(stream)) &&
		l.metadataOf(originalOf(stream)).softDeleted()
	created := unixEpochTicks(l.now())
	first := uint64(c.current + 1)
	var written []*record
	for i, p := range events {
		written = append(written, l.write(stream, first+uint64(i), p, created))
	}
	res := appendResult{written: len(written)}
	if c.current >= 0 || len(written) > 0 {
		last := l.streams[stream][len(l.streams[stream])-1]
		res.exists, res.revision, res.position = true, last.revision, last.position
	}
	if c.soft {
		written = append(written, l.undelete(stream, first, created)...)
	}
	if undeleteOriginal {
		original := originalOf(stream)
		written = append(written, l.undelete(original, uint64(l.lastRevision(original)+1), created)...)
	}
	l.publish(written)
	return res, nil
}

// undelete writes the metadata that recreates a soft-deleted stream from
// revision from on: its current metadata with $tb = from. Metadata that is
// not a JSON object is left alone, as the node's SoftUndeleteRawMeta does.
// l.mu must be held.
func (l *eventLog) undelete(stream string, from uint64, created int64) []*record {
	data, ok := setTruncateBefore(l.rawMetadataOf(stream), from)
	if !ok {
		return nil
	}
	p := proposed{id: uuid.New(), eventType: typeMetadata, contentType: contentJSON, data: data, metadata: []byte{}}
	meta := metaPrefix + stream
	return []*record{l.write(meta, uint64(len(l.streams[meta])), p, created)}
}
