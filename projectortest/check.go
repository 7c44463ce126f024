package projectortest

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
)

// ErrMismatch: a document differs from the pure fold of its events.
var ErrMismatch = errors.New("document differs from the fold of its events")

// CheckDocument reports whether document id of projection p in store holds
// exactly the fold of events, read the way p's strategy keeps it: under the
// revision gate at the revision of the last event, under the other
// strategies (documents fed by several streams) with the document's events
// given in log order ([projector.Projection.Documents] gives each
// document's, as the engine routes them, ties included). A difference is an error wrapping [ErrMismatch] that
// shows both; other errors come from the store or the fold. It reads p's
// collection: after a rebuild switched readers, give it p in the active
// one (InCollection, with mongostore.Store.ActiveCollection).
func CheckDocument[S any](ctx context.Context, store driver.Store, p *projector.Projection[S], id string, events []projector.Event) error {
	if len(events) == 0 {
		return errors.New("projectortest: no events to fold")
	}
	want, err := p.Fold(events...)
	if err != nil {
		return fmt.Errorf("projectortest: fold: %w", err)
	}
	var got S
	found, rev, err := projector.ReadDocument(ctx, store, p, id, &got)
	switch last := int64(events[len(events)-1].StreamRevision); {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: %s/%s: no document", ErrMismatch, p.Collection(), id)
	case rev >= 0 && rev != last:
		return fmt.Errorf("%w: %s/%s: revision %d, want %d", ErrMismatch, p.Collection(), id, rev, last)
	case !reflect.DeepEqual(got, want) && keptEqual(got, want):
		return fmt.Errorf("%w: %s/%s: %w (BSON keeps a time to the millisecond and in UTC: store the times a handler keeps as "+
			"t.UTC().Truncate(time.Millisecond)):\n got %+v\nwant %+v", ErrMismatch, p.Collection(), id, errNotKept, got, want)
	case !reflect.DeepEqual(got, want):
		return fmt.Errorf("%w: %s/%s:\n got %+v\nwant %+v", ErrMismatch, p.Collection(), id, got, want)
	}
	return nil
}

// errNotKept: a document differs from the fold only in what the store does
// not keep of the fold's state; the events were applied exactly once.
var errNotKept = errors.New("it holds what MongoDB keeps of the fold's state, which is not all of it")

// keptEqual reports whether got is what a document store that keeps states
// as BSON (as mongostore does) keeps of want.
func keptEqual[S any](got, want S) bool {
	raw, err := bson.Marshal(want)
	if err != nil {
		return false
	}
	var kept S
	return bson.Unmarshal(raw, &kept) == nil && reflect.DeepEqual(got, kept)
}
