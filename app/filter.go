package app

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/revgate/projector/projector"

	"github.com/revgate/projector/subscription"
)

// Filter is what a projection's subscription reads from $all: the server
// sends only the events that pass it (and checkpoint messages while the
// others go by, so that a quiet projection's position still moves). Build it
// with [StreamPrefix], [Category], [StreamRegex] or [EventTypes].
type Filter struct {
	kind     filterKind
	prefixes []string // stream-name prefixes
	regex    string   // stream-name regular expression
	types    []string // event types, exactly
	category string   // the category Category was given
	what     string   // for messages
}

type filterKind int

const (
	readsNothing filterKind = iota
	byPrefix
	byRegex
	byTypes
)

// StreamPrefix reads the streams whose names start with one of prefixes
// ("loan/" reads loan/1, loan/2, ...), and their metadata streams ("$$loan/1"),
// where a node records that a stream was deleted.
func StreamPrefix(prefixes ...string) Filter {
	return Filter{kind: byPrefix, prefixes: prefixes, what: fmt.Sprintf("streams %q*", prefixes)}
}

// Category reads the streams of an EventStoreDB category: "<category>-<id>",
// as Category("shopping_cart") reads shopping_cart-1, shopping_cart-2, ...
// It is a stream-name prefix on $all, so the server needs no system
// projection (no $ce- stream) for it.
func Category(category string) Filter {
	f := StreamPrefix(category + "-")
	f.what = fmt.Sprintf("category %q", category)
	f.category = category
	return f
}

// StreamRegex reads the streams whose names match expr. The server
// evaluates it: EventStoreDB and KurrentDB use .NET regular expressions
// (the test server uses Go's RE2), so keep to the syntax both share.
func StreamRegex(expr string) Filter {
	return Filter{kind: byRegex, regex: expr, what: fmt.Sprintf("streams matching %q", expr)}
}

// EventTypes reads the events of these types only, from any stream. It
// leaves holes in each stream's revisions, so it suits projections whose
// strategy needs no revision order (HandledIDs, Inbox, None, GlobalPosition);
// the command line refuses it for StreamRevision and RevisionMap, which would
// wait for the holes forever.
func EventTypes(types ...string) Filter {
	return Filter{kind: byTypes, types: types, what: fmt.Sprintf("event types %q", types)}
}

func (f Filter) String() string {
	if f.what == "" {
		return "nothing"
	}
	return f.what
}

// byType reports whether the filter leaves events out by type.
func (f Filter) byType() bool { return f.kind == byTypes }

// check reports a filter that reads nothing or cannot be sent to a server.
func (f Filter) check() error {
	switch f.kind {
	case readsNothing:
		return errors.New("reads nothing: set Reads to app.StreamPrefix, app.Category, app.StreamRegex or app.EventTypes")
	case byPrefix:
		if len(f.prefixes) == 0 {
			return errors.New("reads no stream: StreamPrefix needs at least one prefix")
		}
		for _, p := range f.prefixes {
			if strings.TrimSpace(p) == "" || p == "-" {
				return fmt.Errorf("reads %s: an empty prefix or category would read every stream", f)
			}
		}
		if c, ok := strings.CutSuffix(f.category, "-"); ok && strings.TrimSpace(c) != "" {
			// It would read streams named "<category>--<id>": none, silently.
			return fmt.Errorf("reads %s: a category is the stream name before its \"-\", without it: Category(%q) reads %s-1, %s-2 and so on", f, c, c, c)
		}
	case byTypes:
		if len(f.types) == 0 {
			return errors.New("reads no event: EventTypes needs at least one type")
		}
		for _, t := range f.types {
			if strings.TrimSpace(t) == "" {
				return fmt.Errorf("reads %s: an event type is empty", f)
			}
		}
	case byRegex:
		if f.regex == "" {
			return errors.New("reads no stream: StreamRegex needs an expression")
		}
		if _, err := regexp.Compile(f.regex); err != nil {
			return fmt.Errorf("reads an invalid stream regex: %v", err)
		}
	}
	return nil
}

