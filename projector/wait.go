package projector

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/revgate/projector/projector/driver"

	"github.com/revgate/projector/retry"
)

// segmentSeparator begins the part of a checkpoint's name that names a
// segment of its collection (run --segments: <collection>/segment-<k>-of-<N>).
const segmentSeparator = "/segment-"

// ErrNotYet: a read-your-writes wait ran out before the read model caught up.
var ErrNotYet = errors.New("read model has not caught up")

// WaitForRevision is read-your-writes for an API: after appending an event at
// stream revision revision, it waits until document id of collection has
// applied it (its revision is at least revision), reading with backoff under
// policy and bounded by ctx. The error wraps [ErrNotYet] (and ctx.Err(),
// with its [context.Cause], when ctx ended the wait) and says where the
// document was. It is for documents under the revision gate (one stream per
// document); for documents fed by several streams, wait on the position
// ([WaitForPosition]).
//
// The wait sees the document's revision, not the event's effect: under the
// skip and park policies a document moves past an event that failed, and
// the wait then returns nil without its effect (a parked event is in the
// store's parked records); under block it runs out with ErrNotYet, as for
// a projector that is slow. policy bounds the reads (a Policy's MaxRetries
// of 0 reads once): for an API, a short one, such as 5 ms doubling up to
// 100 ms, for up to a second.
//
// collection is the projection's own. Once a rebuild has switched readers
// to a new collection, the wait reads that one, on a store that records the
// switch by the projection's own collection (mongostore, for the rebuilds
// that switched since this version).
func WaitForRevision(ctx context.Context, store driver.Store, collection, id string, revision uint64, policy retry.Policy) error {
	if isNil(store) {
		return errors.New("projector: WaitForRevision: the store is nil")
	}
	seen := int64(-1)
	err := retry.Do(ctx, policy, func(ctx context.Context) error {
		active, err := activeCollection(ctx, store, "", collection)
		if err != nil {
			return err
		}
		head, found, err := store.Load(ctx, active, id, 0, nil)
		switch {
		case err != nil:
			return err
		case !found:
			return notGated(ctx, store, active, id)
		}
		seen = int64(head.Revision)
		if head.Revision < revision {
			return ErrNotYet
		}
		return nil
	})
	if err == nil {
		return nil
	}
	where := "no document"
	if seen >= 0 {
		where = fmt.Sprintf("revision %d", seen)
	}
	switch {
	case errors.Is(err, ErrNotYet) || ctx.Err() != nil:
		return fmt.Errorf("projector: %s/%s wanted at revision %d, saw %s: %w", collection, id, revision, where, notYet(ctx))
	case errors.Is(err, errNotGated):
		return fmt.Errorf("projector: %s/%s: %w", collection, id, err)
	}
	return fmt.Errorf("projector: waiting for %s/%s: %w", collection, id, err)
}

// notYet is [ErrNotYet], with what ended the wait when its context did (a
// deadline, or a caller that went away), so that errors.Is tells them apart.
func notYet(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		if cause := context.Cause(ctx); cause != err {
			return fmt.Errorf("%w (%w: %w)", ErrNotYet, err, cause)
		}
		return fmt.Errorf("%w (%w)", ErrNotYet, err)
	}
	return ErrNotYet
}

// notGated is ErrNotYet where document id of collection is not there,
// and a permanent error where it is there but kept under another strategy
// than the revision gate (a meta, no revision): waiting on its revision
// would run out however caught up it is.
func notGated(ctx context.Context, store driver.Store, collection, id string) error {
	g, ok := store.(driver.GuardedStore)
	if !ok {
		return ErrNotYet
	}
	if _, found, err := g.LoadGuarded(ctx, collection, id, nil); err != nil || !found {
		return ErrNotYet
	}
	if _, found, err := store.Load(ctx, collection, id, 0, nil); err != nil || found {
		// Written under the gate between the two reads: read again.
		return ErrNotYet
	}
	return retry.Permanent(errNotGated)
}

var errNotGated = errors.New("a document kept under a strategy other than the revision gate (RevisionMap, HandledIDs, " +
	"GlobalPosition or Inbox) has no revision to wait for: wait for the event's position with WaitForPosition")

// reacher is a checkpoint store that tells where a subscription is all
// together, for a projection that runs split into segments the lowest of
// their checkpoints (mongostore's Store.Reached).
type reacher interface {
	Reached(ctx context.Context, name string) (*Checkpoint, error)
}

// WaitForPosition is read-your-writes by global position: it waits until the
// checkpoint of subscription name has reached position (every event up to it
// is applied), under policy and bounded by ctx. The error wraps [ErrNotYet]
// (and ctx.Err(), with its [context.Cause], when ctx ended the wait).
//
// name is the runner's: under the projector command line, the collection the
// projection writes, which a rebuild changes: given the projection's own
// collection, the wait reads the checkpoint of the one a rebuild switched
// readers to, on a store that records the switch (mongostore's
// Store.ActiveCollection tells it); a name without a checkpoint waits until
// the policy or ctx runs out, and the error says it saw none. The checkpoint
// is stored every checkpoint interval (run --checkpoint-interval, 1 s by
// default), so this wait takes up to that long even when the documents
// were written at once; [WaitForRevision] sees a document as soon as it is
// written. Under run --segments N, the checkpoints are the segments'
// (<collection>/segment-<k>-of-<N>, k the FNV-1a 32-bit hash of the
// document id modulo N); on a store that tells where they are all together
// (mongostore), the wait given the collection waits for the lowest of
// them, and given a segment's name for that segment's alone. position is
// a commit position: inside a transaction written by the legacy TCP API,
// whose events share theirs, the wait returns once the checkpoint has
// reached the first of them, not the last (a gRPC append gives each event
// its own).
func WaitForPosition(ctx context.Context, checkpoints CheckpointStore, name string, position uint64, policy retry.Policy) error {
	if isNil(checkpoints) {
		return errors.New("projector: WaitForPosition: the checkpoint store is nil")
	}
	var seen *Checkpoint
	err := retry.Do(ctx, policy, func(ctx context.Context) error {
		collection, segment, _ := strings.Cut(name, segmentSeparator)
		active, err := activeCollection(ctx, checkpoints, "", collection)
		if err != nil {
			return err
		}
		if segment != "" {
			active += segmentSeparator + segment
		}
		load := checkpoints.LoadCheckpoint
		if r, ok := checkpoints.(reacher); ok && segment == "" {
			load = r.Reached // the lowest of its segments' when it runs split
		}
		c, err := load(ctx, active)
		if err != nil {
			return err
		}
		seen = c
		if c == nil || c.Position < position {
			return ErrNotYet
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotYet) || ctx.Err() != nil {
		return fmt.Errorf("projector: checkpoint of %q wanted at %d, saw %s: %w", name, position, checkpointAttr(seen), notYet(ctx))
	}
	return fmt.Errorf("projector: waiting for the checkpoint of %q: %w", name, err)
}
