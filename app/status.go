package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// projectionStatus is one line of "status".
type projectionStatus struct {
	Projection string `json:"projection"`
	// Checkpoint is the stored position; nil before the first store.
	Checkpoint *uint64   `json:"checkpoint"`
	Updated    time.Time `json:"updatedAt,omitzero"`
	// Head is the position of the last event in $all; nil without --esdb.
	Head *uint64 `json:"head,omitempty"`
	// Behind is how many events of $all follow the checkpoint, counted up to
	// 10000 (BehindAtLeast is then true); nil without --esdb.
	Behind        *int `json:"behind,omitempty"`
	BehindAtLeast bool `json:"behindAtLeast,omitempty"`
	// PastHead: the checkpoint is past the head of $all, so it is not a
	// position of this event store (another one's, or one reset since):
	// run refuses it.
	PastHead bool `json:"checkpointPastHead,omitempty"`
	// Foreign says why the checkpoint is not a position of this event
	// store (past its head, another event at its position, or taken in
	// another log): run refuses it.
	Foreign string `json:"foreignCheckpoint,omitempty"`
	// Collection is the collection readers use; Rebuilding, one a rebuild
	// in progress fills, with its checkpoint, and the error it stopped with
	// (a rebuild that stopped and has not stored a checkpoint since).
	Collection        string  `json:"collection"`
	Rebuilding        string  `json:"rebuilding,omitempty"`
	RebuildCheckpoint *uint64 `json:"rebuildCheckpoint,omitempty"`
	RebuildError      string  `json:"rebuildError,omitempty"`
	// RebuildBy is the processes that run the rebuild (its lease, or its
	// segments'); none: it was interrupted or stopped, and rebuild NAME
	// resumes it.
	RebuildBy []string `json:"rebuildBy,omitempty"`
	// RebuildStarting: no process holds the rebuild's leases, but one
	// began it, or held one, less than a lease period ago (--lease): its
	// segments are about to be taken, or handed over. Not interrupted yet.
	RebuildStarting bool `json:"rebuildStarting,omitempty"`
	// Group and Parked describe a persistent subscription group (--group);
	// NoGroup names the group the projection would run with when the
	// server has none of that name (run --group creates it).
	Group   string `json:"group,omitempty"`
	Parked  *int64 `json:"parked,omitempty"`
	NoGroup string `json:"noGroup,omitempty"`
	// FedByGroups are the persistent subscription groups that fed the
	// projection in this database (run --group records them): without
	// --group, status has no position of theirs to show.
	FedByGroups []string `json:"fedByGroups,omitempty"`
	// ParkedHere counts the events parked in projector_parked (--on-failure
	// park) for the collection readers use and not replayed yet (held ones
	// are in Held).
	ParkedHere int `json:"parkedEvents"`
	// Held is the documents the hold policy holds (--on-failure hold), with
	// how many events each holds (the one that failed and those behind it).
	Held map[string]int `json:"heldDocuments,omitempty"`
	// LeaseHolder is the process that runs the projection (its lease, see
	// run --lease), until LeaseUntil; empty when none holds it.
	LeaseHolder string    `json:"leaseHolder,omitempty"`
	LeaseUntil  time.Time `json:"leaseUntil,omitzero"`
	// Segments is each segment of a projection run in segments (run
	// --segments), whose checkpoint, the lowest of theirs, is Checkpoint.
	Segments    []segmentStatus `json:"segments,omitempty"`
	LastError   string          `json:"lastError,omitempty"`
	LastErrorAt time.Time       `json:"lastErrorAt,omitzero"`
	// UnknownTypes counts the events of types nobody registered that the
	// projectors writing the collection passed over, by type, summed over
	// their runs (approximate: see mongostore's AddUnknownTypes).
	UnknownTypes map[string]uint64 `json:"unknownTypes,omitempty"`
	// RegisteredNow is those of UnknownTypes that this build registers
	// and the projection handles: the documents that met their events
	// before miss them until a rebuild. Unregistered: those it does not
	// register either.
	RegisteredNow []string `json:"registeredNow,omitempty"`
	Unregistered  []string `json:"-"`
}

// statusConfig is the command line of status.
type statusConfig struct {
	servers
	projections, group string
	asJSON, showParked bool
	lease              time.Duration
	// unreached is why the event store given with --esdb did not answer:
	// the store's side is shown all the same, without the head.
	unreached error
	registry  *projector.Registry // this build's
}

