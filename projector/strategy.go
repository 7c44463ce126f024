package projector

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"

	"github.com/revgate/projector/projector/driver"
)

// Strategy is how a projection gets exactly-once effect from at-least-once
// delivery. Pick it when the projection is defined ([Projection.Idempotency]);
// the default is [StreamRevision]. Strategies compare equal when they are the
// same strategy with the same settings.
type Strategy struct{ k keeper }

func (s Strategy) keeper() keeper {
	if s.k == nil {
		return streamRevision{}
	}
	return s.k
}

func (s Strategy) String() string { return s.keeper().String() }

// NeedsEveryRevision reports whether the strategy needs every event of a
// stream that feeds a document, in revision order: a source that leaves
// events out by type leaves holes it would wait for forever.
func (s Strategy) NeedsEveryRevision() bool { return s.keeper().everyRevision() }

// NeedsOrderedSource reports whether the strategy is valid only with one
// consumer seeing the log in order.
func (s Strategy) NeedsOrderedSource() bool { return s.keeper().orderedSource() }

// keeper is one idempotency strategy: how a projection's documents remember
// the events they hold. Each strategy is one type, in a file of its own
// (strategy_*.go), that says what it checks before a step, what it records
// with the change, and what it needs of the store; it embeds the kind of
// documents it keeps, which says how the engine reads and writes them:
// [gated] documents (one revision each, the revision gate of gate.go) or
// [versioned] ones (a [driver.Meta], every write conditional on its
// version; guarded.go). Adding a strategy is adding such a file and its
// constructor; one that remembers something new about the events it has
// applied also adds it to [driver.Meta] and to the stores' encoding of it.
type keeper interface {
	String() string
	// check decides, before a step, what to do with ev given the document as
	// read (creates: ev starts its document). An error fails the event; with
	// the verdict refuse, the failure policy says whether the document
	// moves past it.
	check(d stored, ev Event, creates bool) (verdict, error)
	// record returns what the document holds of the events it has applied
	// once ev's change is written.
	record(d stored, ev Event) stored
	// needs reports, without I/O, what the strategy cannot do with store.
	needs(store driver.Store) error
	// valid reports, without I/O, a setting of the strategy's own that
	// cannot work ([Validate] asks).
	valid() error
	// everyRevision: it needs every event of a feeding stream, in order;
	// orderedSource: it needs one consumer reading the log in order.
	everyRevision() bool
	orderedSource() bool
	documents
}

// documents is how the engine handles, replays and batches the events of a
// kind of document: [gated] or [versioned]. Both read the document, ask the
// strategy's check, apply, and write what its record says, each attempt
// within what the strategy wraps it in.
type documents interface {
	// handle applies ev to document t.
	handle(ctx context.Context, e *Engine, t target, ev Event, undecodable error) Result
	// replayOnce is one attempt of a replay of parked event ev (record pe)
	// on document t. wrote is what this replay's last attempt wrote, if any
	// (the token it gave the document): that attempt took if the document
	// has it. before reports that an earlier replay of pe wrote the
	// document, and this one wrote nothing.
	replayOnce(ctx context.Context, e *Engine, t target, ev Event, pe ParkedEvent, wrote *string) (before bool, err error)
	// read reads document id for a reader or a test.
	read(ctx context.Context, store driver.Store, collection, id string, state any) (found bool, revision int64, err error)
	// prepare creates, once, what the strategy needs in the store.
	prepare(ctx context.Context, e *Engine, projection string) error
	// within runs one read-decide-write attempt of ev on document t: the
	// inbox runs it in a transaction with its record of the event.
	within(ctx context.Context, e *Engine, t target, ev Event, attempt func(context.Context) (step, error)) (step, error)
}

// tally is what a strategy knows of a document's applied events, folded
// over many events in memory (a batch): what check and record would say
// and give one event at a time, at a cost per event that does not grow with
// what the document remembers (a window of handled ids, the revisions of
// many streams). It owns its copy of the meta.
type tally interface {
	check(ev Event, creates bool) (verdict, error)
	record(ev Event)
	meta() driver.Meta
}

// tallier is a strategy with a tally of its own; tallyOf gives the others
// one that calls check and record.
type tallier interface {
	tally(d stored) tally
}

// tallyOf starts k's tally of document d as read.
func tallyOf(k keeper, d stored) tally {
	if t, ok := k.(tallier); ok {
		return t.tally(d)
	}
	return &plainTally{k: k, d: d}
}

// plainTally folds with the strategy's check and record: for strategies
// whose record costs the same whatever the document holds.
type plainTally struct {
	k keeper
	d stored
}

