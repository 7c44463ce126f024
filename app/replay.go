package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"

	"github.com/revgate/projector/projector"
)

// replayConfig is the command line of replay-parked.
type replayConfig struct {
	servers
	lease time.Duration
	group string
}

// replayFlags returns the flag set of replay-parked, which fills c, with its
// usage.
func (x *cli) replayFlags(c *replayConfig, inv Invocation) *flag.FlagSet {
	fs := inv.FlagSet("NAME [flags]  (flags also as " + inv.EnvPrefix + "<FLAG>)")
	c.register(fs, x, "EventStoreDB or KurrentDB connection string, esdb:// or kurrentdb://: the events' streams, as run reads them (needed for a projection that ties streams, and with --group)")
	fs.DurationVar(&c.lease, "lease", defaultLease, "the projection's lease, as run takes it: replay-parked holds it while it replays, and refuses while a running projector holds it (0: do not look)")
	fs.StringVar(&c.group, "group", "", "instead, ask EventStoreDB to deliver again the events parked in the projection's persistent subscription group (run --group of this name), for the running consumers to apply")
	fs.Usage = func() {
		fmt.Fprintf(inv.Stderr, `usage: %s replay-parked NAME [flags]

Applies the events parked for projection NAME (--on-failure park) with this
binary's projection, meant to run once its bug is fixed, to each document as
it is now. Replayed events are marked; those that fail again stay parked with
the new error (exit status 1).

The events held for a document (--on-failure hold) apply in order through
the gate, from the one that failed: all of them, and the document is free,
or none past the first that still fails, which stays held with its new error.
One the document has already (a replay cut short) counts as applied.

It takes the projection's lease (see run --lease), so it refuses while a
"%[1]s run" runs the projection, and a run waits while it replays: the
replay's write under the revision gate cannot be made conditional on the
events the gate applies meanwhile. It also refuses while processes of
"%[1]s run --segments" hold any of the projection's segments (they hold
the segments' leases, not the projection's); a segmented run that starts
during a replay stands by until it ends.

With --esdb, the engine reads the events' streams as run's does: a
projection that ties streams (TieStreams) needs it. Under the revision gate
(a document per stream), a document that events after the parked one have
changed since is then folded anew from its stream, the replayed event in
its place, exact whatever the read model; without --esdb the event applies
to the document as it is, after them, exact for steps that commute.

With --group, the events are those the persistent subscription group parked
(under run --group: after they kept failing); EventStoreDB delivers them
again to the consumers of the group, which apply them through the gate.

`, inv.Name)
		fs.PrintDefaults()
	}
	return fs
}

func (x *cli) runReplayParked(ctx context.Context, inv Invocation) error {
	var c replayConfig
	fs := x.replayFlags(&c, inv)
	name, err := inv.ParseNamed(fs)
	if err != nil {
		return err
	}
	p, err := x.checkReplay(&c, name, inv)
	if err != nil {
		return err
	}
	if c.group != "" {
		if err := replayGroup(ctx, c.servers, groupName(c.group, name), inv.Stdout); err != nil {
			return err
		}
		fmt.Fprintf(inv.Stderr, "(those are the events that kept failing, which the group parked; the ones the group's consumers parked under park are in the store: status --parked lists them, and replay-parked %s without --group applies them, the consumers standing down while it runs)\n", name)
		return nil
	}
	opened, err := x.openStore(ctx, c.servers, nil)
	if err != nil {
		return err
	}
	defer opened.Close()
	var client eventStore
	if c.esdb != "" {
		if client, err = dial(ctx, c.servers, nil); err != nil {
			return err
		}
		defer client.Close()
	}
	// The lease first: a group's consumers stand down while another
	// process holds it, so the replay waits for them to leave.
	leave := time.Duration(0)
	if c.lease > 0 {
		held, err := holdReplayLease(ctx, opened.Store, name, c.lease, opened.Embedded != nil, inv.Stderr)
		if err != nil {
			return err
		}
		defer held.release()
		leave = c.timeout
	} else if err := refuseSegmented(ctx, opened.Store, name); err != nil {
		return err // without a lease of its own, as with one
	}
	var flagMissing needsESDB
	if err := refuseBesideGroups(ctx, opened.Store, client, name, c.timeout, leave); errors.As(err, &flagMissing) {
		return usageError("%v", err) // as for a projection that ties streams
	} else if err != nil {
		return err
	}
	var streams projector.StreamHistory
	if client != nil {
		streams = client
	}
	return x.replayParked(ctx, p, opened.Store, streams, inv.Stdout, inv.Stderr)
}

