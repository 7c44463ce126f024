package neutral

import (
	"context"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/revgate/projector/projector"
)

// Record is one record of $all as a scan reads it: where it is, and what
// the server-side filter of a subscription looks at.
type Record struct {
	Checkpoint projector.Checkpoint
	Stream     string
	Type       string
}

// ScanAll reads $all forwards from the position of after (the start when
// nil) to its head as it is now, handing each record to each until each
// returns false or max records were read. Each source package implements it
// on its client.
type ScanAll func(ctx context.Context, after *projector.Checkpoint, max int, each func(Record) bool) error

// HeadScanLimit bounds the records one scan at the head reads (about 10 MB
// of records); a scan that stops there still returns a position it may
// store, short of the head.
const HeadScanLimit = 1 << 15

// Head commits the position of a filtered subscription to $all when it
// reaches the head. A node sends a filtered subscription's checkpoint
// message only after every CheckpointInterval search windows of records it
// scanned (KurrentDB's FilteredAllSubscription; no checkpoint at the head),
// so a projection whose events are rare would otherwise keep a stored
// position as far behind the head as the last event it handled, and a
// restart would scan again everything since. At the caught-up message Head
// reads $all from the last position the subscription delivered, applies the
// subscription's own filter, and returns the position of the last record
// before the first one the filter keeps: every record up to it was either
// delivered already or is one the subscription leaves out, so a runner may
// store it. The events the filter keeps after it are still to come through
// the subscription, past it.
//
// The scan reads the records since the subscription's last checkpoint
// message (at most MaxSearchWindow x CheckpointInterval of them, 32 by the
// clients' defaults) and those appended since it caught up, which it stops
// at as soon as one is the projection's, and at most [HeadScanLimit].
//
// It scans again whenever the subscription, at the head, has had no message
// for AllOptions.QuietCheckpoint: a projection whose live traffic ends with
// records its filter leaves out gets its stored position to the head then,
// instead of after the node's next checkpoint message, which may never come.
type Head struct {
	scan  ScanAll
	keeps func(stream, eventType string) bool
	quiet time.Duration // 0: no scan when quiet
}

// NewHead returns the head scan of a subscription to $all under o, on scan.
func NewHead(o AllOptions, scan ScanAll) *Head {
	return &Head{scan: scan, keeps: o.keeps(), quiet: o.quiet()}
}

// After returns the checkpoint to store once a subscription that delivered
// up to last (nil: nothing yet, from the start) reaches the head; nil when
// no record lies between last and the first one the filter keeps.
func (h *Head) After(ctx context.Context, last *projector.Checkpoint) (*projector.Checkpoint, error) {
	var out *projector.Checkpoint
	err := h.scan(ctx, last, HeadScanLimit, func(r Record) bool {
		if last != nil && !r.Checkpoint.After(*last) {
			return true // the record at last itself (or one of its commit)
		}
		if h.keeps(r.Stream, r.Type) {
			return false
		}
		cp := r.Checkpoint
		out = &cp
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// keeps returns o's filter as the server applies it to a record of $all
// (KurrentDB's EventFilter: prefixes by StartsWith, a regular expression by
// .NET's Regex.IsMatch, unanchored; with no filter, records of system types,
// "$...", are left out). When in doubt it keeps: a record kept here only
// stops the scan sooner. So a name that is not all ASCII is kept under a
// regular expression: .NET's \w, \d, \s and \b take Unicode letters and
// digits where Go's take ASCII only, and the two engines agree on ASCII.
func (o AllOptions) keeps() func(stream, eventType string) bool {
	f, err := o.ServerFilter()
	if err != nil {
		return func(string, string) bool { return true }
	}
	pick := func(stream, eventType string) string {
		if f.EventTypes {
			return eventType
		}
		return stream
	}
	switch {
	case f.ExcludeSystemEvents:
		return func(_, eventType string) bool { return !strings.HasPrefix(eventType, "$") }
	case f.Regex != "":
		rx, err := regexp.Compile(f.Regex)
		if err != nil {
			return func(string, string) bool { return true }
		}
		return func(stream, eventType string) bool {
			name := pick(stream, eventType)
			return !ascii(name) || rx.MatchString(name)
		}
	}
	return func(stream, eventType string) bool {
		s := pick(stream, eventType)
		for _, p := range f.Prefixes {
			if strings.HasPrefix(s, p) {
				return true
			}
		}
		return false
	}
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