func (t *plainTally) check(ev Event, creates bool) (verdict, error) {
	return t.k.check(t.d, ev, creates)
}

func (t *plainTally) record(ev Event) {
	t.d = t.k.record(stored{found: true, meta: t.d.meta}, ev)
	t.d.found = true
}

func (t *plainTally) meta() driver.Meta { return t.d.meta }

// stored is a document as the engine read it: whether it exists, and what
// it holds of the events it has applied: a revision ([gated]) or a meta
// ([versioned]).
type stored struct {
	found  bool
	rev    uint64
	stream string // the stream that feeds it ([gated]; "" when unknown)
	meta   driver.Meta
}

// step is what one read-decide-write attempt did: its outcome, and the
// permanent failure that the failure policy let the document move past.
type step struct {
	outcome Outcome
	skipped error
}

// target is a document of a projection.
type target struct {
	p  Definition
	id string
}

func (t target) key() docKey { return docKey{t.p.Collection(), t.id} }

// keeperOf returns the strategy of p, as p says it now.
func keeperOf(p Definition) keeper { return p.Strategy().keeper() }

// keeperOf returns the strategy of p, as it was when the engine was made.
func (e *Engine) keeperOf(p Definition) keeper { return e.keepers[p.Name()] }

// ErrOutsideWindow: under [HandledIDs], an event older than the window of
// handled ids and not in it: maybe applied, maybe not; reported, not applied.
var ErrOutsideWindow = errors.New("event is older than the window of handled ids")

// ErrNoTransactions: the inbox strategy on a server without transactions.
var ErrNoTransactions = errors.New("the server has no multi-document transactions")

// ReadDocument reads document id of projection p from store into state (a
// pointer to p's state type; nil reads only whether it is there), the way
// p's strategy keeps it. revision is the stream revision of the last event
// applied to a document under the revision gate, and -1 under the other
// strategies, whose documents have none.
// After a rebuild has switched readers to a new collection, it reads that
// one, on a store that records the switch (mongostore): p's own
// collection is the old one. A copy of p in a collection of its own
// ([Copy]) reads that collection. A document whose stream was deleted,
// kept under [MarkDeleted], is found, with its state as it was: the store
// marks it (mongostore's field _deleted), for readers that query it.
func ReadDocument(ctx context.Context, store driver.Store, p Definition, id string, state any) (found bool, revision int64, err error) {
	if isNil(store) || isNil(p) {
		return false, -1, errors.New("projector: ReadDocument needs a store and a projection, not nil")
	}
	collection := p.Collection()
	if !p.copied() {
		if collection, err = activeCollection(ctx, store, p.Name(), collection); err != nil {
			return false, -1, err
		}
	}
	return keeperOf(p).read(ctx, store, collection, id, state)
}

// activeCollections is a store that records which collection readers of a
// projection use once a rebuild has switched them (mongostore's).
type activeCollections interface {
	ActiveCollection(ctx context.Context, projection, def string) (string, error)
}

// activeCollection is the collection readers of projection use, def its
// own, on store (any value: a store that does not record rebuilds keeps
// def). projection may be empty: the projection whose own collection is def.
func activeCollection(ctx context.Context, store any, projection, def string) (string, error) {
	a, ok := store.(activeCollections)
	if !ok {
		return def, nil
	}
	return a.ActiveCollection(ctx, projection, def)
}

// docLocks serializes the read-apply-write of a versioned document within
// one engine (the version check makes it safe across processes, on a store
// with atomic conditional writes).
type docLocks struct {
	mu    sync.Mutex
	locks map[docKey]*docLock
}

type docLock struct {
	sync.Mutex
	users int
}

func (l *docLocks) lock(k docKey) func() {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[docKey]*docLock{}
	}
	d := l.locks[k]
	if d == nil {
		d = &docLock{}
		l.locks[k] = d
	}
	d.users++
	l.mu.Unlock()
	d.Lock()
	return func() {
		d.Unlock()
		l.mu.Lock()
		if d.users--; d.users == 0 {
			delete(l.locks, k)
		}
		l.mu.Unlock()
	}
}

// streamKey makes a stream name usable as a field name: no dots, no dollar
// signs, no percent signs left unescaped.
func streamKey(stream string) string {
	if !strings.ContainsAny(stream, "%.$") {
		return stream
	}
	return streamKeys.Replace(stream)
}

var streamKeys = strings.NewReplacer("%", "%25", ".", "%2E", "$", "%24")

// isNil reports whether v is nil, or a nil pointer, map, func, channel or
// slice in an interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