// checkReplay returns the projection called name, once it has checked the
// command line, before any I/O.
func (x *cli) checkReplay(c *replayConfig, name string, inv Invocation) (Projection, error) {
	if name == "" {
		return Projection{}, usageError("replay-parked needs the NAME of a projection; known: %s", strings.Join(x.cat.names(), ", "))
	}
	p, ok := x.cat.get(name)
	if !ok {
		return Projection{}, usageError("%v", x.cat.unknown(name))
	}
	if err := checkLease(c.lease, "do not look"); err != nil {
		return Projection{}, err
	}
	if c.esdb == "" && c.group == "" {
		// The engine made without a store's I/O: only what it lacks counts.
		if _, err := x.replayEngine(p, p.Definition.Collection(), mongostore.New(nil), nil); err != nil {
			return Projection{}, usageError("%v", err)
		}
	}
	return p, c.servers.check(inv, c.group != "", x.Embedded != nil)
}

// holdReplayLease takes the lease of projection name (see run --lease) for
// a replay, or fails, naming the process that runs the projection. The
// lease of a process killed on the embedded server this process now runs
// on the same data dir (ownsData) is taken over at once, as run does.
func holdReplayLease(ctx context.Context, store *mongostore.Store, name string, ttl time.Duration, ownsData bool, stderr io.Writer) (*heldLease, error) {
	hold := func() (*heldLease, mongostore.Lease, error) {
		return holdLease(ctx, store, name, holderID("replay-parked"), ttl, slog.New(slog.DiscardHandler))
	}
	held, l, err := hold()
	if errors.Is(err, mongostore.ErrLeaseHeld) && takeOverGone(ctx, store, ownsData, l) {
		fmt.Fprintf(stderr, "took over the lease of %s from %s, a process that is gone\n", name, l.Holder)
		held, l, err = hold()
	}
	if errors.Is(err, mongostore.ErrLeaseHeld) && goneHolder(l.Holder) {
		// Killed, on this host: its lease cannot be taken over here (another
		// process may write through the same server), but it expires.
		return nil, fmt.Errorf("projection %s was run by %s, a process of this host that is gone (killed?): its lease runs until %s; "+
			"replay its parked events after that", name, l.Holder, l.Expires.Format(time.RFC3339))
	}
	if errors.Is(err, mongostore.ErrLeaseHeld) {
		return nil, fmt.Errorf("projection %s is run by %s (its lease runs until %s): stop it, then replay its parked events "+
			"(a process that stops lets its lease go as it ends; one killed on another host holds it until then)", name, l.Holder, l.Expires.Format(time.RFC3339))
	}
	if err != nil {
		return nil, err
	}
	if err := refuseSegmented(ctx, store, name); err != nil {
		held.release()
		return nil, err
	}
	return held, nil
}

// refuseSegmented fails while processes of run --segments run projection
// name: they hold its segments' leases, not the projection's.
func refuseSegmented(ctx context.Context, store *mongostore.Store, name string) error {
	leases, err := store.Leases(ctx, name)
	if err != nil {
		return err
	}
	holders := map[string]bool{}
	now := time.Now()
	for lease, l := range leases {
		if segment.IsLease(name, lease) && l.Held(now) {
			holders[l.Holder] = true
		}
	}
	if len(holders) == 0 {
		return nil
	}
	return fmt.Errorf("projection %s runs in segments, in %s: stop its processes, then replay its parked events",
		name, strings.Join(slices.Sorted(maps.Keys(holders)), ", "))
}

// replay is one replay of a projection's parked events: the engine that
// applies them, where it reports, and how many events still fail.
type replay struct {
	name   string
	store  *mongostore.Store
	eng    *projector.Engine
	stdout io.Writer
	// failed counts the events not applied: those that still fail (one a
	// held document, and the parked ones), and, of them, behind the events
	// still held behind one that fails.
	failed, behind int
	// applied counts the parked (not held) events applied, out of their
	// order; already, those the document had already, or the projection
	// no longer takes: marked replayed, with nothing applied.
	applied, already int
}

