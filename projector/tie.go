package projector

import (
	"context"
	"fmt"
	"strings"

	"github.com/revgate/projector/retry"
)

// tieKey is a stream as a projection that ties it sees it.
type tieKey struct{ projection, stream string }

// route returns the document ev feeds in projection p: its router's
// answer; for an event of a stream p ties ([Projection.TieStreams]) that the
// router declines, the document of the stream's first event it routes.
func (e *Engine) route(ctx context.Context, p Definition, ev Event) (id string, ok bool, err error) {
	id, ok, err = p.Route(ev)
	if err != nil || ok || !ties(p, ev.StreamID) {
		return id, ok, err
	}
	return e.tieOf(ctx, p, ev.StreamID)
}

// ties reports whether p ties stream.
func ties(p Definition, stream string) bool {
	for _, prefix := range p.tiedStreams() {
		if strings.HasPrefix(stream, prefix) {
			return true
		}
	}
	return false
}

// tieOf returns the document of the first event of stream that p's router
// routes, read from the event store (once a process, while the engine
// remembers it), under the engine's retry policy. An error wraps
// [ErrUnroutable]: no event of the stream names a document, or the stream
// could not be read.
func (e *Engine) tieOf(ctx context.Context, p Definition, stream string) (string, bool, error) {
	k := tieKey{p.Name(), stream}
	if id, ok := e.ties.Get(k); ok {
		return id, true, nil
	}
	var id string
	err := retry.Do(ctx, e.policy, func(ctx context.Context) error {
		return e.history.ReadStream(ctx, stream, 0, func(ev Event) error {
			decoded, err := e.registry.Decode(ev)
			if err != nil {
				decoded = ev // routed without its payload, as its router can
			}
			if to, ok, err := p.Route(decoded); err == nil && ok {
				id = to
				return ErrStopRead
			}
			return nil
		})
	}, e.retryOpts...)
	switch {
	case err != nil:
		return "", true, fmt.Errorf("%w: reading stream %q for the document its events are tied to: %w", ErrUnroutable, stream, err)
	case id == "":
		return "", true, fmt.Errorf("%w: the projection ties the events of stream %q to the document of its first event the router routes, and it routes none", ErrUnroutable, stream)
	}
	e.ties.Add(k, id)
	return id, true, nil
}
