package projector

import (
	"github.com/revgate/projector/projector/driver"

	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Projection is a read model: a state type S kept in one document per id, and
// the pure functions that fold events into it. Build it with [New], then add
// handlers with [Create], [On] and [OnEvent] before the engine starts.
type Projection[S any] struct {
	name       string
	collection string
	route      RouteFunc
	handlers   map[reflect.Type]handler[S]
	indexes    []Index
	onFailure  FailurePolicy
	hasPolicy  bool
	onDelete   DeletionPolicy
	strat      Strategy
	ties       []string // stream prefixes: see TieStreams
	// failUnknown: an event of a type nobody registered fails (see
	// FailUnknownTypes).
	failUnknown bool
	// byEnvelope: the router reads the envelope only (RoutesByEnvelope),
	// until it is found to read the payload; shared by the copies.
	byEnvelope *envelopeRouting
	// isCopy: made by Copy, in a collection of its own, which readers read
	// as it is (ReadDocument).
	isCopy bool
}

type handler[S any] struct {
	creates bool
	apply   func(S, any, Event) (S, error)
}

// New returns a projection named name (also its collection, unless
// [Projection.InCollection] says otherwise) whose documents are chosen by id.
//
// The methods that set a projection's settings (InCollection, Idempotency,
// OnFailure, OnDelete, TieStreams, ...) change the projection they are
// called on and return it, to be chained: they make no copy. For two
// variants of a projection, call the function that builds it twice.
func New[S any](name string, id IDFunc) *Projection[S] {
	var route RouteFunc
	if id != nil {
		route = func(e Event) (string, bool, error) {
			id, ok := id(e)
			return id, ok, nil
		}
	}
	return NewRouted[S](name, route)
}

// NewRouted is [New] with a router that can fail: an event the projection
// wants but cannot route fails permanently, under the projection's failure
// policy, instead of being left alone as unwanted.
func NewRouted[S any](name string, route RouteFunc) *Projection[S] {
	return &Projection[S]{name: name, collection: name, route: route, handlers: map[reflect.Type]handler[S]{}}
}

// InCollection stores the documents in collection instead of one named after
// the projection.
func (p *Projection[S]) InCollection(collection string) *Projection[S] {
	p.collection = collection
	return p
}

// WithIndex asks for a secondary index on the collection, for readers; the
// engine creates it on start.
func (p *Projection[S]) WithIndex(idx Index) *Projection[S] {
	p.indexes = append(p.indexes, idx)
	return p
}

// Create registers the event of type E that starts a document: the document is
// inserted with the state fn returns, at the event's revision. It panics
// when the projection has a handler for E already (Create or On): a
// programming error found at start-up, as [Register]'s are.
func Create[S, E any](p *Projection[S], fn func(E) (S, error)) {
	p.add(reflect.TypeFor[E](), true, func(_ S, e any, _ Event) (S, error) { return fn(e.(E)) })
}

// On registers how an event of type E changes the state. fn may change
// the state it is given in place (a map's entry) and return it: the engine
// never hands one state to a handler twice, and reads the document again
// after a step that fails. It panics when the projection has a handler for
// E already, as [Create] does.
func On[S, E any](p *Projection[S], fn func(S, E) (S, error)) {
	p.add(reflect.TypeFor[E](), false, func(s S, e any, _ Event) (S, error) { return fn(s, e.(E)) })
}

// OnEvent is [On] for a function that also needs the envelope: the event's
// time, id or stream. Its log position too, with a caveat: an event a
// batched catch-up folds from its stream's history ([StreamHistory]) has
// none (Position 0: an event store's read of a stream does not give it),
// so a state that keeps positions differs between a fold and the same
// events delivered one by one; [WithoutStreamFolds] keeps them.
func OnEvent[S, E any](p *Projection[S], fn func(S, E, Event) (S, error)) {
	p.add(reflect.TypeFor[E](), false, func(s S, e any, ev Event) (S, error) { return fn(s, e.(E), ev) })
}

func (p *Projection[S]) add(t reflect.Type, creates bool, fn func(S, any, Event) (S, error)) {
	if _, dup := p.handlers[t]; dup {
		panic(fmt.Sprintf("projector: projection %q has two handlers for %v", p.name, t))
	}
	p.handlers[t] = handler[S]{creates: creates, apply: fn}
}

// Name returns the projection's name.
func (p *Projection[S]) Name() string { return p.name }

// Collection returns the collection that holds the projection's documents.
func (p *Projection[S]) Collection() string { return p.collection }

// Indexes returns the secondary indexes the projection asked for.
func (p *Projection[S]) Indexes() []Index { return p.indexes }

// DocumentID returns the document the event feeds, if the projection wants it
// and can route it ([Projection.Route] says why not), by its router alone:
// an event of a tied stream ([Projection.TieStreams]) that the router
// declines goes to the document the tie names, which only the stream's
// earlier events tell ([Projection.Documents] routes a log as the engine
// does, ties included).
func (p *Projection[S]) DocumentID(e Event) (string, bool) {
	id, ok, err := p.Route(e)
	return id, ok && err == nil
}

// Route returns the document the event feeds; ok is false when the projection
// does not want the event. The error, wrapping [ErrUnroutable], says that it
// wants the event but cannot route it: the router said so, returned an empty
// id, or panicked.
func (p *Projection[S]) Route(e Event) (id string, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			id, ok, err = "", true, fmt.Errorf("%w: the router panicked: %v", ErrUnroutable, r)
		}
	}()
	id, ok, err = p.route(e)
	switch {
	case err != nil:
		return "", true, fmt.Errorf("%w: %w", ErrUnroutable, err)
	case ok && id == "":
		return "", true, fmt.Errorf("%w: the router returned an empty document id", ErrUnroutable)
	}
	return id, ok, nil
}