// replayParked replays the events parked for p into the collection readers
// use, the held documents first, reading their streams from streams (nil:
// none, for a projection that need not), and prints what became of them;
// the error says how many still fail.
func (x *cli) replayParked(ctx context.Context, p Projection, store *mongostore.Store, streams projector.StreamHistory, stdout, stderr io.Writer) error {
	name := p.Definition.Name()
	coll, err := store.ActiveCollection(ctx, name, p.Definition.Collection())
	if err != nil {
		return err
	}
	if err := claimVersion(ctx, store, p, coll, x.name()); err != nil {
		return err
	}
	// What the engine warns of (an event applied to a document as it is,
	// where it could not be folded anew) goes to stderr.
	eng, err := x.replayEngine(p, coll, store, streams, projector.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		return err
	}
	parked, err := store.Parked(ctx, name)
	if err != nil {
		return err
	}
	sets := sortParked(parked, coll)
	r := &replay{name: name, store: store, eng: eng, stdout: stdout}
	for _, doc := range sets.holding {
		if err := r.document(ctx, doc, sets.held[doc]); err != nil {
			return err
		}
	}
	for _, pe := range sets.plain {
		if err := r.event(ctx, pe); err != nil {
			return err
		}
	}
	if sets.others > 0 {
		fmt.Fprintf(stdout, "  left: %d events parked in another build of %s (a rebuild's collection, or the one it replaced)\n", sets.others, name)
	}
	fmt.Fprintf(stdout, "replayed %d of %d parked events of %s into %s%s\n", len(parked)-sets.others-r.failed, len(parked)-sets.others, name, coll, r.alreadyText())
	if r.applied > 0 {
		fmt.Fprintln(stdout, replayNote(p, streams != nil, x.name()))
	}
	err = stillFailing(r.failed, r.behind)
	if left := r.parkedSince(ctx, parked, coll); left != nil {
		if err == nil {
			return left
		}
		return fmt.Errorf("%w; and %w", err, left) // one line
	}
	return err
}

// parkedSince prints the events parked while the replay folded documents
// anew from their streams (ones that fail with this build and were not
// parked: skipped when they came, or applied by an older build), which it
// left out, and returns an error that counts them (nil: none). before is
// the records the replay began with.
func (r *replay) parkedSince(ctx context.Context, before []projector.ParkedEvent, coll string) error {
	after, err := r.store.Parked(ctx, r.name)
	if err != nil {
		return err
	}
	had := map[string]bool{}
	for _, pe := range before {
		had[pe.Record] = true
	}
	n := 0
	for _, pe := range after {
		if had[pe.Record] || pe.Collection != coll && pe.Collection != "" {
			continue
		}
		n++
		fmt.Fprintf(r.stdout, "  left out, now parked: %s@%d (%s): document %s, folded anew from its streams, has this event, which fails with this build "+
			"(it was skipped, or applied by another build, when it came): %v\n", pe.StreamID, pe.StreamRevision, pe.Type, pe.Document,
			firstLine(pe.Error, "its record in "+mongostore.ParkedCollection))
	}
	switch {
	case n == 0:
		return nil
	case n == 1:
		return errors.New("1 event of the documents folded anew fails with this build: it was left out, and is parked now")
	}
	return fmt.Errorf("%d events of the documents folded anew fail with this build: they were left out, and are parked now", n)
}

// replayNote says how exact the documents of p are once parked events were
// replayed into them, reading streams or not.
func replayNote(p Projection, streams bool, binary string) string {
	name := p.Definition.Name()
	switch {
	case p.Definition.Strategy() == projector.StreamRevision() && streams:
		return "note: each document was folded anew from its stream, the replayed events in their places: exact for any read model " +
			"(an event of it that still fails is left out and stays parked); where its stream no longer starts at revision 0 " +
			"(truncated, or deleted and written again) or the document is marked deleted, an event applied to it as it was, after the events since"
	case p.Definition.Strategy() == projector.StreamRevision():
		return fmt.Sprintf("note: a parked event applied to its document as it is now, after the events that came since it: exact for steps that commute "+
			"(counts, sums, sets); with --esdb, each document is folded anew from its stream instead, the event in its place, exact for any read model "+
			"(a status, a last value); or %s rebuild %s", binary, name)
	case p.Definition.Strategy() == projector.RevisionMap() && streams:
		return fmt.Sprintf("note: a document that had later events of a replayed event's stream was folded anew from its streams, "+
			"the event in its stream's order, exact for any read model the revision map keeps (an event of it that still fails is left out and stays parked); "+
			"one with nothing of the event's stream after it got the event applied as it is, which keeps every stream's order; where a stream no longer starts "+
			"at revision 0, an event's document cannot be told, or the document has too many streams (see projector's Engine.Replay), the event applied as it is, after the events since, "+
			"and a warning on stderr names it (\"replayed event applied to the document as it is\"): exact for steps that commute, else %s rebuild %s; "+
			"with no such warning, every replayed document is exact", binary, name)
	}
	return fmt.Sprintf("note: a parked event applies to its document as it is now, after the events that came since it: exact for steps that commute "+
		"(counts, sums, sets); a read model that depends on their order (a status, a last value) is made exact by %s rebuild %s "+
		"(and --on-failure hold keeps a document's events in order)", binary, name)
}

