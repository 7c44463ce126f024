package app

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/revgate/projector/projector"
)

// catalog is a binary's projections, checked.
type catalog struct {
	registry *projector.Registry
	entries  []Projection
}

// newCatalog checks c's projections without any I/O: each has a definition
// the engine accepts (projector.Validate: handlers, registered event types,
// no two with one name or collection), reads something the server can
// filter on, in a way its strategy can keep, and has valid settings.
func newCatalog(c Config) (*catalog, error) {
	if c.Registry == nil {
		return nil, errors.New("no event registry: set Config.Registry")
	}
	if len(c.Projections) == 0 {
		return nil, errors.New("no projections: set Config.Projections")
	}
	if c.Dial == nil {
		return nil, errors.New("no event store client: set Config.Dial to kurrent.Dial (package github.com/revgate/projector/kurrent) or esdbv4.Dial")
	}
	defs := make([]projector.Definition, len(c.Projections))
	for i, p := range c.Projections {
		if p.Definition == nil || reflect.ValueOf(p.Definition).IsNil() {
			return nil, fmt.Errorf("projection %d of Config.Projections has no Definition", i+1)
		}
		defs[i] = p.Definition
	}
	if err := projector.Validate(c.Registry, defs...); err != nil {
		return nil, err
	}
	entries := slices.Clone(c.Projections)
	for i, p := range entries {
		name := p.Definition.Name()
		p.Reads = p.Reads.withVersionedNames(c.Registry, p.Definition)
		entries[i] = p
		if err := p.Reads.check(); err != nil {
			return nil, fmt.Errorf("projection %q %w", name, err)
		}
		if s := p.Definition.Strategy(); p.Reads.byType() && s.NeedsEveryRevision() {
			return nil, fmt.Errorf("projection %q reads %s, which leaves holes in its streams' revisions, and its %s strategy "+
				"would wait for them forever: read by stream (app.StreamPrefix, app.Category, app.StreamRegex), "+
				"or pick a strategy that needs no revision order (HandledIDs, Inbox, None)", name, p.Reads, s)
		}
		if err := p.Reads.covers(c.Registry, p.Definition); err != nil {
			return nil, fmt.Errorf("projection %q %w", name, err)
		}
		if err := p.Reads.readsTies(p.Definition); err != nil {
			return nil, fmt.Errorf("projection %q %w", name, err)
		}
		if p.Workers < 0 || p.Batch < 0 {
			return nil, fmt.Errorf("projection %q: Workers and Batch must be >= 0 (0: the flags' values), got %d and %d", name, p.Workers, p.Batch)
		}
		if p.Definition.Strategy().NeedsOrderedSource() && p.Workers > 1 {
			return nil, fmt.Errorf("projection %q uses the %s strategy, which needs one worker reading the log in order, not %d",
				name, p.Definition.Strategy(), p.Workers)
		}
	}
	return &catalog{registry: c.Registry, entries: entries}, nil
}

// names returns the projections' names, in the order of the configuration.
func (k *catalog) names() []string { return names(k.entries) }

// get returns the projection called name.
func (k *catalog) get(name string) (Projection, bool) {
	for _, e := range k.entries {
		if e.Definition.Name() == name {
			return e, true
		}
	}
	return Projection{}, false
}

// unknown is the message for a projection name the catalog does not have.
func (k *catalog) unknown(name string) error {
	return fmt.Errorf("unknown projection %q; known: %s", name, strings.Join(k.names(), ", "))
}

// selected returns the projections named in list, comma-separated (all
// when it is empty).
func (k *catalog) selected(list string) ([]Projection, error) {
	if strings.TrimSpace(list) == "" {
		return k.entries, nil
	}
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("--projections %q names no projection; known: %s", list, strings.Join(k.names(), ", "))
	}
	out := make([]Projection, 0, len(names))
	for _, n := range names {
		e, ok := k.get(n)
		if !ok {
			return nil, k.unknown(n)
		}
		out = append(out, e)
	}
	return out, nil
}
