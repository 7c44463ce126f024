package esdbtest

import (
	"regexp"
	"strings"

	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/persistent"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
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
	// window is the most events one page of a catch-up read scans (the
	// filter's max search window).
	window int
	// interval is the number of scanned events between two checkpoints:
	// the search window times the checkpoint interval multiplier.
	interval int
}

// readBatchSize is the node's Enumerators.ReadBatchSize: the most events one
// page of a catch-up read returns, and the search window of a filter whose
// window is "count".
const readBatchSize = 32

// match reports whether r passes the filter. It looks at r itself, not at
// the event a link points to, and, as on $all every filter does, leaves out
// the streams hiddenFromAll names.
func (f *filter) match(r *record) bool {
	if hiddenFromAll(r.stream) {
		return false
	}
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

// newFilter builds a filter; window is nil for a "count" window.
func newFilter(byType bool, expr expression, window *uint32, multiplier uint32) (*filter, error) {
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
	f.window = readBatchSize
	if window != nil {
		f.window = int(max(*window, 1))
	}
	f.interval = f.window * int(max(multiplier, 1))
	return f, nil
}

// filterOf reads the filter of a Streams.Read request. A "count" window is
// the default search window, readBatchSize, as the node's Streams.Read
// makes it.
func filterOf(fo *streams.ReadReq_Options_FilterOptions) (*filter, error) {
	var window *uint32
	if v, ok := fo.GetWindow().(*streams.ReadReq_Options_FilterOptions_Max); ok {
		window = &v.Max
	}
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
	var window *uint32
	if v, ok := fo.GetWindow().(*persistent.CreateReq_AllOptions_FilterOptions_Max); ok {
		window = &v.Max
	}
	switch v := fo.GetFilter().(type) {
	case *persistent.CreateReq_AllOptions_FilterOptions_EventType:
		return newFilter(true, v.EventType, window, fo.GetCheckpointIntervalMultiplier())
	case *persistent.CreateReq_AllOptions_FilterOptions_StreamIdentifier:
		return newFilter(false, v.StreamIdentifier, window, fo.GetCheckpointIntervalMultiplier())
	}
	return nil, status.Error(codes.InvalidArgument, "esdbtest: filter on neither stream name nor event type")
}
