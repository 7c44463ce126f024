package projector

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Validate checks projections against registry, without any I/O: that each
// has a name, routes events to documents, handles at least one event type and
// only types the registry can decode (a handler of an unregistered type would
// never be called, and its documents would be silently wrong), that no two
// share a name or a collection, that their strategies' settings are
// valid, and that a failure policy a projection sets itself
// ([Projection.OnFailure]) fits its strategy. [NewEngine] runs it; a command line runs it at start, before it
// connects to anything. The error is one line that names the projection.
func Validate(registry *Registry, projections ...Definition) error {
	if registry == nil {
		return errors.New("projector: no event registry")
	}
	names, colls := map[string]bool{}, map[string]string{}
	for i, p := range projections {
		if p == nil || reflect.ValueOf(p).IsNil() {
			return fmt.Errorf("projector: projection %d is nil", i+1)
		}
		if err := validateOne(registry, p); err != nil {
			return err
		}
		if names[p.Name()] {
			return fmt.Errorf("projector: two projections named %q", p.Name())
		}
		if other, ok := colls[p.Collection()]; ok {
			return fmt.Errorf("projector: projections %q and %q share collection %q", other, p.Name(), p.Collection())
		}
		names[p.Name()], colls[p.Collection()] = true, p.Name()
	}
	return nil
}

func validateOne(registry *Registry, p Definition) error {
	switch {
	case strings.TrimSpace(p.Name()) == "":
		return errors.New("projector: a projection has no name")
	case strings.TrimSpace(p.Collection()) == "":
		return fmt.Errorf("projector: projection %q has no collection", p.Name())
	case !p.routes():
		return fmt.Errorf("projector: projection %q has no IDFunc: nothing routes events to its documents", p.Name())
	}
	for _, prefix := range p.tiedStreams() {
		if strings.TrimSpace(prefix) == "" {
			return fmt.Errorf("projector: projection %q ties streams by an empty prefix (TieStreams(\"\")), which would tie every stream: name the streams' prefix", p.Name())
		}
	}
	types := p.handledTypes()
	if len(types) == 0 {
		return fmt.Errorf("projector: projection %q has no handlers: add them with projector.Create, On or OnEvent", p.Name())
	}
	var missing []string
	for _, t := range types {
		if _, ok := registry.nameOf(t); !ok {
			missing = append(missing, t.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("projector: projection %q handles %s, not in the event registry: register them with projector.Register, "+
			"or the handlers are never called", p.Name(), strings.Join(missing, ", "))
	}
	if err := keeperOf(p).valid(); err != nil {
		return fmt.Errorf("projector: projection %q: %w", p.Name(), err)
	}
	if own, ok := p.failurePolicy(); ok {
		// Its own policy (OnFailure), which no engine's overrides.
		return checkFailurePolicy(p, own)
	}
	return nil
}

// HandledTypes returns the names, in registry, of the event types
// projection p has handlers for, sorted, with the names of their older
// forms ([Renamed], [Upcast]): every name an event p handles may be stored
// under. Types the registry does not know are left out ([Validate] refuses
// them).
func HandledTypes(registry *Registry, p Definition) []string {
	var names []string
	for _, t := range p.handledTypes() {
		names = append(names, registry.namesOf(t)...)
	}
	slices.Sort(names)
	return names
}
