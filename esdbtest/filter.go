package esdbtest

import (
	"regexp"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/persistent"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// filter is a server-side filter on $all: on the stream name or the event
// type, by prefixes or a regular expression (Go's RE2 syntax, unanchored, as
// .NET's Regex.IsMatch is).
type filter struct {
	byType   bool
	prefixes []string
	re       *regexp.Regexp
	// interval is the number of scanned events between two checkpoints:
	// the search window times the checkpoint interval multiplier.
	interval int
}

// match reports whether r passes the filter. It looks at r itself, not at
// the event a link points to.
func (f *filter) match(r *record) bool {
	subject := r.stream
	if f.byType {
		subject = r.eventType
	}
	if f.re != nil {
		return f.re.MatchString(subject)
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(subject, p) {
			return true
		}
	}
	return false
}

// expression is the part common to the two protocols' filter messages.
type expression interface {
	GetRegex() string
	GetPrefix() []string
}

func newFilter(byType bool, expr expression, window uint32, multiplier uint32) (*filter, error) {
	f := &filter{byType: byType, prefixes: expr.GetPrefix()}
	if rx := expr.GetRegex(); rx != "" {
		re, err := regexp.Compile(rx)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "esdbtest: filter regex %q: %v", rx, err)
		}
		f.re = re
	}
	if f.re == nil && len(f.prefixes) == 0 {
		return nil, status.Error(codes.InvalidArgument, "esdbtest: filter without prefixes or regex")
	}
	f.interval = int(max(window, 1) * max(multiplier, 1))
	return f, nil
}

// filterOf reads the filter of a Streams.Read request. A "count" window
// counts as a window of 1, so checkpoints come every multiplier events.
func filterOf(fo *streams.ReadReq_Options_FilterOptions) (*filter, error) {
	window := fo.GetMax()
	switch v := fo.GetFilter().(type) {
	case *streams.ReadReq_Options_FilterOptions_EventType:
		return newFilter(true, v.EventType, window, fo.GetCheckpointIntervalMultiplier())
	case *streams.ReadReq_Options_FilterOptions_StreamIdentifier:
		return newFilter(false, v.StreamIdentifier, window, fo.GetCheckpointIntervalMultiplier())
	}
	return nil, status.Error(codes.InvalidArgument, "esdbtest: filter on neither stream name nor event type")
}

// filterOfCreate reads the filter of a persistent subscription to $all.
func filterOfCreate(fo *persistent.CreateReq_AllOptions_FilterOptions) (*filter, error) {
	switch v := fo.GetFilter().(type) {
	case *persistent.CreateReq_AllOptions_FilterOptions_EventType:
		return newFilter(true, v.EventType, fo.GetMax(), fo.GetCheckpointIntervalMultiplier())
	case *persistent.CreateReq_AllOptions_FilterOptions_StreamIdentifier:
		return newFilter(false, v.StreamIdentifier, fo.GetMax(), fo.GetCheckpointIntervalMultiplier())
	}
	return nil, status.Error(codes.InvalidArgument, "esdbtest: filter on neither stream name nor event type")
}
