package projectortest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
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
// one (InCollection, with mongostore.Store.ActiveCollection). The events
// must carry their payloads, as [projector.Projection.Fold] says: events
// read back from an event store go through the registry's Decode first
// (the fold passes over an event with no payload at all, and fails on one
// whose payload did not decode). Floats are compared to within rounding
// (a relative 1e-9, or an absolute 1e-9 near zero; NaN equals NaN).
//
// A document that moved past an event under [projector.Skip] or
// [projector.Park] holds the fold without that event's effect, at its
// revision: give that event with its Payload (and its error) cleared,
// projector.Event{ID: ev.ID, Type: ev.Type, StreamID: ev.StreamID,
// StreamRevision: ev.StreamRevision, Position: ev.Position}, which the fold
// passes over as it passes over an event of a type p does not handle.
// Clear it after routing: take each document's events from
// [projector.Projection.Documents] with their payloads, then clear the
// parked one's in the list of its document. Cleared first, it routes
// nowhere, and in a stream p ties, the stream's later events it routes
// (an amendment that names no document) drop out of the fold too.
func CheckDocument[S any](ctx context.Context, store driver.Store, p *projector.Projection[S], id string, events []projector.Event) error {
	if p == nil {
		return errors.New("projectortest: CheckDocument needs a projection, not nil")
	}
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
	case !sameState(got, want) && keptEqual(got, want):
		return fmt.Errorf("%w: %s/%s: %w (%s):\n got %+v\nwant %+v", ErrMismatch, p.Collection(), id, errNotKept,
			notKeptWhy(reflect.ValueOf(got), reflect.ValueOf(want), "state"), got, want)
	case !sameState(got, want):
		return fmt.Errorf("%w: %s/%s: %v (the fold's):\n got %+v\nwant %+v", ErrMismatch, p.Collection(), id,
			firstDiff(reflect.ValueOf(got), reflect.ValueOf(want), "state"), got, want)
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
	return bson.Unmarshal(raw, &kept) == nil && sameState(got, kept)
}

// notKeptWhy says what BSON did not keep of want, which a document holds as
// got: the first place they differ, and how to keep it.
func notKeptWhy(got, want reflect.Value, path string) string {
	d := firstDiff(got, want, path)
	where := d.where
	switch d.kind {
	case "time":
		return where + ": BSON keeps a time to the millisecond and in UTC: store the times a handler keeps as t.UTC().Truncate(time.Millisecond)"
	case "nil":
		return where + ": a field marked omitempty that holds a zero value (a pointer to one, an empty map or slice) is left out, " +
			"and reads back as nil: keep nil there, or drop omitempty"
	case "":
		return "what BSON keeps of the state differs from it"
	}
	return where + " is not kept as it is"
}

var timeType = reflect.TypeFor[time.Time]()

// diff is where two values of one type first differ (where, "" where they
// do not), its kind ("time", "nil": one of them nil, the other not, or
// "value"), and the two values there.
type diff struct {
	where, kind string
	a, b        reflect.Value
}

// firstDiff returns the first place, by path, where a and b (values of one
// type) differ.
func firstDiff(a, b reflect.Value, path string) diff {
	if where, kind, done := diffHere(a, b, path); done {
		return diff{where, kind, a, b}
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() {
			return diff{}
		}
		return firstDiff(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := range a.NumField() {
			if f := a.Type().Field(i); f.IsExported() {
				if d := firstDiff(a.Field(i), b.Field(i), path+"."+f.Name); d.kind != "" {
					return d
				}
			}
		}
		return diff{}
	case reflect.Slice, reflect.Array:
		for i := range a.Len() {
			if d := firstDiff(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d.kind != "" {
				return d
			}
		}
		return diff{}
	case reflect.Map:
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() {
				return diff{fmt.Sprintf("%s[%v]", path, k), "value", a.MapIndex(k), bv}
			}
			if d := firstDiff(a.MapIndex(k), bv, fmt.Sprintf("%s[%v]", path, k)); d.kind != "" {
				return d
			}
		}
		return diff{}
	}
	if a.CanInterface() && !sameState(a.Interface(), b.Interface()) {
		return diff{path, "value", a, b}
	}
	return diff{}
}

// String says where the values differ and what each is there.
func (d diff) String() string {
	show := func(v reflect.Value) string {
		if !v.IsValid() {
			return "absent"
		}
		if v.CanInterface() {
			return fmt.Sprintf("%+v", v.Interface())
		}
		return v.String()
	}
	if d.kind == "" {
		return "the states differ"
	}
	return fmt.Sprintf("%s is %s, not %s", d.where, show(d.a), show(d.b))
}

// sameState reports whether a and b, states of one type, are equal, floats
// to within rounding (a relative 1e-9, or an absolute 1e-9 near zero, where
// amounts of up to millions that cancel out leave a few ulps of theirs; NaN
// equal to NaN): a sum of the same amounts in another order differs in its
// last bits, which is not an event applied twice or missed. Unexported
// fields count too; times are compared by their Equal method.
func sameState(a, b any) bool {
	return gocmp.Equal(a, b, floatsClose, gocmp.Exporter(func(reflect.Type) bool { return true }))
}

// floatsClose compares values of every float type (named ones too, a
// Money float64) as sameState says.
var floatsClose = gocmp.FilterPath(func(p gocmp.Path) bool {
	k := p.Last().Type().Kind()
	return k == reflect.Float32 || k == reflect.Float64
}, gocmp.Comparer(func(x, y any) bool {
	a, b := reflect.ValueOf(x).Float(), reflect.ValueOf(y).Float()
	switch {
	case a == b:
		return true
	case math.IsNaN(a) || math.IsNaN(b):
		return math.IsNaN(a) && math.IsNaN(b)
	case math.IsInf(a, 0) || math.IsInf(b, 0):
		return false
	}
	d := math.Abs(a - b)
	return d <= 1e-9 || d <= 1e-9*max(math.Abs(a), math.Abs(b))
}))

// diffHere is firstDiff's verdict on a and b themselves (done), without
// looking inside them: times, nil against not nil, lengths.
func diffHere(a, b reflect.Value, path string) (where, kind string, done bool) {
	switch {
	case !a.IsValid() || !b.IsValid():
		if a.IsValid() != b.IsValid() {
			return path, "nil", true
		}
		return "", "", true
	case a.Type() != b.Type():
		// An interface's value of another type (a []any read back as
		// bson.A): it is not kept as it is.
		return path, "value", true
	}
	if a.Type() == timeType {
		ta, tb := a.Interface().(time.Time), b.Interface().(time.Time)
		if !ta.Equal(tb) || ta.Location() != tb.Location() {
			return path, "time", true
		}
		return "", "", true
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		if a.IsNil() != b.IsNil() {
			return path, "nil", true
		}
	}
	switch a.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return path, "value", true
		}
	}
	return "", "", false
}
