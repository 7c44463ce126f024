package projector

import (
	"errors"
	"fmt"
	"strings"

	"github.com/revgate/projector/retry"
)

var (
	// ErrPredecessorMissing: the document did not reach the revision before
	// the event's within the retry policy.
	ErrPredecessorMissing = errors.New("predecessor not applied in time")
	// ErrPredecessorFailed: an earlier event of the same document, in flight in
	// this engine, failed, so this one cannot apply.
	ErrPredecessorFailed = errors.New("earlier event of the document failed")
	// ErrUndecodable: the payload does not decode into its registered type.
	ErrUndecodable = errors.New("payload does not decode")
	// ErrPanic: a projection function panicked.
	ErrPanic = errors.New("projection panicked")
	// ErrOtherStream: under the revision gate, an event of another stream
	// than the one that feeds its document (the projection's IDFunc maps
	// several streams to one document).
	ErrOtherStream = errors.New("event of another stream than its document's")
	// ErrAlreadyCreated: a creation event arrived for a document that exists
	// at an earlier revision.
	ErrAlreadyCreated = errors.New("document already created")
	// ErrUnroutable: the projection's router said the event is the
	// projection's but could not name the document it feeds (a metadata
	// field missing or mangled, an empty id, a router that panicked). A
	// permanent failure, under the projection's failure policy.
	ErrUnroutable = errors.New("event names no document of the projection")
	// ErrNotHandled: [Engine.HandleBatch] left the event alone because an
	// earlier one of the batch failed, which stops a runner: the event is
	// delivered again when the runner starts over.
	ErrNotHandled = errors.New("not handled: an earlier event of the batch failed")
)

// Error is a failed event in one projection, with where it happened.
type Error struct {
	Projection string
	Document   string
	Stream     string
	EventID    string
	EventType  string
	// Revision is the event's stream revision.
	Revision uint64
	// Wanted is the document revision the gate waited for (Revision-1), or -1
	// when it did not wait (a creation, a permanent error).
	Wanted int64
	// Seen is the document's revision when the engine gave up waiting for
	// its predecessor ([ErrPredecessorMissing]); -1 when the document had
	// none of the stream's events (there was no document, or, fed by many
	// streams, none of this one).
	Seen int64
	// Attempts is how many times the gate read the document.
	Attempts int
	// Err is the cause.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Document == "" {
		fmt.Fprintf(&b, "projection %q, no document (stream %q, revision %d, %s): ",
			e.Projection, e.Stream, e.Revision, e.EventType)
	} else {
		fmt.Fprintf(&b, "projection %q, document %q (stream %q, revision %d, %s): ",
			e.Projection, e.Document, e.Stream, e.Revision, e.EventType)
	}
	switch {
	case e.Wanted >= 0 && errors.Is(e.Err, ErrPredecessorMissing):
		// No document, or (fed by many streams) one that has none of this
		// stream's events yet.
		seen := "none of the stream's events applied"
		if e.Seen >= 0 {
			seen = fmt.Sprintf("revision %d", e.Seen)
		}
		fmt.Fprintf(&b, "wanted revision %d, saw %s after %d attempts: ", e.Wanted, seen, e.Attempts)
	case e.Wanted >= 0:
		fmt.Fprintf(&b, "wanted revision %d, %d attempts: ", e.Wanted, e.Attempts)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether handling the event again later can succeed: true
// for a predecessor that was not there in time or a store that did not answer,
// false for a domain error, a payload that does not decode or a panic.
func (e *Error) Retryable() bool { return !retry.IsPermanent(e.Err) }
