package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/revgate/projector/projector"
)

func (x *cli) runReplayParked(ctx context.Context, inv Invocation) error {
	stdout, stderr := inv.Stdout, inv.Stderr
	var c servers
	fs := inv.FlagSet("NAME [flags]  (flags also as " + inv.EnvPrefix + "<FLAG>)")
	c.register(fs, x.Embedded != nil, "")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: %s replay-parked NAME [flags]

Applies the events parked for projection NAME (--on-failure park) with this
binary's projection, meant to run once its bug is fixed, to each document as
it is now. Replayed events are marked; those that fail again stay parked with
the new error (exit status 1).

For a projection under the revision gate, stop "%[1]s run" for it first: the
replay's write cannot be made conditional on the events the gate applies
meanwhile. Projections under the other strategies replay safely while running
(the write is conditional on the document's version).

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
	if err := c.check(inv, false, x.Embedded != nil); err != nil {
		return err
	}
	opened, err := x.openStore(ctx, c, nil)
	if err != nil {
		return err
	}
	defer opened.Close()
	store := opened.Store
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
	for _, pe := range parked {
		r := eng.Replay(ctx, pe)
		var why error
		if r.Outcome != projector.Applied {
			why, failed = r.Err, failed+1
			fmt.Fprintf(stdout, "  still failing: %s@%d (%s): %v\n", pe.Stream, pe.Revision, pe.Type, r.Err)
		}
		if err := store.Replayed(ctx, name, pe.EventID, why); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "replayed %d of %d parked events of %s into %s\n", len(parked)-failed, len(parked), name, coll)
	if failed > 0 {
		return fmt.Errorf("%d events still fail; they stay parked", failed)
	}
	return nil
}