func (x *cli) runStatus(ctx context.Context, inv Invocation) error {
	c := statusConfig{registry: x.cat.registry}
	fs := inv.FlagSet("[flags]  (flags also as " + inv.EnvPrefix + "<FLAG>)")
	c.register(fs, x, "EventStoreDB or KurrentDB connection string (esdb:// or kurrentdb://), for the head and the lag (optional)")
	fs.StringVar(&c.projections, "projections", "", "comma-separated projections (default: all)")
	fs.StringVar(&c.group, "group", "", "the persistent subscription group the projector runs with --group, for its parked events")
	fs.BoolVar(&c.asJSON, "json", false, "print JSON instead of a table")
	fs.DurationVar(&c.lease, "lease", defaultLease, "the lease the processes run with (run and rebuild --lease): a rebuild no process runs "+
		"is said interrupted once it began, or its last lease expired, longer ago than this (before, its segments are being taken or handed over)")
	fs.BoolVar(&c.showParked, "parked", false, "list the parked events (projection, stream@revision, type, when, attempts, error)")
	if err := inv.Parse(fs); err != nil {
		return err
	}
	selected, err := x.cat.selected(c.projections)
	if err != nil {
		return usageError("%v", err)
	}
	if err := c.servers.check(inv, false, x.Embedded != nil); err != nil {
		return err
	}
	if c.showParked && c.group != "" && c.esdb == "" {
		return usageError("--parked with --group needs --esdb: it reads how many events each group parked on the server")
	}
	var client eventStore
	if c.esdb != "" {
		client, err = dial(ctx, c.servers, nil)
		switch {
		case err != nil && c.group != "":
			return err
		case err != nil:
			// What the store says matters most while the event store is
			// down: it is shown, and status exits 1 after it.
			c.unreached, client = err, nil
			fmt.Fprintln(inv.Stderr, "(the event store did not answer, as said last: the head and the events behind are not known: ?)")
		default:
			defer client.Close()
		}
	}
	store, err := x.openStoreToRead(ctx, c.servers, inv.Stderr)
	if err != nil {
		return err
	}
	defer store.Close()
	if c.showParked {
		err = c.printParked(ctx, inv, store.Store, client, selected)
	} else {
		err = c.print(ctx, inv, store.Store, client, selected)
	}
	return cmp.Or(err, c.unreached)
}

// printParked prints the parked events of the projections (--parked): the
// store's, and, with --group, how many each group parked on the server (a
// group's consumers park and hold in the store as a run does, and leave in
// the group the events that kept failing). With --json and
// --group, the counts only: the group's, and the store's.
func (c *statusConfig) printParked(ctx context.Context, inv Invocation, store *mongostore.Store, client eventStore, selected []Projection) error {
	switch {
	case c.group != "" && c.asJSON:
		return c.printGroupParked(ctx, inv, store, client, selected)
	case c.asJSON:
		return printParkedJSON(ctx, inv.Stdout, store, selected)
	}
	if err := printParked(ctx, inv.Stdout, inv.Stderr, store, selected); err != nil || c.group == "" {
		return err
	}
	fmt.Fprintln(inv.Stdout)
	return c.printGroupParked(ctx, inv, store, client, selected)
}

// print prints the status of each projection, as a table or as JSON, and
// returns an error when one is not running.
func (c *statusConfig) print(ctx context.Context, inv Invocation, store *mongostore.Store, client eventStore, selected []Projection) error {
	lines, err := c.statuses(ctx, store, client, selected)
	if err != nil {
		return err
	}
	if noneStarted(lines) && c.group == "" {
		which := "no projection has"
		if c.projections != "" {
			which = "none of these projections has"
		}
		fmt.Fprintf(inv.Stderr, "(%s a checkpoint in database %q: not started yet, or the projector runs with another --database%s)\n",
			which, c.database, elsewhere(ctx, store, c.database))
	}
	c.noteGroups(inv.Stderr, lines)
	if c.asJSON {
		enc := json.NewEncoder(inv.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(lines); err != nil {
			return err
		}
		return cmp.Or(c.noGroups(groupsMissing(lines)), notRunning(lines))
	}
	if client == nil && c.unreached == nil {
		fmt.Fprintf(inv.Stderr, "(without --esdb the head and the events behind are not known: ?)\n")
	}
	for _, s := range lines {
		switch {
		case s.PastHead:
			fmt.Fprintf(inv.Stderr, "projection %s: its checkpoint %d is past the head of $all, %d: it is not a position of this event store "+
				"(another one's, or one reset since), and run refuses it; to rebuild it: %s rebuild %[1]s\n", s.Projection, *s.Checkpoint, *s.Head, inv.Name)
		case s.Foreign != "":
			fmt.Fprintf(inv.Stderr, "projection %s: %s; run refuses it; to rebuild it: %s rebuild %[1]s\n", s.Projection, s.Foreign, inv.Name)
		}
	}
	if err := printStatus(inv.Stdout, lines, inv.Name); err != nil {
		return err
	}
	if err := c.noGroups(groupsMissing(lines)); err != nil {
		return err
	}
	for _, s := range lines {
		if s.NoGroup != "" {
			fmt.Fprintf(inv.Stderr, "(projection %s has no persistent subscription group %s on the server: it has not run with --group %s yet)\n", s.Projection, s.NoGroup, c.group)
		}
	}
	return notRunning(lines)
}

// elsewhere names the other databases of store's server in which a
// projector stored checkpoints (at most the first 100 databases looked
// at), for the note of a status that found none in database: a mistyped
// --database shows the one meant. "" when there is none, or the server
// does not say.
func elsewhere(ctx context.Context, store *mongostore.Store, database string) string {
	client := store.Database().Client()
	names, err := client.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		return ""
	}
	var found []string
	for i, name := range names {
		if i == 100 {
			break
		}
		if name == database || name == "admin" || name == "local" || name == "config" {
			continue
		}
		if cps, err := mongostore.New(client.Database(name), mongostore.WithDocumentCache(0)).Checkpoints(ctx); err == nil && len(cps) > 0 {
			found = append(found, strconv.Quote(name))
		}
	}
	if len(found) == 0 {
		return ""
	}
	return "; databases with projector checkpoints on this server: " + strings.Join(found, ", ")
}

