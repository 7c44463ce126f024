package projector

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
)

// Registry maps event type names to Go types and decodes payloads into them.
// It is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]reflect.Type
	byType map[reflect.Type]string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]reflect.Type{}, byType: map[reflect.Type]string{}}
}

// Register binds the event type name to the Go type E, whose payloads are
// JSON. It panics when the name or the type is already bound to something
// else, like registering two HTTP handlers for one pattern: that is a
// programming error found at start-up.
func Register[E any](r *Registry, name string) {
	t := reflect.TypeFor[E]()
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byName[name]; ok && old != t {
		panic(fmt.Sprintf("projector: event type %q registered twice (%v and %v)", name, old, t))
	}
	if old, ok := r.byType[t]; ok && old != name {
		panic(fmt.Sprintf("projector: Go type %v registered twice (%q and %q)", t, old, name))
	}
	r.byName[name] = t
	r.byType[t] = name
}

// zero returns the zero value of the Go type registered for name, if any.
func (r *Registry) zero(name string) (any, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byName[name]
	if !ok {
		return nil, false
	}
	return reflect.Zero(t).Interface(), true
}

// Has reports whether an event type name is registered.
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.byName[name]
	return ok
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

// Decode sets e.Payload from e.Data when e.Type is registered. An event of an
// unknown type is returned unchanged with a nil Payload: it is no error, since
// projections ignore types they do not handle (the gate still counts it). A
// payload that does not decode is an error wrapping [ErrUndecodable].
func (r *Registry) Decode(e Event) (Event, error) {
	if e.Payload != nil {
		return e, nil
	}
	r.mu.RLock()
	t, ok := r.byName[e.Type]
	r.mu.RUnlock()
	if !ok {
		return e, nil
	}
	v := reflect.New(t)
	if err := json.Unmarshal(e.Data, v.Interface()); err != nil {
		return e, fmt.Errorf("%w: %s event %s (stream %q, revision %d): %w",
			ErrUndecodable, e.Type, e.ID, e.StreamID, e.StreamRevision, err)
	}
	e.Payload = v.Elem().Interface()
	return e, nil
}
