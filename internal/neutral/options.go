package neutral

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"
)

// AllStreams names $all as the stream of a persistent subscription group.
const AllStreams = "$all"

// AllOptions configure a catch-up subscription to $all.
type AllOptions struct {
	// StreamPrefixes keeps, on the server, only the events of streams whose
	// name starts with one of these (for the cart: "shopping_cart-"). Empty
	// keeps every stream; events of system types ("$...") are left out then.
	StreamPrefixes []string
	// StreamRegex keeps only streams whose name matches it; with
	// StreamPrefixes too, the subscription is refused.
	StreamRegex string
	// EventTypePrefixes keeps only events whose type starts with one of these.
	// It leaves holes in the revisions of a stream, which the revision gate
	// would wait for forever: the runner refuses it for gated projections.
	EventTypePrefixes []string
	// EventTypeRegex keeps only events whose type matches it; with
	// EventTypePrefixes too, the subscription is refused. The same holes in
	// revisions follow.
	EventTypeRegex string
	// MaxSearchWindow and CheckpointInterval tune the server's checkpoint
	// messages: one after every MaxSearchWindow*CheckpointInterval events it
	// scans, kept or not (server defaults when 0). They move the stored
	// position on while filtered-out events go by, so that a quiet
	// projection's restart does not rescan them.
	MaxSearchWindow    int
	CheckpointInterval int
	// QuietCheckpoint is how long a subscription at the head waits for a
	// message before it reads $all to the head and moves its checkpoint
	// past the records its filter leaves out (see [Head]): the stored
	// position of a projection whose last events are not its own then
	// reaches the head. 0 is DefaultQuietCheckpoint; negative, never.
	QuietCheckpoint time.Duration
	// ResolveLinks delivers the events that link events point to.
	ResolveLinks bool
	// Logger logs drops and skipped deliveries (default: none).
	Logger *slog.Logger
}

// DefaultQuietCheckpoint is how long a subscription at the head waits for a
// message before it moves its checkpoint to the head ([AllOptions]).
const DefaultQuietCheckpoint = 5 * time.Second

// quiet is o's QuietCheckpoint, 0 for never.
func (o AllOptions) quiet() time.Duration {
	switch {
	case o.QuietCheckpoint < 0:
		return 0
	case o.QuietCheckpoint == 0:
		return DefaultQuietCheckpoint
	}
	return o.QuietCheckpoint
}

// FiltersEventTypes reports whether o leaves events out by type, so that
// streams arrive with holes. (Leaving out system events only, the default,
// leaves no hole in a user's stream.)
func (o AllOptions) FiltersEventTypes() bool {
	return len(o.EventTypePrefixes) > 0 || o.EventTypeRegex != ""
}

// Filter is the server-side filter of a subscription to $all, in neither
// client's types; each adapter turns it into its client's
// SubscriptionFilter.
type Filter struct {
	// ExcludeSystemEvents: no filter is set, and the subscription leaves out
	// the events of system types only (both clients'
	// ExcludeSystemEventsFilter); the other fields are empty.
	ExcludeSystemEvents bool
	// EventTypes says the filter is on event types; otherwise it is on
	// stream names.
	EventTypes bool
	// Regex, when set, is the filter's regular expression; otherwise
	// Prefixes are.
	Regex    string
	Prefixes []string
}

// ServerFilter returns the server-side filter of o's stream or event-type
// settings; with none set it leaves out system events only. Setting both a
// stream and an event-type filter is an error: the server takes one.
func (o AllOptions) ServerFilter() (Filter, error) {
	streams := len(o.StreamPrefixes) > 0 || o.StreamRegex != ""
	if streams && o.FiltersEventTypes() {
		return Filter{}, errors.New("$all filters by stream or by event type, not both (the server takes one filter)")
	}
	// One would replace the other: the events of the other's streams or
	// types would be left out, unsaid.
	if len(o.StreamPrefixes) > 0 && o.StreamRegex != "" {
		return Filter{}, errors.New("$all filters by StreamPrefixes or by StreamRegex, not both (the server takes one filter: fold the prefixes into the regex)")
	}
	if len(o.EventTypePrefixes) > 0 && o.EventTypeRegex != "" {
		return Filter{}, errors.New("$all filters by EventTypePrefixes or by EventTypeRegex, not both (the server takes one filter: fold the prefixes into the regex)")
	}
	for _, rx := range []string{o.StreamRegex, o.EventTypeRegex} {
		if _, err := regexp.Compile(rx); err != nil {
			return Filter{}, fmt.Errorf("filter regex: %w", err)
		}
	}
	switch {
	case o.StreamRegex != "":
		return Filter{Regex: o.StreamRegex}, nil
	case len(o.StreamPrefixes) > 0:
		return Filter{Prefixes: o.StreamPrefixes}, nil
	case o.EventTypeRegex != "":
		return Filter{EventTypes: true, Regex: o.EventTypeRegex}, nil
	case len(o.EventTypePrefixes) > 0:
		return Filter{EventTypes: true, Prefixes: o.EventTypePrefixes}, nil
	}
	return Filter{ExcludeSystemEvents: true}, nil
}

// StreamOptions configure a catch-up subscription to one stream.
type StreamOptions struct {
	// ResolveLinks delivers the events that link events point to (for a
	// $ce- or $et- stream).
	ResolveLinks bool
	Logger       *slog.Logger
}

// OrDiscard returns l, or a logger that discards everything when l is nil.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