// readsTies reports a stream prefix p ties ([projector.Projection.TieStreams])
// whose streams the filter does not read: their events would never reach
// the documents they feed, and the projection would look healthy.
func (f Filter) readsTies(p projector.Definition) error {
	tied, ok := p.(interface{ TiedStreams() []string })
	if !ok || f.kind == byTypes { // by type, from every stream
		return nil
	}
	var re *regexp.Regexp
	if f.kind == byRegex {
		re = regexp.MustCompile(f.regex) // check has compiled it
	}
	for _, t := range tied.TiedStreams() {
		var reads bool
		switch f.kind {
		case byPrefix:
			reads = slices.ContainsFunc(f.prefixes, func(r string) bool { return strings.HasPrefix(t, r) })
		case byRegex:
			// A stream of the prefix, as the server would match it.
			reads = re.MatchString(t + "1")
		}
		if !reads {
			return fmt.Errorf("ties streams %q* (TieStreams), but reads %s: their events would never reach its documents; read them too", t, f)
		}
	}
	return nil
}

// withVersionedNames returns f, a filter by event type, reading also each
// name "T.vN" that p handles, for a type T it reads: under
// [projector.Registry.VersionField] an event stored under that name decodes
// as that version too (a log that had its versions in its type names
// before), as does, without it, an older form so named. A filter naming T
// means T's events, whatever registered name carries their version (a
// "T.vN" nobody registered is a type the registry does not know).
func (f Filter) withVersionedNames(registry *projector.Registry, p projector.Definition) Filter {
	if f.kind != byTypes {
		return f
	}
	var added []string
	for _, t := range projector.HandledTypes(registry, p) {
		m := versionedName.FindStringSubmatch(t)
		if m != nil && slices.Contains(f.types, m[1]) && !slices.Contains(f.types, t) && !slices.Contains(added, t) {
			added = append(added, t)
		}
	}
	if len(added) == 0 {
		return f
	}
	f.types = append(slices.Clone(f.types), added...)
	f.what = fmt.Sprintf("%s (and %q, the names of their versions)", f.what, added)
	return f
}

// versionedName is an event type name that carries its version: "T.vN".
var versionedName = regexp.MustCompile(`^(.+)\.v[0-9]+$`)

// covers reports, for a filter by event type, a type it names that the
// registry does not know (a typo reads nothing, and the projection would
// look caught up for ever) and a type p handles that it leaves out (that
// handler would never be called).
func (f Filter) covers(registry *projector.Registry, p projector.Definition) error {
	if f.kind != byTypes {
		return nil
	}
	for _, t := range f.types {
		if !registry.Has(t) {
			return fmt.Errorf("reads event type %q, which is not in the event registry", t)
		}
	}
	var missing []string
	for _, t := range projector.HandledTypes(registry, p) {
		if !slices.Contains(f.types, t) && !slices.Contains(missing, t) {
			missing = append(missing, t)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("handles event type %q but reads only %s: its handler would never be called; add it to EventTypes", missing[0], f)
	}
	// All of them at once: a registry with upcasters names a type under
	// each of its older names, and one a run would be a long way to learn
	// them.
	return fmt.Errorf("handles event types %q but reads only %s: their handlers would never be called; add them to EventTypes", missing, f)
}

// matches reports whether the filter reads an event of stream and
// eventType, as the server's filter would (a stream regex is evaluated with
// Go's RE2 here, with .NET's on a node: keep to the syntax both share). The
// lag figures count only such events.
func (f Filter) matches(stream, eventType string) bool {
	switch f.kind {
	case byPrefix:
		return slices.ContainsFunc(f.withMetadata(), func(p string) bool { return strings.HasPrefix(stream, p) })
	case byRegex:
		re, err := regexp.Compile(f.regex)
		return err == nil && re.MatchString(stream)
	case byTypes:
		return slices.Contains(f.types, eventType)
	}
	return false
}

// withMetadata is the filter's stream prefixes and those of its streams'
// metadata streams ("$$loan/" for "loan/"), where a node records a soft
// delete: the engine applies the projection's deletion policy on it.
func (f Filter) withMetadata() []string {
	if len(f.prefixes) == 0 {
		return nil
	}
	out := slices.Clone(f.prefixes)
	for _, p := range f.prefixes {
		out = append(out, "$$"+p)
	}
	return out
}

// options are the subscription settings of the filter.
func (f Filter) options() subscription.AllOptions {
	o := subscription.AllOptions{StreamPrefixes: f.withMetadata(), StreamRegex: f.regex}
	if f.kind == byTypes {
		quoted := make([]string, len(f.types))
		for i, t := range f.types {
			quoted[i] = regexp.QuoteMeta(t)
		}
		o.EventTypeRegex = "^(?:" + strings.Join(quoted, "|") + ")$"
	}
	return o
}
