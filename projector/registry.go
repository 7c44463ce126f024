package projector

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Registry maps event type names to Go types and decodes payloads into them,
// older forms included: renamed types and older shapes, each turned into
// the type registered now (see [Register]). It is safe for concurrent use.
type Registry struct {
	mu           sync.RWMutex
	forms        map[string]form // by stored name: the names now, older names and versions
	byType       map[reflect.Type]string
	kin          map[string][]string // registered names by what close names share (see Near)
	newest       map[string]string   // "T" to the newest form named "T.vN" (see formOf)
	versions     map[string]string   // "T.vN" to the form written otherwise ("T.v0N", "T.VN")
	older        map[string]bool     // "T" whose forms include an older shape, T or "T.vN" (see hasOlderForm)
	versionField string              // the metadata field of an event's version ("": none)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{forms: map[string]form{}, byType: map[reflect.Type]string{}, kin: map[string][]string{}, newest: map[string]string{},
		versions: map[string]string{}, older: map[string]bool{}}
}

// Register binds the event type name to the Go type E, whose payloads are
// JSON, and opts to its older forms: the names it had ([Renamed]) and the
// shapes it had ([Upcast]). It panics when a name is empty, when a name or
// the type is already bound to something else, or when upcasters do not
// chain, like registering two HTTP handlers for one pattern: that is a
// programming error found at start-up.
func Register[E any](r *Registry, name string, opts ...RegisterOption) {
	en := entry{t: reflect.TypeFor[E](), name: name}
	for _, o := range opts {
		o(&en)
	}
	forms := en.forms()
	for n := range forms {
		if strings.TrimSpace(n) == "" {
			panic(fmt.Sprintf("projector: Go type %v registered under an empty event type name", en.t))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byType[en.t]; ok && old != name {
		panic(fmt.Sprintf("projector: Go type %v registered twice (%q and %q)", en.t, old, name))
	}
	for n, f := range forms {
		old, ok := r.forms[n]
		switch {
		case !ok:
		case old.t != f.t:
			panic(fmt.Sprintf("projector: event type %q registered twice (%v and %v)", n, old.t, f.t))
		case !sameSteps(old.steps, f.steps):
			panic(fmt.Sprintf("projector: event type %q of %v registered twice, with other upcasters", n, f.t))
		}
	}
	for n, f := range forms {
		r.forms[n] = f
	}
	r.byType[en.t] = name
	r.addKin(forms)
	for n, f := range forms {
		r.noteVersion(n)
		if !f.current() {
			r.older[versionedBase(n)] = true
		}
	}
}

// sameSteps reports whether two chains of upcasters are the same: the same
// forms, types and functions, as registering one type again gives.
func sameSteps(a, b []upcaster) bool {
	return slices.EqualFunc(a, b, func(x, y upcaster) bool {
		return x.from == y.from && x.in == y.in && x.out == y.out && x.code == y.code
	})
}

// zero returns the zero value of the Go type e decodes into (its type's,
// or, under [Registry.VersionField], its type and version's), if any: the
// type whose handlers an event that does not decode fails in.
func (r *Registry) zero(e Event) (any, bool) {
	f, _, ok := r.formOf(e)
	if !ok {
		return nil, false
	}
	return reflect.Zero(f.t).Interface(), true
}

// Has reports whether an event type name is registered: as a type's name
// now, or as one of its older forms; under [Registry.VersionField], also
// T where a form is named "T.vN" (its events are stored as T).
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if _, ok := r.forms[name]; ok {
		return true
	}
	_, versioned := r.newest[name] // its events with a version in their metadata
	return versioned && r.versionField != ""
}

// nameOf returns the event type name Go type t is registered under.
func (r *Registry) nameOf(t reflect.Type) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	name, ok := r.byType[t]
	return name, ok
}

// Name returns the event type name a payload is registered under.
func (r *Registry) Name(payload any) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	name, ok := r.byType[reflect.TypeOf(payload)]
	return name, ok
}

// Encode returns the type name and JSON payload of a registered event value.
func (r *Registry) Encode(payload any) (name string, data []byte, err error) {
	name, ok := r.Name(payload)
	if !ok {
		return "", nil, fmt.Errorf("projector: %T is not a registered event type", payload)
	}
	data, err = json.Marshal(payload)
	if err != nil {
		return "", nil, fmt.Errorf("projector: encode %s: %w", name, err)
	}
	return name, data, nil
}

// Decode sets e.Payload from e.Data when e.Type is registered, as the type
// registered now: an event of an older form goes through its upcasters
// ([Upcast]). An event of an unknown type is returned unchanged with a nil
// Payload: it is no error, since projections ignore types they do not
// handle (the gate still counts it), unless one fails them
// ([Projection.FailUnknownTypes]). An event an upcaster dropped gets a
// payload that no projection handles, and passes the same way. A payload
// that does not decode, or an upcaster that fails, is an error wrapping
// [ErrUndecodable]; the event it returns then keeps its nil Payload and
// that error, which [Projection.Apply] and [Projection.Fold] return for it
// in a projection that handles its type, as the engine does (the others
// pass over it). An event with no data at all decodes as its type's zero
// value. e.Type and e.Data stay as they were stored.
func (r *Registry) Decode(e Event) (Event, error) {
	if e.Payload != nil {
		return e, nil
	}
	e.undecodable = nil // another registry's verdict, if any
	f, name, ok := r.formOf(e)
	if !ok {
		return e, nil
	}
	v, err := f.decode(e)
	if err != nil && f.none != "" {
		err = fmt.Errorf("%w (its metadata names version %s, and no form is registered as %s: read as %s)",
			err, strings.TrimPrefix(f.none, e.Type+".v"), f.none, name)
	}
	if err != nil {
		stored := e.Type // as the event store has it; the form it is read as, where another
		if name != e.Type && f.none == "" {
			stored += " (read as " + name + ")"
		}
		stored += " event"
		if e.ID != "" { // one built by hand, in a test, may have none
			stored += " " + e.ID
		}
		err = fmt.Errorf("%w: %s (stream %q, revision %d): %w",
			ErrUndecodable, stored, e.StreamID, e.StreamRevision, err)
		e.undecodable = &decodeFailure{err: err, t: f.t}
		return e, err
	}
	e.Payload, e.undecodable = v, nil
	return e, nil
}
