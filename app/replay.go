package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/revgate/projector/mongostore"

	"github.com/revgate/projector/projector"
)

func (x *cli) runReplayParked(ctx context.Context, inv Invocation) error {
	stdout, stderr := inv.Stdout, inv.Stderr
	var c servers
	var lease time.Duration
	var group string
	fs := inv.FlagSet("NAME [flags]  (flags also as " + inv.EnvPrefix + "<FLAG>)")
	c.register(fs, x.Embedded != nil, "EventStoreDB or KurrentDB connection string, esdb:// or kurrentdb:// (with --group)")
	fs.DurationVar(&lease, "lease", 15*time.Second, "the projection's lease, as run takes it: replay-parked holds it while it replays, and refuses while a running projector holds it (0: do not look)")
	fs.StringVar(&group, "group", "", "instead, ask EventStoreDB to deliver again the events parked in the projection's persistent subscription group (run --group of this name), for the running consumers to apply")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: %s replay-parked NAME [flags]

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
events the gate applies meanwhile.

With --group, the events are those the persistent subscription group parked
(under run --group: after they kept failing); EventStoreDB delivers them
again to the consumers of the group, which apply them through the gate.

`, inv.Name)
		fs.PrintDefaults()
	}
	name, err := inv.ParseNamed(fs)
	if err != nil {
		return err
	}
	if name == "" {
		return usageError(stderr, "replay-parked needs the NAME of a projection; known: %s", strings.Join(x.cat.names(), ", "))
	}
	p, ok := x.cat.get(name)
	if !ok {
		return usageError(stderr, "%v", x.cat.unknown(name))
	}
	if err := c.check(inv, group != "", x.Embedded != nil); err != nil {
		return err
	}
	if group != "" {
		return replayGroup(ctx, c, groupName(group, name), stdout)
	}
	opened, err := x.openStore(ctx, c, nil)
	if err != nil {
		return err
	}
	defer opened.Close()
	store := opened.Store
	if lease > 0 {
		held, l, err := holdLease(ctx, store, name, holderID("replay-parked"), lease, slog.New(slog.DiscardHandler))
		if errors.Is(err, mongostore.ErrLeaseHeld) {
			return fmt.Errorf("projection %s is run by %s (its lease runs until %s): stop it, then replay its parked events", name, l.Holder, l.Expires.Format(time.RFC3339))
		}
		if err != nil {
			return err
		}
		defer held.release()
	}
	coll, err := store.ActiveCollection(ctx, name, p.Definition.Collection())
	if err != nil {
		return err
	}
	eng, err := projector.NewEngine(store, x.Registry, []projector.Definition{projector.Copy(p.Definition, coll)}, projector.WithParker(store))
	if err != nil {
		return err
	}
	parked, err := store.Parked(ctx, name)
	if err != nil {
		return err
	}
	failed := 0
	var plain []projector.ParkedEvent
	held := map[string][]projector.ParkedEvent{}
	var holding []string
	others := 0
	for _, pe := range parked {
		switch {
		case pe.Collection != "" && pe.Collection != coll:
			others++ // another build's: it stays for that build
		case !pe.Held:
			plain = append(plain, pe)
		case held[pe.Document] == nil:
			holding = append(holding, pe.Document)
			fallthrough
		default:
			held[pe.Document] = append(held[pe.Document], pe)
		}
	}
	// A held document's events apply in order through the gate: those it
	// has already (a replay cut short) are duplicates, and are marked.
	for _, doc := range holding {
		rep := eng.ReplayHeld(ctx, name, held[doc])
		for _, pe := range rep.Applied {
			if err := store.Replayed(ctx, pe, nil); err != nil {
				return err
			}
		}
		if len(rep.Left) == 0 {
			fmt.Fprintf(stdout, "  document %s: its %d held events applied; it is free\n", doc, len(rep.Applied))
			continue
		}
		failed += len(rep.Left)
		first := rep.Left[0]
		fmt.Fprintf(stdout, "  still held: document %s at %s@%d (%s), %d events held: %v\n", doc, first.Stream, first.Revision, first.Type, len(rep.Left), firstLine(fmt.Sprint(rep.Err), "its record in "+mongostore.ParkedCollection))
		if err := store.Replayed(ctx, first, rep.Err); err != nil {
			return err
		}
	}
	for _, pe := range plain {
		r := eng.Replay(ctx, pe)
		var why error
		if r.Outcome == projector.Duplicate {
			fmt.Fprintf(stdout, "  already applied: %s@%d (%s): an earlier replay wrote it, or a rebuild folded it\n", pe.Stream, pe.Revision, pe.Type)
		}
		if r.Outcome != projector.Applied && r.Outcome != projector.Duplicate {
			why, failed = r.Err, failed+1
			fmt.Fprintf(stdout, "  still failing: %s@%d (%s): %v\n", pe.Stream, pe.Revision, pe.Type, firstLine(fmt.Sprint(r.Err), "its record in "+mongostore.ParkedCollection))
		}
		if err := store.Replayed(ctx, pe, why); err != nil {
			return err
		}
	}
	if others > 0 {
		fmt.Fprintf(stdout, "  left: %d events parked in another build of %s (a rebuild's collection, or the one it replaced)\n", others, name)
	}
	fmt.Fprintf(stdout, "replayed %d of %d parked events of %s into %s\n", len(parked)-others-failed, len(parked)-others, name, coll)
	if failed > 0 {
		if failed == 1 {
			return errors.New("1 event still fails; it stays parked")
		}
		return fmt.Errorf("%d events still fail; they stay parked", failed)
	}
	return nil
}

// replayGroup asks EventStoreDB to deliver the events parked in group (on
// $all) again to the group's consumers.
func replayGroup(ctx context.Context, c servers, group string, stdout io.Writer) error {
	client, err := dial(ctx, c, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer client.Close()
	n, err := groupParked(ctx, client, group, c.timeout)
	if err != nil {
		return fmt.Errorf("group %s: %w", group, err)
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := client.replayParked(rctx, group); err != nil {
		return fmt.Errorf("replaying the parked events of group %s: %w", group, err)
	}
	fmt.Fprintf(stdout, "group %s delivers its %d parked events again to its consumers\n", group, n)
	return nil
}