// handles reports whether the projection has a handler for the event's payload.
func (p *Projection[S]) handles(e Event) bool {
	_, ok := p.handlers[reflect.TypeOf(e.Payload)]
	return ok
}

// Apply folds one decoded event into state: the pure step the engine runs
// between its read and its write. An event with no handler returns the state
// unchanged; one of a type nobody registered fails instead in a projection
// that says so ([Projection.FailUnknownTypes]). An event that
// [Registry.Decode] could not decode (its payload, or an upcaster, failed)
// fails with that error, wrapping [ErrUndecodable], in a projection with a
// handler for its type, as it does in the engine; the others pass over it.
// A panic in a handler comes back as an error wrapping [ErrPanic].
func (p *Projection[S]) Apply(state S, e Event) (next S, err error) {
	if f := e.undecodable; e.Payload == nil && f != nil {
		if _, handled := p.handlers[f.t]; handled {
			return state, f.err
		}
		return state, nil
	}
	h, ok := p.handlers[reflect.TypeOf(e.Payload)]
	if !ok {
		if p.failUnknown && unknownType(e) {
			return state, unknownIn(p.name, e)
		}
		return state, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanic, r, panicStack())
		}
	}()
	return h.apply(state, e.Payload, e)
}

// Fold applies events in order to the zero state: the read model as it must
// be after them, computed without any store. Tests compare documents to it.
// A creation ([Create]) makes the state anew: after a stream deleted and
// written again, as the engine starts its document over. (A second
// creation of a stream that was not deleted, which the revision gate
// refuses, cannot be told from the events alone: the fold applies it.)
// The events must carry their payloads: an event read from the event store
// (subscription.Client.ReadStream gives them as stored) goes through
// [Registry.Decode] first, since one with a nil Payload is passed over, as
// an event of a type nobody registered is.
func (p *Projection[S]) Fold(events ...Event) (S, error) {
	var s S
	for _, e := range events {
		var err error
		if s, err = p.Apply(s, e); err != nil {
			return s, fmt.Errorf("projection %q, stream %q, revision %d: %w", p.name, e.StreamID, e.StreamRevision, err)
		}
	}
	return s, nil
}

// Definition is a projection as the engine sees it, whatever its state type.
// [*Projection] is the only implementation.
type Definition interface {
	Name() string
	Collection() string
	Indexes() []Index
	DocumentID(Event) (string, bool)
	Route(Event) (id string, ok bool, err error)
	Strategy() Strategy

	creates(Event) bool
	startsDocument(Event) bool
	deletionPolicy() DeletionPolicy
	handledTypes() []reflect.Type
	routes() bool
	copyTo(collection string) Definition
	copied() bool
	newState() any
	applyTo(state any, e Event) (any, error)
	failurePolicy() (FailurePolicy, bool)
	tiedStreams() []string
	envelopeRouting() *envelopeRouting
}

// TieStreams ties each stream whose name starts with one of prefixes to the
// document of its first event the router routes: a later event of such a
// stream that the router declines (it names no document, such as a card
// renamed, where only the card's creation names its board) goes to that
// document. The engine finds that event by reading the stream, up to the
// declined event, from the event store ([StreamHistory], given with
// [WithStreamReader]: [NewEngine] refuses a projection that ties streams
// without one; it also refuses an empty prefix, which would tie every
// stream). Only the events before it count, so an event's tie is the
// same whenever it is handled: live, after a restart, in every process and
// in a rebuild (unless the stream was truncated past its first routed
// event). The engine remembers the ties of up to [WithKnownDocuments]
// streams. A declined event before its stream's first routed one stays
// declined, as in a stream that is not tied: a stream none of whose events
// the router routes is not the projection's, and when a later event of the
// stream is routed to a document, that document finds the earlier events
// of types it handles missing ([ErrRoutedAway]), under its failure policy
// (those of types it does not handle, it moves past). A stream that cannot
// be read fails the event as a store error does, to be tried again.
//
// It is how a document fed by many streams under [RevisionMap] gets every
// event of its streams, as that strategy needs, when only some events say
// their document. A router's answer always wins: a tied stream's event that
// names another document goes there (and its document finds it routed away:
// [ErrRoutedAway]).
func (p *Projection[S]) TieStreams(prefixes ...string) *Projection[S] {
	p.ties = append(p.ties, prefixes...)
	return p
}

