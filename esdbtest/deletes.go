package esdbtest

import (
	"strconv"

	"github.com/google/uuid"
)

// softDeleteMetadata is what the node's soft delete writes to the metadata
// stream: StreamMetadata(truncateBefore: EventNumber.DeletedStream), which
// replaces any metadata the stream had.
var softDeleteMetadata = []byte(`{"$tb":` + strconv.FormatInt(deletedStream, 10) + `}`)

// softDelete deletes a stream as the node's StorageWriterService does for
// DeleteStream: it checks the expectation like an append of one event,
// refuses a stream that has neither events nor metadata (WrongExpectedVersion,
// current -1), and writes softDeleteMetadata. It returns the position of
// that metadata event.
func (l *eventLog) softDelete(stream string, exp expectation) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.check(stream, exp, []proposed{{id: uuid.New()}})
	switch c.outcome {
	case checkDeleted:
		return 0, errStreamDeleted
	case checkWrong:
		return 0, &wrongVersion{expected: exp, current: c.current}
	}
	meta := metaPrefix + stream
	if l.lastRevision(stream) < 0 && l.lastRevision(meta) < 0 {
		return 0, &wrongVersion{expected: exp, current: -1}
	}
	p := proposed{id: uuid.New(), eventType: typeMetadata, contentType: contentJSON, data: softDeleteMetadata, metadata: []byte{}}
	r := l.write(meta, uint64(len(l.streams[meta])), p, unixEpochTicks(l.now()))
	l.publish([]*record{r})
	return r.position, nil
}

// tombstone deletes a stream for good as the node's StorageWriterService
// does for TombstoneStream: it checks the expectation like an append of one
// event and writes a "$streamDeleted" event with no data at revision
// deletedStream (long.MaxValue). It returns the tombstone's position.
func (l *eventLog) tombstone(stream string, exp expectation) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := uuid.New()
	c := l.check(stream, exp, []proposed{{id: id}})
	switch c.outcome {
	case checkDeleted:
		return 0, errStreamDeleted
	case checkWrong:
		return 0, &wrongVersion{expected: exp, current: c.current}
	}
	p := proposed{id: id, eventType: typeStreamDeleted, contentType: contentBinary, data: []byte{}, metadata: []byte{}}
	r := l.write(stream, deletedStream, p, unixEpochTicks(l.now()))
	l.publish([]*record{r})
	return r.position, nil
}