// replayEngine is the engine of a replay of p's parked events into
// collection coll, reading streams from streams (nil: none). Without one,
// a projection that needs one (it ties streams) is refused with what to
// give.
func (x *cli) replayEngine(p Projection, coll string, store *mongostore.Store, streams projector.StreamHistory, more ...projector.Option) (*projector.Engine, error) {
	defs := []projector.Definition{projector.Copy(p.Definition, coll)}
	opts := append([]projector.Option{projector.WithParker(store)}, more...)
	if streams != nil {
		opts = append(opts, projector.WithStreamReader(streams))
	}
	eng, err := projector.NewEngine(store, x.Registry, defs, opts...)
	if err != nil && streams == nil {
		if _, withStreams := projector.NewEngine(store, x.Registry, defs, append(opts, projector.WithStreamReader(noStreams{}))...); withStreams == nil {
			return nil, fmt.Errorf("replaying the events of %s reads their streams (it ties streams): give --esdb, the event store run reads", p.Definition.Name())
		}
	}
	return eng, err
}

// noStreams stands for an event store, to tell what an engine without one
// lacks.
type noStreams struct{}

func (noStreams) FirstRevision(context.Context, string) (uint64, error) {
	return 0, errors.New("no event store")
}

func (noStreams) ReadStream(context.Context, string, uint64, func(projector.Event) error) error {
	return errors.New("no event store")
}

// parkedSets are a projection's parked events as a replay into one
// collection takes them.
type parkedSets struct {
	plain   []projector.ParkedEvent            // parked, in the order the store lists them
	held    map[string][]projector.ParkedEvent // held, by document
	holding []string                           // the held documents, in the order of their first events
	others  int                                // parked in another build: they stay for that build
}

// sortParked sorts parked, a projection's parked events, for a replay into
// collection coll.
func sortParked(parked []projector.ParkedEvent, coll string) parkedSets {
	s := parkedSets{held: map[string][]projector.ParkedEvent{}}
	for _, pe := range parked {
		switch {
		case pe.Collection != "" && pe.Collection != coll:
			s.others++ // another build's: it stays for that build
		case !pe.Held:
			s.plain = append(s.plain, pe)
		case s.held[pe.Document] == nil:
			s.holding = append(s.holding, pe.Document)
			fallthrough
		default:
			s.held[pe.Document] = append(s.held[pe.Document], pe)
		}
	}
	return s
}

// document replays events, those held for document doc, in order through
// the gate: those it has already (a replay cut short) are duplicates, and
// are marked. The first that still fails stays held with its new error, and
// the events behind it with it.
func (r *replay) document(ctx context.Context, doc string, events []projector.ParkedEvent) error {
	rep := r.eng.ReplayHeld(ctx, r.name, events)
	for _, pe := range rep.Applied {
		if err := r.store.Replayed(ctx, pe, nil); err != nil {
			return err
		}
	}
	if len(rep.Left) == 0 {
		fmt.Fprintf(r.stdout, "  document %s: its %d held events applied; it is free\n", doc, len(rep.Applied))
		return nil
	}
	r.failed += len(rep.Left)
	r.behind += len(rep.Left) - 1
	first := rep.Left[0]
	fmt.Fprintf(r.stdout, "  still held: document %s at %s@%d (%s), %s held: %v\n", doc, first.StreamID, first.StreamRevision, first.Type, plural(len(rep.Left), "event"), firstLine(fmt.Sprint(rep.Err), "its record in "+mongostore.ParkedCollection))
	return r.store.Replayed(ctx, first, rep.Err)
}

// event replays parked event pe and marks it replayed: applied, already
// applied, or failing again with its new error.
func (r *replay) event(ctx context.Context, pe projector.ParkedEvent) error {
	res := r.eng.Replay(ctx, pe)
	var why error
	switch res.Outcome {
	case projector.Applied:
		r.applied++
	case projector.Duplicate:
		r.already++
		fmt.Fprintf(r.stdout, "  already applied, or nothing to apply: %s@%d (%s): an earlier replay wrote it, a rebuild folded it, or the projection no longer takes it\n", pe.StreamID, pe.StreamRevision, pe.Type)
	default:
		why = res.Err
		r.failed++
		fmt.Fprintf(r.stdout, "  still failing: %s@%d (%s): %v\n", pe.StreamID, pe.StreamRevision, pe.Type, firstLine(fmt.Sprint(res.Err), "its record in "+mongostore.ParkedCollection))
	}
	return r.store.Replayed(ctx, pe, why)
}