func (p *Projection[S]) tiedStreams() []string { return p.ties }

// RoutesByEnvelope says that the projection's router reads the event's
// envelope only (its stream, type, id, metadata, position), never its
// payload, as [StreamSuffix] does. A process that runs some of the
// projection's segments (app's run --segments and rebuild --segments) then
// passes over the events of the other segments without decoding their
// payloads, which are most of what it reads when several processes share
// the projection. The router is called twice more for such an event (with
// no payload and with the zero value of its type).
//
// Say it only of a router that does not read the payload: an event passed
// over on that word is not looked at again, and if its payload would have
// sent it to a document of this process, the document misses it. The
// engine checks what it can. It passes an event over only when the router
// names the same document for it with no payload and with the zero value of
// its type. And when an event this process keeps, which it decodes anyway,
// goes to another document with its payload than without, the process
// logs one error and decodes every event of the projection before routing
// it from then on. That check sees the events routed away from this
// process's documents, not those a payload would route to them from
// another process's segments.
func (p *Projection[S]) RoutesByEnvelope() *Projection[S] {
	if p.byEnvelope == nil {
		p.byEnvelope = &envelopeRouting{}
	}
	return p
}

func (p *Projection[S]) envelopeRouting() *envelopeRouting { return p.byEnvelope }

// Idempotency sets how the engine gets exactly-once effect for this
// projection (default [StreamRevision]).
func (p *Projection[S]) Idempotency(s Strategy) *Projection[S] {
	p.strat = s
	return p
}

// TiedStreams returns the stream-name prefixes the projection ties
// ([Projection.TieStreams]), so that a command line can check that it
// reads their streams.
func (p *Projection[S]) TiedStreams() []string { return slices.Clone(p.ties) }

// Strategy returns the projection's idempotency strategy.
func (p *Projection[S]) Strategy() Strategy {
	if p.strat.k == nil {
		return StreamRevision()
	}
	return p.strat
}

// OnFailure sets what the engine does with an event that fails permanently
// in this projection, instead of the engine's policy ([WithFailurePolicy]).
func (p *Projection[S]) OnFailure(policy FailurePolicy) *Projection[S] {
	p.onFailure, p.hasPolicy = policy, true
	return p
}

func (p *Projection[S]) failurePolicy() (FailurePolicy, bool) { return p.onFailure, p.hasPolicy }

// OnDelete sets what becomes of a document when the stream that feeds it is
// deleted (default [KeepDocument]). It applies under the revision gate
// ([StreamRevision]), where one stream feeds one document.
func (p *Projection[S]) OnDelete(d DeletionPolicy) *Projection[S] {
	p.onDelete = d
	return p
}

func (p *Projection[S]) deletionPolicy() DeletionPolicy { return p.onDelete }

func (p *Projection[S]) creates(e Event) bool {
	return e.StreamRevision == 0 || p.startsDocument(e)
}

// startsDocument reports whether e's handler was registered with [Create]:
// it makes the state anew, whatever the state before.
func (p *Projection[S]) startsDocument(e Event) bool {
	return p.handlers[reflect.TypeOf(e.Payload)].creates
}

func (p *Projection[S]) newState() any { return new(S) }

func (p *Projection[S]) handledTypes() []reflect.Type {
	out := make([]reflect.Type, 0, len(p.handlers))
	for t := range p.handlers {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b reflect.Type) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func (p *Projection[S]) routes() bool { return p.route != nil }

// copyTo returns a copy of p that keeps its documents in collection. The
// handlers are shared: they are not changed once the engine starts.
func (p *Projection[S]) copyTo(collection string) Definition {
	c := *p
	c.collection, c.isCopy = collection, true
	c.indexes = slices.Clone(p.indexes)
	c.ties = slices.Clone(p.ties)
	return &c
}

// copied reports whether p is a copy in a collection of its own ([Copy]).
func (p *Projection[S]) copied() bool { return p.isCopy }

// Copy returns a copy of projection p that keeps its documents in collection
// instead: the same name, handlers, strategy and failure policy. A rebuild
// fills such a copy while p's own collection keeps serving readers.
func Copy(p Definition, collection string) Definition { return p.copyTo(collection) }

// applyTo applies e to *state (a *S, nil for the zero state) and returns a *S.
func (p *Projection[S]) applyTo(state any, e Event) (any, error) {
	var s S
	if state != nil {
		s = *state.(*S)
	}
	next, err := p.Apply(s, e)
	return &next, err
}

// Index is a secondary index a projection asks for, for its readers
// ([Projection.WithIndex]): field names, ascending, or descending with a "-"
// prefix.
type Index = driver.Index