// noGroups is an error when, with --group, none of the projections asked
// for has its group on the server: the group is likely misspelled (or the
// one projection asked for has not run with it yet). One that lacks it
// while others have it has not run with --group yet: it counts as not
// started, which the exit status takes for running.
// missing holds, for each projection, the name of its group when the
// server has none, else "".
func (c *statusConfig) noGroups(missing []string) error {
	if c.group == "" || len(missing) == 0 || slices.Contains(missing, "") {
		return nil
	}
	return fmt.Errorf("no persistent subscription group %s on the server: run --group %s creates one per projection, named %s",
		missing[0], c.group, groupName(c.group, "<projection>"))
}

// groupsMissing is, for noGroups, each line's NoGroup.
func groupsMissing(lines []projectionStatus) []string {
	missing := make([]string, len(lines))
	for i, s := range lines {
		missing[i] = s.NoGroup
	}
	return missing
}

// exitNotRunning is the exit status of status when a projection has
// stopped or keeps failing: it has a last error (its subscription stopped
// with one, and has not stored a checkpoint since), its checkpoint is past
// the head of $all (run refuses to start it), or its rebuild stopped or
// was interrupted (no process runs it).
const exitNotRunning = 3

// notRunning is nil when every projection of lines is running as far as
// the store tells, and otherwise an error naming those that are not, with
// the exit status exitNotRunning.
func notRunning(lines []projectionStatus) error {
	var names []string
	for _, s := range lines {
		switch {
		case s.PastHead:
			names = append(names, s.Projection+" (checkpoint past the head)")
		case s.Foreign != "":
			names = append(names, s.Projection+" ("+s.Foreign+")")
		case s.LastError != "":
			line, _, _ := strings.Cut(s.LastError, "\n")
			names = append(names, s.Projection+" ("+line+")")
		case s.RebuildError != "":
			line, _, _ := strings.Cut(s.RebuildError, "\n")
			names = append(names, s.Projection+" (its rebuild into "+s.Rebuilding+" stopped: "+line+")")
		case s.Rebuilding != "" && len(s.RebuildBy) == 0 && !s.RebuildStarting:
			// Killed, or its process lost: its switch waits for a
			// rebuild NAME, as a stopped one's does.
			names = append(names, s.Projection+" (its rebuild into "+s.Rebuilding+" was interrupted: no process runs it; rebuild resumes it)")
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &exitError{code: exitNotRunning, err: fmt.Errorf("%d of %d projections stopped or failing: %s", len(names), len(lines), strings.Join(names, "; "))}
}

// noneStarted reports whether no projection of lines has a checkpoint.
func noneStarted(lines []projectionStatus) bool {
	for _, s := range lines {
		if s.Checkpoint != nil || len(s.FedByGroups) > 0 {
			return false
		}
	}
	return len(lines) > 0
}

// noteGroups says, without --group, which projections persistent
// subscription groups feed: they have no checkpoint, and what the groups
// have delivered is the server's to say.
func (c *statusConfig) noteGroups(stderr io.Writer, lines []projectionStatus) {
	if c.group != "" {
		return
	}
	for _, s := range lines {
		if s.Checkpoint != nil || len(s.FedByGroups) == 0 {
			continue
		}
		g := s.FedByGroups[len(s.FedByGroups)-1]
		fmt.Fprintf(stderr, "(projection %s ran with --group: persistent subscription group %s feeds it, whose position is the server's, not a checkpoint; "+
			"status --group %s shows it)\n", s.Projection, strings.Join(s.FedByGroups, ", "), strings.TrimSuffix(g, "-"+s.Projection))
	}
}

// statuses is where each projection stands: in the store, and against the
// head of $all when client is set.
func (c *statusConfig) statuses(ctx context.Context, store *mongostore.Store, client eventStore, selected []Projection) ([]projectionStatus, error) {
	stored, err := store.Checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	leases, err := store.Leases(ctx)
	if err != nil {
		return nil, err
	}
	var end *uint64
	if client != nil {
		hctx, cancel := context.WithTimeout(ctx, c.timeout)
		pos, err := client.Head(hctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("reading the head of $all: %w", err)
		}
		end = &pos
	}
	lines := make([]projectionStatus, 0, len(selected))
	for _, p := range selected {
		st, err := c.status(ctx, store, stored, p)
		if err != nil {
			return nil, err
		}
		if l := leases[st.Projection]; l.Held(time.Now()) {
			st.LeaseHolder, st.LeaseUntil = l.Holder, l.Expires
		}
		if st.Rebuilding != "" {
			now := time.Now()
			st.RebuildBy = rebuildHolders(leases, st.Projection, st.Rebuilding, now)
			if len(st.RebuildBy) == 0 && st.RebuildError == "" && now.Sub(rebuildQuietSince(leases, st.Projection, st.Rebuilding)) < c.lease {
				// Only a rebuild in segments has a moment with none held
				// (before its processes take them, or hand them over); one
				// in one process takes its lease before it begins.
				n, err := segment.Count(ctx, store.Database(), st.Rebuilding)
				if err != nil {
					return nil, err
				}
				st.RebuildStarting = n > 1
			}
		}
		cp, err := c.segmentsOf(ctx, store, client, end, leases, stored, p, &st)
		if err != nil {
			return nil, err
		}
		if end != nil {
			if err := c.againstHead(ctx, client, *end, cp, p.Reads, &st); err != nil {
				return nil, err
			}
		}
		lines = append(lines, st)
	}
	return lines, nil
}

// status is where projection p stands in the store.
func (c *statusConfig) status(ctx context.Context, store *mongostore.Store, stored map[string]mongostore.CheckpointStatus, p Projection) (projectionStatus, error) {
	name := p.Definition.Name()
	st := projectionStatus{Projection: name}
	colls, err := store.CollectionsOf(ctx, name)
	if err != nil {
		return st, err
	}
	st.Collection, st.FedByGroups = colls.Active, colls.Groups
	if st.Collection == "" {
		st.Collection = p.Definition.Collection()
	}
	if colls.Building != "" {
		st.Rebuilding = colls.Building
		if st.RebuildCheckpoint, st.RebuildError, err = rebuildCheckpoint(ctx, store, stored, colls.Building); err != nil {
			return st, err
		}
	}
	cp := stored[st.Collection]
	if cp.Checkpoint != nil {
		st.Checkpoint, st.Updated = &cp.Checkpoint.Position, cp.Updated
	}
	if stoppedWith(cp) != "" {
		st.LastError, st.LastErrorAt = cp.LastError, cp.LastErrorAt
	}
	st.UnknownTypes = cp.UnknownTypes
	var handled []string
	if c.registry != nil && len(st.UnknownTypes) > 0 {
		handled = projector.HandledTypes(c.registry, p.Definition)
	}
	for _, t := range slices.Sorted(maps.Keys(st.UnknownTypes)) {
		switch {
		case c.registry == nil || !c.registry.Has(t):
			st.Unregistered = append(st.Unregistered, t)
		case slices.Contains(handled, t):
			st.RegisteredNow = append(st.RegisteredNow, t)
		}
		// Registered now with no handler here (an upcaster drops it,
		// another projection's): passed over all the same.
	}
	parked, err := store.Parked(ctx, name)
	if err != nil {
		return st, err
	}
	for _, pe := range parked {
		// The build readers use: another build's records are its own.
		if !pe.Held && (pe.Collection == "" || pe.Collection == st.Collection) {
			st.ParkedHere++
		}
	}
	if st.Held, err = store.Held(ctx, name, st.Collection); err != nil {
		return st, err
	}
	return st, nil
}

// stoppedWith is the error a runner's record says it stopped with, unless
// it has stored a checkpoint since (it runs again, and clears the error
// once it has caught up); "" when it has none.
func stoppedWith(cs mongostore.CheckpointStatus) string {
	if cs.LastError == "" || cs.Updated.After(cs.LastErrorAt) {
		return ""
	}
	return cs.LastError
}

// againstHead fills in the head of $all, the events behind the checkpoint,
// and a group's parked events; each read is bounded by the connect timeout.
func (c *statusConfig) againstHead(ctx context.Context, client eventStore, end uint64, cp mongostore.CheckpointStatus, reads Filter, st *projectionStatus) error {
	st.Head = &end
	if c.group != "" {
		// The group's position is the server's, not a checkpoint: what it
		// has not delivered yet is not counted here.
		return c.againstGroup(ctx, client, st)
	}
	if cp.Checkpoint == nil && len(st.FedByGroups) > 0 {
		return nil // fed by a group: not behind from the start of $all
	}
	behind, more := 0, false
	var err error
	lctx, cancel := context.WithTimeout(ctx, c.timeout)
	switch {
	case cp.Checkpoint == nil:
		behind, more, err = countAfter(lctx, client, nil, 0, reads)
	case cp.Checkpoint.Position <= end:
		// At end's commit position, it may be inside the last append.
		behind, more, err = countAfter(lctx, client, &cp.Checkpoint.Position, cp.Checkpoint.Prepare, reads)
	case cp.Checkpoint.Position > end:
		st.PastHead = true
	}
	cancel()
	if err != nil {
		return fmt.Errorf("counting the events after %s's checkpoint: %w", st.Projection, err)
	}
	st.Behind, st.BehindAtLeast = &behind, more
	if cp.Checkpoint != nil {
		return c.checkAnchor(ctx, client, *cp.Checkpoint, st)
	}
	return nil
}

// checkAnchor says in st.Foreign why checkpoint cp is not a position of
// this event store, as run finds when it starts (another log, another
// event at its position, past the head).
func (c *statusConfig) checkAnchor(ctx context.Context, client eventStore, cp projector.Checkpoint, st *projectionStatus) error {
	src, err := client.all(neutral.AllOptions{})
	if err != nil {
		return err
	}
	anchored, ok := src.(projector.AnchoredSource)
	if !ok {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch err := anchored.Check(actx, cp); {
	case errors.Is(err, projector.ErrForeignCheckpoint):
		st.Foreign = err.Error()
	case err != nil:
		return fmt.Errorf("checking %s's checkpoint against the event store: %w", st.Projection, err)
	}
	return nil
}

// againstGroup fills in the name of st's persistent subscription group, as
// the server gives it, and how many events it has parked; or, when the
// server has no such group (the projection never ran with --group),
// st.NoGroup, for the other projections' lines still to be printed.
func (c *statusConfig) againstGroup(ctx context.Context, client eventStore, st *projectionStatus) error {
	group := groupName(c.group, st.Projection)
	gctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	g, err := client.groupInfo(gctx, group)
	if errors.Is(err, errNoGroup) {
		st.NoGroup = group
		return nil
	}
	if err != nil {
		return fmt.Errorf("group %s: %w", group, err)
	}
	st.Group, st.Parked = g.Name, &g.Parked
	return nil
}

// firstLine is the first line of an error, which keeps a table's lines one
// a line (a panic's error holds its stack after it); where says where the
// rest is.
func firstLine(s, where string) string {
	first, rest, more := strings.Cut(strings.TrimRight(s, "\n"), "\n")
	if !more {
		return first
	}
	return fmt.Sprintf("%s [and %d more lines, in %s]", first, strings.Count(rest, "\n")+1, where)
}

// errAttrs are a log record's attributes with err: its first line, and the
// rest (a panic's stack) apart, as its frames (stack.0, stack.1, ...: see
// stackFrames) so that a log line reads them one by one.
func errAttrs(err error, attrs ...any) []any {
	first, rest, more := strings.Cut(err.Error(), "\n")
	if !more {
		return append(attrs, "err", err)
	}
	frames := stackFrames(rest)
	if len(frames) == 0 {
		return append(attrs, "err", first, "detail", rest)
	}
	group := make([]any, len(frames))
	for i, f := range frames {
		group[i] = slog.String(strconv.Itoa(i), f)
	}
	return append(attrs, "err", first, slog.Group("stack", group...))
}

// maxFrames bounds the frames errAttrs logs of a stack.
const maxFrames = 40

// stackFrames are the frames of a Go stack trace (runtime/debug.Stack's
// form) as "function file:line", from where it panicked (the frames of the
// recovery and of the panic itself left out); nil when stack is not one.
func stackFrames(stack string) []string {
	lines := strings.Split(strings.TrimSpace(stack), "\n")
	var frames []string
	for i := 0; i+1 < len(lines); i++ {
		fn, at := lines[i], lines[i+1]
		if !strings.HasPrefix(at, "\t") || strings.HasPrefix(fn, "\t") {
			continue
		}
		i++
		if strings.HasPrefix(fn, "panic(") {
			frames = frames[:0] // what follows is the panicking code
			continue
		}
		at, _, _ = strings.Cut(strings.TrimSpace(at), " +0x")
		if j := strings.LastIndex(fn, "("); j > 0 {
			fn = fn[:j] // its arguments: pkg.f(...), pkg.(*T).m(0x1)
		}
		frames = append(frames, fn+" "+at)
	}
	if n := len(frames) - maxFrames; n > 0 {
		frames = append(frames[:maxFrames], fmt.Sprintf("... %d more", n))
	}
	return frames
}

// parkedJSON is one parked or held event in status --parked --json.
type parkedJSON struct {
	Projection string          `json:"projection"`
	Collection string          `json:"collection,omitempty"`
	Document   string          `json:"document,omitempty"`
	Held       bool            `json:"held,omitempty"`
	Stream     string          `json:"stream"`
	Revision   uint64          `json:"revision"`
	Position   uint64          `json:"position"`
	EventID    string          `json:"eventId"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data,omitempty"` // when it is JSON
	ParkedAt   time.Time       `json:"parkedAt"`
	Attempts   int             `json:"attempts"`
	Error      string          `json:"error"` // whole: a panic's stack too
}

// printParkedJSON lists the parked events of the projections as one JSON
// array (empty when there are none).
func printParkedJSON(ctx context.Context, w io.Writer, store *mongostore.Store, selected []Projection) error {
	out := []parkedJSON{}
	for _, p := range selected {
		parked, err := parkedInOrder(ctx, store, p)
		if err != nil {
			return err
		}
		for _, pe := range parked {
			j := parkedJSON{Projection: pe.Projection, Collection: pe.Collection, Document: pe.Document, Held: pe.Held, Stream: pe.StreamID,
				Revision: pe.StreamRevision, Position: pe.Position, EventID: pe.ID, Type: pe.Type, ParkedAt: pe.ParkedAt, Attempts: pe.Attempts, Error: pe.Error}
			if json.Valid(pe.Data) {
				j.Data = pe.Data
			}
			out = append(out, j)
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// groupParkedJSON is how many events a projection's group has parked, and
// how many its consumers parked or held in the store.
type groupParkedJSON struct {
	Projection string `json:"projection"`
	Group      string `json:"group"`
	Parked     int64  `json:"parked"`
	InStore    int    `json:"parkedInStore"`
	// Missing: the server has no such group (never run with --group).
	Missing bool `json:"missing,omitempty"`
}

// printGroupParked says, for --parked with --group, how many events each
// projection's group has parked on the server, and how to have them
// delivered again.
func (c *statusConfig) printGroupParked(ctx context.Context, inv Invocation, store *mongostore.Store, client eventStore, selected []Projection) error {
	out := []groupParkedJSON{}
	var missing []string
	for _, p := range selected {
		st := projectionStatus{Projection: p.Definition.Name()}
		if err := c.againstGroup(ctx, client, &st); err != nil {
			return err
		}
		stored, err := store.Parked(ctx, st.Projection)
		if err != nil {
			return err
		}
		g := groupParkedJSON{Projection: st.Projection, Group: st.Group, InStore: len(stored)}
		switch {
		case st.NoGroup != "":
			// Never run with --group: nothing parked on the server.
			g.Group, g.Missing = st.NoGroup, true
		default:
			g.Parked = *st.Parked
		}
		out, missing = append(out, g), append(missing, st.NoGroup)
	}
	none := c.noGroups(missing) // likely misspelled, as status says
	if c.asJSON {
		enc := json.NewEncoder(inv.Stdout)
		enc.SetIndent("", "  ")
		return cmp.Or(enc.Encode(out), none)
	}
	tw := tabwriter.NewWriter(inv.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECTION\tGROUP\tPARKED ON THE SERVER\tPARKED OR HELD IN THE STORE")
	for _, g := range out {
		group := g.Group
		if g.Missing {
			group += " (none on the server)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", g.Projection, group, g.Parked, g.InStore)
	}
	fmt.Fprintf(inv.Stderr, "(a group's parked events are in its parked stream on the server; replay-parked NAME --group %s delivers them again)\n", c.group)
	return cmp.Or(tw.Flush(), none)
}

// printParked lists the parked events of the projections, one a line under
// a header, in aligned columns, in the order of parkedInOrder: projection,
// stream@revision, type, when, attempts, and the error after the build
// collection it was parked in (and the document: held, or that missed it); with none, it says
// so on stderr.
func printParked(ctx context.Context, w, stderr io.Writer, store *mongostore.Store, selected []Projection) error {
	n := 0
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, sel := range selected {
		parked, err := parkedInOrder(ctx, store, sel)
		if err != nil {
			tw.Flush()
			return err
		}
		// The collection readers use: the projection's own, or the one a
		// rebuild switched them to.
		live, err := store.ActiveCollection(ctx, sel.Definition.Name(), sel.Definition.Collection())
		if err != nil {
			tw.Flush()
			return err
		}
		behind := heldBehind{w: tw}
		for _, p := range parked {
			if behind.add(p) {
				continue
			}
			held := ""
			switch {
			case p.Held:
				held = "held " + p.Document + ": "
			case p.Document != "":
				// The document that misses the event (a summary's, say):
				// it moved past it.
				held = p.Document + ": "
			}
			// The build collection, when the event was parked by a
			// rebuild: the live one goes without saying.
			if p.Collection != "" && p.Collection != live {
				held = "[" + p.Collection + "] " + held
			}
			if n == 0 {
				fmt.Fprintln(tw, "PROJECTION\tEVENT\tTYPE\tPARKED AT\tATTEMPTS\t[BUILD] [HELD] DOCUMENT: ERROR")
			}
			n++
			fmt.Fprintf(tw, "%s\t%s@%d\t%s\t%s\t%s\t%s%s\n", p.Projection, p.StreamID, p.StreamRevision, p.Type, optT(p.ParkedAt), plural(p.Attempts, "attempt"), held, strings.ReplaceAll(firstLine(p.Error, "its record in "+mongostore.ParkedCollection), "\t", " "))
		}
		behind.flush()
	}
	if n == 0 {
		// Said on stderr: stdout, the rows, stays empty for a script.
		fmt.Fprintln(stderr, "no parked or held events")
	}
	return tw.Flush()
}

// heldBehind counts, for the listing of parked events, the events held
// behind the one that holds a document (which is listed), and lists them
// as one row: a summary held for long holds thousands (--json lists each).
type heldBehind struct {
	w               io.Writer
	doc, collection string
	projection      string
	n               int
	from, to        time.Time
}

// add counts p, the next record in order, when it is held behind the
// event listed before it in its document, and reports whether it did;
// another document's record first lists the count of the one before.
func (h *heldBehind) add(p projector.ParkedEvent) bool {
	if p.Held && h.doc != "" && p.Document == h.doc && p.Collection == h.collection && strings.HasPrefix(p.Error, projector.ErrHeld.Error()) {
		if h.n == 0 {
			h.from = p.ParkedAt
		}
		h.n, h.to = h.n+1, p.ParkedAt
		return true
	}
	h.flush()
	if p.Held {
		h.doc, h.collection, h.projection = p.Document, p.Collection, p.Projection
	}
	return false
}

// flush lists the count of the held events counted since the last.
func (h *heldBehind) flush() {
	if h.n > 0 {
		fmt.Fprintf(h.w, "%s\t%s\t-\t%s to %s\t-\theld %s: held behind the event above, in order (status --parked --json lists each)\n",
			h.projection, plural(h.n, "more event"), optT(h.from), optT(h.to), h.doc)
	}
	h.doc, h.n = "", 0
}

// parkedInOrder is projection p's parked events as status lists them: the
// parked ones in the order they were parked, then the held ones by
// document and, within one, in the order they will be replayed.
func parkedInOrder(ctx context.Context, store *mongostore.Store, p Projection) ([]projector.ParkedEvent, error) {
	parked, err := store.Parked(ctx, p.Definition.Name())
	if err != nil {
		return nil, err
	}
	orderParked(parked)
	return parked, nil
}

// orderParked sorts parked (in the order they were parked) as status lists
// them: see parkedInOrder.
func orderParked(parked []projector.ParkedEvent) {
	slices.SortStableFunc(parked, func(a, b projector.ParkedEvent) int {
		switch {
		case a.Held != b.Held:
			if a.Held {
				return 1
			}
			return -1
		case !a.Held:
			return 0
		}
		// A replay takes a held document's events by revision (the revision
		// gate) or by position (a document fed by several streams): by
		// position, then revision, is both (positions unknown: 0).
		return cmp.Or(cmp.Compare(a.Collection, b.Collection), cmp.Compare(a.Document, b.Document),
			cmp.Compare(a.Position, b.Position), cmp.Compare(a.StreamRevision, b.StreamRevision))
	})
}

// plural is n and the noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// rebuildHolders returns the processes that hold, at now, the lease of the
// rebuild of projection into building in one process, or those of its
// segments.
func rebuildHolders(leases map[string]mongostore.Lease, projection, building string, now time.Time) []string {
	var holders []string
	for name, l := range leases {
		if !l.Held(now) || slices.Contains(holders, l.Holder) {
			continue
		}
		if isRebuildLease(name, projection, building) {
			holders = append(holders, l.Holder)
		}
	}
	slices.Sort(holders)
	return holders
}

// isRebuildLease reports whether the lease called name is one of the rebuild
// of projection into building: its lease, or one of its segments'.
func isRebuildLease(name, projection, building string) bool {
	return name == "rebuild "+projection || segment.IsLease(rebuildGroup(building), name)
}

// rebuildQuietSince returns when the rebuild of projection into building
// last had a process: the latest expiry of its leases not released, or when it began
// (the time in building's name, startRebuild's), whichever is later.
func rebuildQuietSince(leases map[string]mongostore.Lease, projection, building string) time.Time {
	var since time.Time
	if i := strings.LastIndex(building, "_r"); i >= 0 {
		if sec, err := strconv.ParseInt(building[i+2:], 10, 64); err == nil {
			since = time.Unix(sec, 0)
		}
	}
	for name, l := range leases {
		// A released lease (its holder let it go: stopped cleanly, not
		// killed) is no handover in progress.
		if isRebuildLease(name, projection, building) && l.Holder != "" && l.Expires.After(since) {
			since = l.Expires
		}
	}
	return since
}

// printStatus prints the lines as a table.
func printStatus(w io.Writer, lines []projectionStatus, bin string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECTION\tCOLLECTION\tCHECKPOINT\tSTORED AT\tHEAD\tBEHIND (EVENTS)\tPARKED\tHELD (EVENTS)\tGROUP (PARKED)\tREBUILDING\tRUN BY\tLAST ERROR")
	for _, s := range lines {
		rebuilding := "-"
		if s.Rebuilding != "" {
			rebuilding = fmt.Sprintf("%s at %s", s.Rebuilding, optU(s.RebuildCheckpoint, "start"))
			switch {
			case len(s.RebuildBy) > 0:
				rebuilding += ", run by " + strings.Join(s.RebuildBy, ", ")
			case s.RebuildError != "":
				rebuilding += ", stopped (below)"
			case s.RebuildStarting:
				rebuilding += ", no process holds it now: its segments are being taken or handed over"
			default:
				rebuilding += ", interrupted: no process runs it (rebuild resumes it)"
			}
		}
		group := "-"
		switch {
		case s.Group != "":
			group = fmt.Sprintf("%s (%s)", s.Group, optI(s.Parked))
		case s.NoGroup != "":
			group = s.NoGroup + " (none on the server)"
		}
		runBy := "-"
		switch {
		case s.LeaseHolder != "":
			runBy = fmt.Sprintf("%s until %s", s.LeaseHolder, optT(s.LeaseUntil))
		case len(s.Segments) > 0:
			runBy = fmt.Sprintf("%d segments (below)", len(s.Segments))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.Projection, s.Collection, optU(s.Checkpoint, "none"), optT(s.Updated),
			optU(s.Head, "?"), behindText(s), s.ParkedHere, heldText(s.Held), group, rebuilding, runBy, errText(s))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printSegments(w, lines); err != nil {
		return err
	}
	for _, s := range lines {
		if s.RebuildError != "" {
			fmt.Fprintf(w, "the rebuild of %s into %s stopped at %s: %s\n", s.Projection, s.Rebuilding, optU(s.RebuildCheckpoint, "the start"),
				firstLine(s.RebuildError, "--json"))
		}
	}
	for _, s := range lines {
		if len(s.UnknownTypes) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s met events of types nobody registered: %s\n", s.Projection, countsString(s.UnknownTypes))
		if len(s.RegisteredNow) > 0 {
			// Passed over, or failed under FailUnknownTypes and the policy
			// the projector ran with: status knows neither of them.
			fmt.Fprintf(w, "  this build registers %s now: documents that passed over those events miss them until %s rebuild %s; "+
				"those parked or held (under FailUnknownTypes) are applied by %[2]s replay-parked %[3]s (status --parked lists them)\n",
				strings.Join(s.RegisteredNow, ", "), bin, s.Projection)
		}
		if len(s.Unregistered) > 0 {
			fmt.Fprintf(w, "  %s: a rename or a new version without its upcaster? if %s is to handle them, once a build registers them, %s rebuild %s folds them in\n",
				strings.Join(s.Unregistered, ", "), s.Projection, bin, s.Projection)
		}
	}
	return nil
}

// heldText is the held documents, most held first: "2: c7 (3), c9 (1)".
func heldText(held map[string]int) string {
	if len(held) == 0 {
		return "0"
	}
	ids := slices.Collect(maps.Keys(held))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Or(cmp.Compare(held[b], held[a]), cmp.Compare(a, b)) })
	parts := make([]string, 0, min(len(ids), 5))
	for _, id := range ids[:min(len(ids), 5)] {
		parts = append(parts, fmt.Sprintf("%s (%d)", id, held[id]))
	}
	more := ""
	if len(ids) > 5 {
		more = fmt.Sprintf(", %d more", len(ids)-5)
	}
	return fmt.Sprintf("%d: %s%s", len(ids), strings.Join(parts, ", "), more)
}

func optU(v *uint64, none string) string {
	if v == nil {
		return none
	}
	return strconv.FormatUint(*v, 10)
}

func optI(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func optT(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func behindText(s projectionStatus) string {
	switch {
	case s.PastHead:
		return "past the head!"
	case s.Behind == nil:
		return "?"
	case s.BehindAtLeast:
		return fmt.Sprintf(">=%d", *s.Behind)
	}
	return strconv.Itoa(*s.Behind)
}

func errText(s projectionStatus) string {
	if s.LastError == "" {
		return "-"
	}
	return fmt.Sprintf("%s: %s", optT(s.LastErrorAt), firstLine(s.LastError, "--json"))
}