// alreadyText says, after the count of the events replayed, how many of
// them had nothing to apply ("" when none).
func (r *replay) alreadyText() string {
	if r.already == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of them with nothing to apply: applied already, or no longer taken)", r.already)
}

// stillFailing is the error of a replay after which failed events still
// fail, and stay parked; nil when none does.
func stillFailing(failed, behind int) error {
	switch {
	case failed == 0:
		return nil
	case behind > 0:
		verb := "fail"
		if failed-behind == 1 {
			verb = "fails"
		}
		return fmt.Errorf("%s still %s, and %s held behind: they stay parked", plural(failed-behind, "event"), verb, plural(behind, "more event"))
	case failed == 1:
		return errors.New("1 event still fails; it stays parked")
	}
	return fmt.Errorf("%d events still fail; they stay parked", failed)
}

// refuseBesideGroups fails when projection name has run in persistent
// subscription groups (run --group records them) and a consumer of one is
// still connected after leave (the consumers stand down while the replay
// holds the projection's lease), or, without client, when that cannot be
// asked: a group's consumers take no lease, and a replay's write beside
// theirs can be lost (both are conditional on the document's revision,
// which a replay does not move).
func refuseBesideGroups(ctx context.Context, store *mongostore.Store, client eventStore, name string, timeout, leave time.Duration) error {
	rec, err := store.CollectionsOf(ctx, name)
	if err != nil || len(rec.Groups) == 0 {
		return err
	}
	if client == nil {
		return needsESDB(fmt.Sprintf("%s has run in persistent subscription group %s: give --esdb, so that the replay checks that none of its consumers is connected (a replay beside them can lose its write)",
			name, strings.Join(rec.Groups, ", ")))
	}
	if leave > 0 {
		// A consumer whose subscription is down is not counted, and its
		// runner subscribes again on its own: each consumer has read the
		// lease and stood down within this.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * groupLeasePoll):
		}
	}
	deadline := time.Now().Add(leave)
	for _, g := range rec.Groups {
		if err := awaitConsumersGone(ctx, client, g, name, timeout, leave, deadline); err != nil {
			return err
		}
	}
	return nil
}

// awaitConsumersGone asks the server, every consumersPoll until deadline,
// whether group g of projection name has consumers connected, and fails
// when some still are then; a group that does not exist has none.
func awaitConsumersGone(ctx context.Context, client eventStore, g, name string, timeout, leave time.Duration, deadline time.Time) error {
	for {
		gctx, cancel := context.WithTimeout(ctx, timeout)
		info, err := client.groupInfo(gctx, g)
		cancel()
		switch {
		case errors.Is(err, errNoGroup):
			return nil
		case err != nil:
			return fmt.Errorf("group %s: %w", g, err)
		case info.Consumers == 0:
			return nil
		case !time.Now().Before(deadline):
			waited := " (--lease 0: the replay holds no lease, for them to stand down)"
			if leave > 0 {
				waited = fmt.Sprintf(" after %v holding the projection's lease (a consumer stands down while another process holds it)", leave)
			}
			return fmt.Errorf("%s of persistent subscription group %s connected%s: stop the run --group processes of %s before replaying its parked events (a replay beside them can lose its write)",
				plural(info.Consumers, "consumer"), g, waited, name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(consumersPoll):
		}
	}
}

// needsESDB says that replay-parked needs --esdb for the projection: a
// flag missing.
type needsESDB string

func (e needsESDB) Error() string { return string(e) }

// consumersPoll is how often a replay asks whether a group's consumers
// have left.
const consumersPoll = 200 * time.Millisecond

// replayGroup asks EventStoreDB to deliver the events parked in group (on
// $all) again to the group's consumers.
func replayGroup(ctx context.Context, c servers, group string, stdout io.Writer) error {
	client, err := dial(ctx, c, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer client.Close()
	g, err := groupInfo(ctx, client, group, c.timeout)
	if err != nil {
		return fmt.Errorf("group %s: %w", group, err)
	}
	n := g.Parked
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := client.replayParked(rctx, group); err != nil {
		return fmt.Errorf("replaying the parked events of group %s: %w", group, err)
	}
	fmt.Fprintf(stdout, "group %s delivers its %d parked events again to its consumers\n", group, n)
	return nil
}
