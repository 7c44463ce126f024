package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/revgate/projector/mongostore"
)

// errOtherVersion: a collection was built by another version of its
// projection (Projection.Version) than the binary's.
var errOtherVersion = errors.New("built by another version of the projection")

// claimVersion records that p's version builds collection, and fails,
// wrapping errOtherVersion, when another version built it: its documents
// are that version's fold, not this one's. bin is the binary's name, for
// the way out.
func claimVersion(ctx context.Context, store *mongostore.Store, p Projection, collection, bin string) error {
	built, err := store.ClaimVersion(ctx, collection, p.Version)
	if err != nil {
		return err
	}
	if built == p.Version {
		return nil
	}
	if built > p.Version {
		// A newer version took over (a rollout's rebuild switched readers
		// to it): this binary is the one to stop, not the collection to
		// rebuild, which would undo the upgrade.
		return fmt.Errorf("%w: collection %s of projection %s was built by version %d, newer than this binary's version %d: "+
			"this binary is superseded; stop it, and run the binary of version %[4]d (a rebuild to version %[5]d would undo the upgrade)",
			errOtherVersion, collection, p.Definition.Name(), built, p.Version)
	}
	return fmt.Errorf("%w: collection %s of projection %s was built by version %d, and this binary's is version %d; "+
		"rebuild it to version %[5]d (%[6]s rebuild %[3]s: readers stay on %[2]s until the new collection has caught up), "+
		"or run the binary of version %[4]d", errOtherVersion, collection, p.Definition.Name(), built, p.Version, bin)
}

// unknownTypesEvery is how often a running projector records the unknown
// types its projections met, for status.
const unknownTypesEvery = 5 * time.Second

// recordUnknownTypes adds, beside each projection's checkpoint, the events
// of types nobody registered that it met (for status) since it last added,
// until ctx is done; and once more then.
func (s *session) recordUnknownTypes(ctx context.Context) {
	recorded := make([]map[string]uint64, len(s.slots))
	record := func(ctx context.Context) {
		for i, sl := range s.slots {
			r := sl.cur.Load()
			counts := sl.Stats().UnknownTypes
			added := countsSince(counts, recorded[i])
			if r == nil || len(added) == 0 {
				continue
			}
			if err := s.store.AddUnknownTypes(ctx, r.Name(), added); err != nil {
				s.logger.Debug("recording the unknown types met", "projection", sl.name, "err", err)
				continue
			}
			recorded[i] = counts
		}
	}
	t := time.NewTicker(unknownTypesEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second) // within the 5s the samplers are given to stop
			defer cancel()
			record(wctx)
			return
		case <-t.C:
			record(ctx)
		}
	}
}

// countsSince is what counts has more than before, by name: the counts
// met since before was recorded (a slot's counts never go down: they carry
// those of the runners it replaced).
func countsSince(counts, before map[string]uint64) map[string]uint64 {
	var out map[string]uint64
	for t, n := range counts {
		if was := before[t]; n > was {
			if out == nil {
				out = map[string]uint64{}
			}
			out[t] = n - was
		}
	}
	return out
}

// countsString is counts by name as "a (2), b (1)", sorted by name; "none"
// for none.
func countsString(counts map[string]uint64) string {
	if len(counts) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(counts))
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s (%d)", name, counts[name]))
	}
	return strings.Join(parts, ", ")
}
