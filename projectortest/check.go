package projectortest

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/revgate/projector/projector"
)

// ErrMismatch: a document differs from the pure fold of its events.
var ErrMismatch = errors.New("document differs from the fold of its events")

// CheckDocument reports whether document id of projection p in store holds
// exactly the fold of events, at the revision of the last one. A difference is
// an error wrapping [ErrMismatch] that shows both; other errors come from the
// store or the fold.
func CheckDocument[S any](ctx context.Context, store projector.Store, p *projector.Projection[S], id string, events []projector.Event) error {
	if len(events) == 0 {
		return errors.New("projectortest: no events to fold")
	}
	want, err := p.Fold(events...)
	if err != nil {
		return fmt.Errorf("projectortest: fold: %w", err)
	}
	var got S
	rev, found, err := store.Load(ctx, p.Collection(), id, 0, &got)
	switch last := events[len(events)-1].StreamRevision; {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: %s/%s: no document", ErrMismatch, p.Collection(), id)
	case rev != last:
		return fmt.Errorf("%w: %s/%s: revision %d, want %d", ErrMismatch, p.Collection(), id, rev, last)
	case !reflect.DeepEqual(got, want):
		return fmt.Errorf("%w: %s/%s:\n got %+v\nwant %+v", ErrMismatch, p.Collection(), id, got, want)
	}
	return nil
}

// CheckState compares the state of document id, kept under a strategy other
// than the revision gate (a document fed by several streams), with the fold
// of events, the document's events in log order. The store must be a
// [projector.GuardedStore].
func CheckState[S any](ctx context.Context, store projector.Store, p *projector.Projection[S], id string, events []projector.Event) error {
	gs, ok := store.(projector.GuardedStore)
	if !ok {
		return fmt.Errorf("projectortest: %T keeps no guarded documents", store)
	}
	want, err := p.Fold(events...)
	if err != nil {
		return fmt.Errorf("projectortest: fold: %w", err)
	}
	var got S
	_, found, err := gs.LoadGuarded(ctx, p.Collection(), id, &got)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: %s/%s: no document", ErrMismatch, p.Collection(), id)
	case !reflect.DeepEqual(got, want):
		return fmt.Errorf("%w: %s/%s:\n got %+v\nwant %+v", ErrMismatch, p.Collection(), id, got, want)
	}
	return nil
}
