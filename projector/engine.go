package projector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// Engine applies events to projections through the revision gate (or the
// projection's other idempotency strategy). It is safe for concurrent use:
// events may be handled, one by one ([Engine.Handle]) or in batches
// ([Engine.HandleBatch]), from many goroutines at once, in any order. Within
// one engine the events of a document take their turns, so one engine is
// exact even on a store whose conditional writes are not atomic (the
// embedded server).
type Engine struct {
	*core
	// stop, when set, ends the gate's waits for predecessors: a stopping
	// runner's view of the engine (see waitsEndAt).
	stop context.Context
	// clock, when set, sums the time of the store calls made through this
	// view: those of one traced event, for its span (see traced).
	clock *storeClock
	// unordered: a view for deliveries that come out of log order (a
	// persistent group's), which a batch does not fold from their streams'
	// histories: the engine's record of how far a stream was delivered
	// assumes log order (see known).
	unordered bool
	// rerun: a view handling an event again whose state the store
	// refused (see refusedStep), which does not do so a second time.
	rerun bool
}

// core is an engine's state, shared by its views.
type core struct {
	store       driver.Store
	registry    *Registry
	projections []Definition
	policy      retry.Policy
	logger      *slog.Logger
	queue       *queue
	onFailure   FailurePolicy
	parker      Parker
	readers     atomic.Pointer[streamReaders] // nil: none (see streamReader, streamHistory)
	noFolds     bool
	ran         atomic.Bool // a runner has run the engine: its stream reader is settled
	knownSize   int
	holds       *holds
	known       *known // the revisions stream folds wrote documents at
	ties        *lru.Cache[tieKey, tie]
	routedSeen  *lru.Cache[tieKey, tie] // see noteRouted
	// streamsSeen is, of the streams of the projections under RevisionMap,
	// how far the engine has seen them routed, and follows, of their events
	// routed (or otherwise not to be passed over), the last such revision
	// before each (noteSeen).
	streamsSeen *lru.Cache[tieKey, streamSeen]
	follows     *lru.Cache[followKey, int64]
	folded      atomic.Uint64
	locks       docLocks

	tracerProvider trace.TracerProvider // nil: the global one
	tracer         trace.Tracer
	eventSpans     int // the largest batch whose traced events each get a span

	// What the store can do, found once by NewEngine: nil when it cannot.
	guardedStore driver.GuardedStore
	inboxStore   driver.InboxStore
	batchStore   driver.BatchStore
	guardedBatch driver.GuardedBatchStore
	batching     bool // every projection's documents fold in batches
	spread       bool // events go to workers by document (partition.go)
	// streamDocs: by stream, the document its last event spread by
	// document went to (partitionKey), for its events not routed.
	streamDocs *lru.Cache[string, string]
	// policies is each projection's failure policy, its own or the engine's;
	// keepers its strategy: both as they were when the engine was made.
	policies map[string]FailurePolicy
	keepers  map[string]keeper
}

// Option configures an [Engine].
type Option func(*Engine)

// WithRetry sets the policy the gate waits with (default [retry.Default]).
func WithRetry(p retry.Policy) Option { return func(e *Engine) { e.policy = p } }

// WithLogger sets the logger (default: none). Waits are logged at debug level;
// an event that fails at error level (under [Hold], the one that holds its
// document); events skipped, parked or held behind another, and those that
// fail because an earlier event of their document failed, at warn level.
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.logger = l } }

// WithFailurePolicy sets what the gate does with an event that fails
// permanently (default [Block]).
func WithFailurePolicy(p FailurePolicy) Option { return func(e *Engine) { e.onFailure = p } }

// NewEngine returns an engine that keeps projections in store, decoding
// payloads with registry. It checks, without I/O, everything that can be
// known before the first event, with one error naming what is wrong: the
// projections ([Validate]), the retry and failure policies, and that store
// can keep each projection's strategy ([driver.GuardedStore] for those other
// than the revision gate, [driver.InboxStore] for the inbox). A store that
// cannot write in bulk ([driver.BatchStore]) gets its events one at a time.
// The engine takes each projection's strategy and failure policy as they
// are then: set them before.
func NewEngine(store driver.Store, registry *Registry, projections []Definition, opts ...Option) (*Engine, error) {
	e := &Engine{core: &core{
		store:       store,
		registry:    registry,
		projections: projections,
		policy:      retry.Default(),
		logger:      slog.New(slog.DiscardHandler),
		queue:       newQueue(),
		eventSpans:  DefaultEventSpans,
	}}
	for _, o := range opts {
		o(e)
	}
	if r := e.readers.Load(); r != nil {
		r.history, _ = r.streams.(StreamHistory)
	}
	e.tracer = tracerOf(e.tracerProvider)
	e.known = newKnown(cmp.Or(e.knownSize, defaultKnownDocuments))
	e.holds = newHolds()
	e.ties, _ = lru.New[tieKey, tie](max(cmp.Or(e.knownSize, defaultKnownDocuments), 1))
	e.routedSeen, _ = lru.New[tieKey, tie](max(cmp.Or(e.knownSize, defaultKnownDocuments), 1))
	e.streamsSeen, _ = lru.New[tieKey, streamSeen](max(cmp.Or(e.knownSize, defaultKnownDocuments), 1))
	e.streamDocs, _ = lru.New[string, string](max(cmp.Or(e.knownSize, defaultKnownDocuments), 1))
	e.follows, _ = lru.New[followKey, int64](max(cmp.Or(e.knownSize, defaultKnownDocuments), 1))
	if isNil(store) || registry == nil {
		return nil, errors.New("projector: engine needs a store and a registry")
	}
	if err := e.policy.Validate(); err != nil {
		return nil, fmt.Errorf("projector: %w", err)
	}
	if len(projections) == 0 {
		return nil, errors.New("projector: engine has no projections: give NewEngine at least one")
	}
	if e.knownSize < 0 {
		return nil, fmt.Errorf("projector: WithKnownDocuments(%d): want 0 (the default, %d) or more", e.knownSize, defaultKnownDocuments)
	}
	if e.eventSpans < 0 {
		return nil, fmt.Errorf("projector: WithEventSpans(%d): want 0 or more", e.eventSpans)
	}
	if err := Validate(registry, projections...); err != nil {
		return nil, err
	}
	for _, p := range projections {
		if len(p.tiedStreams()) > 0 && e.streamHistory() == nil {
			return nil, fmt.Errorf("projector: projection %q ties streams (TieStreams): the engine needs a stream reader that reads streams, a StreamHistory (WithStreamReader)", p.Name())
		}
	}
	if err := e.checkPolicies(); err != nil {
		return nil, err
	}
	e.guardedStore, _ = store.(driver.GuardedStore)
	e.inboxStore, _ = store.(driver.InboxStore)
	e.keepers = make(map[string]keeper, len(projections))
	for _, p := range projections {
		k := keeperOf(p)
		if err := k.needs(store); err != nil {
			return nil, fmt.Errorf("projector: projection %q: %w", p.Name(), err)
		}
		e.keepers[p.Name()] = k
	}
	e.batchStore, _ = store.(driver.BatchStore)
	e.guardedBatch, _ = store.(driver.GuardedBatchStore)
	e.batching = batchesWith(store, e.keepers)
	e.spread = spreadsByDocument(projections, e.keepers, e.batching)
	return e, nil
}

// checkPolicies checks the failure policies once and keeps each
// projection's.
func (e *Engine) checkPolicies() error {
	e.policies = make(map[string]FailurePolicy, len(e.projections))
	check := func(pol FailurePolicy) error {
		switch {
		case !pol.known():
			return fmt.Errorf("projector: unknown failure policy %d", int(pol))
		case pol == Park && e.parker == nil:
			return errors.New("projector: the park policy needs a place to record parked events: WithParker (mongostore.Store is one)")
		case pol == Hold && e.holder() == nil:
			return errors.New("projector: the hold policy needs a place to record held events that knows which documents are held: WithParker with a Holder (mongostore.Store is one)")
		}
		return nil
	}
	if err := check(e.onFailure); err != nil {
		return err
	}
	for _, p := range e.projections {
		pol, own := p.failurePolicy()
		if !own {
			pol = e.onFailure
		}
		if err := check(pol); err != nil {
			return err
		}
		if err := checkFailurePolicy(p, pol); err != nil {
			return err
		}
		e.policies[p.Name()] = pol
	}
	return nil
}

// checkFailurePolicy reports whether projection p can run under failure
// policy pol, the engine's (p's own wins): the rule [NewEngine] applies
// ([Check]).
func checkFailurePolicy(p Definition, pol FailurePolicy) error {
	if own, ok := p.failurePolicy(); ok {
		pol = own
	}
	if !pol.known() {
		return fmt.Errorf("projector: projection %q: unknown failure policy %d", p.Name(), int(pol))
	}
	return holdable(p, pol)
}

// policyOf returns the failure policy of projection p: its own, or the
// engine's.
func (e *Engine) policyOf(p Definition) FailurePolicy { return e.policies[p.Name()] }

// FailurePolicy returns the failure policy the engine applies to projection
// name: the projection's own ([Projection.OnFailure]), else the engine's;
// false when the engine does not run it.
func (e *Engine) FailurePolicy(name string) (FailurePolicy, bool) {
	p, ok := e.policies[name]
	return p, ok
}

// Prepare creates what the projections need in the store, once, before the
// first event: their indexes, and an inbox strategy's inbox (after checking
// that the server runs transactions). Events handled without it apply all
// the same, but readers miss the indexes and an inbox has no retention.
func (e *Engine) Prepare(ctx context.Context) error {
	for _, p := range e.projections {
		if err := e.keeperOf(p).prepare(ctx, e, p.Name()); err != nil {
			return err
		}
	}
	for _, p := range e.projections {
		if err := e.store.EnsureIndexes(ctx, p.Collection(), p.Indexes()); err != nil {
			return fmt.Errorf("projector: indexes of %q: %w", p.Name(), err)
		}
	}
	hp, ok := e.holder().(HoldPreparer)
	for _, p := range e.projections {
		if pol := e.policyOf(p); ok && (pol == Hold || pol == Park) { // a replay of parked events looks up a document's too
			if err := hp.PrepareHolds(ctx); err != nil {
				return fmt.Errorf("projector: the hold policy's records: %w", err)
			}
			break
		}
	}
	return nil
}

// inFlight returns how many events, summed over projections, are being
// handled now, queued or waiting included.
func (e *Engine) inFlight() int { return e.queue.inFlight() }

// Handle applies ev to every projection that wants it and returns one result
// per such projection. The error joins the errors of the failed results
// (skipped ones are not failures); the results are complete either way.
// ev.Payload is decoded from ev.Data with the registry when it is nil.
func (e *Engine) Handle(ctx context.Context, ev Event) (results []Result, err error) {
	if isDeletionRecord(ev) {
		// A node's record about a stream (a tombstone, its metadata): not
		// an event of the stream's, whose revision the gate would wait for.
		results = e.handleRecord(ctx, ev)
		return results, joinFailures(results)
	}
	defer func() { e.countAhead(ev, results) }()
	decoded, targets, unroutable, decodeErr := e.routed(ctx, ev)
	if len(unroutable) > 0 {
		defer func() {
			for _, u := range unroutable {
				results = append(results, e.tracedResult(ctx, target{p: u.p}, ev, e.unroutable(ctx, u, ev, decodeErr)))
			}
			err = joinFailures(results)
		}()
	}
	if len(targets) == 0 {
		return nil, nil
	}
	results = make([]Result, len(targets))
	// The decoding error is a failure in the projections with a handler for
	// the event's type only: the others pass over the event (its revision
	// too), as over any event of a type they do not handle.
	undecodable := func(t target) error {
		if decodeErr != nil && handlesType(t.p, decoded.Payload) {
			return decodeErr
		}
		return nil
	}
	blocked := func(t target) bool { return undecodable(t) != nil && e.policyOf(t.p) == Block }
	if decodeErr != nil {
		n := 0
		for i, t := range targets {
			if blocked(t) {
				results[i] = e.tracedResult(ctx, t, ev, e.fail(t, ev, permanent(decodeErr)))
				n++
			}
		}
		if n == len(targets) {
			return results, joinFailures(results)
		}
		// Skipped through the gate, undecoded; the zero payload (above)
		// says whether it is a creation event.
	}
	handle := func(t target) Result {
		return e.traced(ctx, t, decoded, func(ctx context.Context, e *Engine) Result {
			return e.handleOne(ctx, t, decoded, undecodable(t))
		})
	}
	if len(targets) == 1 {
		results[0] = handle(targets[0])
		return results, joinFailures(results)
	}
	var wg sync.WaitGroup
	for i, t := range targets {
		if blocked(t) {
			continue // failed above
		}
		wg.Go(func() { results[i] = handle(t) })
	}
	wg.Wait()
	return results, joinFailures(results)
}

// projection returns the engine's projection named name, nil when it has
// none (names are unique: NewEngine refuses two projections with one).
func (e *Engine) projection(name string) Definition {
	for _, p := range e.projections {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

// handlesType reports whether projection p has a handler for payloads of
// payload's type.
func handlesType(p Definition, payload any) bool {
	t := reflect.TypeOf(payload)
	return t != nil && slices.Contains(p.handledTypes(), t)
}

// routed decodes ev and routes it in each projection: the event decoded
// (the zero value of its type standing in for a payload that does not
// decode), the documents it feeds, the projections that want it but cannot
// route it, and the decoding error. Handle and a runner spreading events
// over its workers (partitionKey) route an event alike.
func (e *Engine) routed(ctx context.Context, ev Event) (decoded Event, targets []target, unroutable []unrouted, decodeErr error) {
	// Decoded first, so that a projection's IDFunc may read the payload.
	decoded, decodeErr = e.registry.Decode(ev)
	if decodeErr != nil {
		// The zero value of its type stands in for the payload, so that a
		// creation event is still known as one when the gate skips it.
		decoded = ev
		decoded.Payload, _ = e.registry.zero(ev)
		targets, unroutable = e.targetsUndecoded(ctx, ev, decoded)
		return decoded, targets, unroutable, decodeErr
	}
	targets, unroutable = e.targets(ctx, decoded)
	return decoded, targets, unroutable, nil
}

// targets returns the documents ev feeds, one per projection that wants it,
// and the projections that want it but cannot route it.
func (e *Engine) targets(ctx context.Context, ev Event) (targets []target, unroutable []unrouted) {
	for _, p := range e.projections {
		id, ok, err := e.route(ctx, p, ev)
		switch {
		case err != nil:
			unroutable = append(unroutable, unrouted{p, err})
		case ok:
			targets = append(targets, target{p, id})
			e.noteSeen(p, ev, false)
		default:
			e.noteSeen(p, ev, true)
		}
	}
	return targets, unroutable
}

// targetsUndecoded are the targets of ev, whose payload does not decode:
// zero is ev with the zero value of its type for a payload. A projection's
// document is the one its router gives without reading the payload (the
// same for no payload and for the zero one: the stream's, the metadata's).
// A router that answers otherwise reads the payload: for no payload it may
// say "not mine" (a router that switches on the payload's type would drop
// the event, silently), and for the zero one it may give a document made of
// empty fields. Its projection cannot route the event: the failure policy
// has it, without a document; unless the projection has no handler for the
// event's type, and the event is not its concern, or the stream is tied
// (TieStreams) to a document by an earlier event, which then has it.
func (e *Engine) targetsUndecoded(ctx context.Context, ev, zero Event) (targets []target, unroutable []unrouted) {
	for _, p := range e.projections {
		id, ok, err := e.targetUndecoded(ctx, p, ev, zero)
		switch {
		case err != nil:
			unroutable = append(unroutable, unrouted{p, err})
		case ok:
			targets = append(targets, target{p, id})
		}
	}
	return targets, unroutable
}

// targetUndecoded is the document of ev in p (ok), as targetsUndecoded
// finds it, or why p cannot route it (err).
func (e *Engine) targetUndecoded(ctx context.Context, p Definition, ev, zero Event) (id string, ok bool, err error) {
	id, ok, trusted, err := routeUndecoded(func(ev Event) (string, bool, error) { return e.route(ctx, p, ev) }, ev, zero)
	if !trusted && handlesType(p, zero.Payload) && ties(p, ev.StreamID) {
		// In a tied stream, the event fails on the document the stream
		// is tied to, where its policy has it (held there under Hold).
		if tied, wanted, tieErr := e.tieOf(ctx, p, ev); tieErr == nil && wanted {
			id, ok, trusted = tied, true, true
		}
	}
	switch {
	case trusted && (ok || byEnvelope(p)):
		return id, ok, nil
	case !handlesType(p, zero.Payload): // not its concern
		return "", false, nil
	case err != nil:
		return "", false, err
	case trusted:
		// "Not mine" with no payload and with the zero one, for a type
		// it handles: a router that reads the payload (a field it
		// requires) says so of any event it cannot read, and the event
		// would be dropped without a word; one that reads the envelope
		// only (RoutesByEnvelope) is taken at its word.
		return "", false, fmt.Errorf("%w: its router declines it without its payload, and may read the payload "+
			"(say RoutesByEnvelope of a router that reads the envelope only)", ErrUnroutable)
	}
	return "", false, fmt.Errorf("%w: its router reads the payload", ErrUnroutable)
}

// byEnvelope reports whether p's router reads the envelope only
// ([Projection.RoutesByEnvelope]), as far as the engine has seen.
func byEnvelope(p Definition) bool {
	r := p.envelopeRouting()
	return r != nil && !r.readsPayload.Load()
}

// routeUndecoded routes ev, whose payload does not decode, by route: with
// no payload and with zero (ev with the zero value of its type). The answer
// is trusted when both say the same without an error; err is the router's
// with the zero payload.
func routeUndecoded(route func(Event) (string, bool, error), ev, zero Event) (id string, ok, trusted bool, err error) {
	id, ok, err = route(zero)
	bare, bareOK, bareErr := route(ev)
	return id, ok, err == nil && bareErr == nil && ok == bareOK && id == bare, err
}

// unrouted is a projection that wants an event but cannot route it.
type unrouted struct {
	p   Definition
	err error
}

// unroutableCause is why an event cannot be routed: the router's error
// (routing), or, when its payload does not decode (undecodable), that.
func unroutableCause(routing, undecodable error) error {
	if undecodable == nil {
		return routing
	}
	// The payload is the cause: the router reads it, and without it names
	// no document. What the router's answer would mean for a decoded event
	// (its advice: tie the stream, route it) is beside the point, so it is
	// wrapped, not said.
	return undecodedRoute{undecodable, routing}
}

// undecodedRoute is an event that cannot be routed because its payload
// does not decode: it says the payload, and wraps both errors.
type undecodedRoute struct{ undecodable, routing error }

func (e undecodedRoute) Error() string {
	return e.undecodable.Error() + "; without it, its router names no document"
}

func (e undecodedRoute) Unwrap() []error { return []error{e.undecodable, e.routing} }

// unroutable fails ev in projection u.p, which cannot route it, under the
// projection's failure policy: [Failed] under [Block], [Skipped] under
// [Skip], and under [Park] recorded first (with no document), then
// [Parked] ([Duplicate] when it was recorded already: a delivery again).
// Nothing is written to any document.
func (e *Engine) unroutable(ctx context.Context, u unrouted, ev Event, undecodable error) Result {
	cause := unroutableCause(u.err, undecodable)
	fed := "" // the document the stream feeds, by its earlier events
	var readErr error
	if k := e.keeperOf(u.p); k.everyRevision() {
		feeds := ""
		if e.streamHistory() != nil {
			t, err := e.readTie(ctx, u.p, ev.StreamID, 0, ev.StreamRevision)
			if err == nil && t.doc != "" {
				fed = t.doc
				feeds = fmt.Sprintf(" (stream %q feeds document %q)", ev.StreamID, t.doc)
			}
			readErr = err
		}
		cause = fmt.Errorf("%w; under the %s a document fed by a stream needs every event of it routed to it%s: "+
			"the stream's later events find this one missing", cause, k, feeds)
	}
	t := target{p: u.p}
	if errors.Is(u.err, errTieRead) {
		// The event store did not answer: not the event's fault.
		return e.fail(t, ev, failure{err: u.err, wanted: -1, seen: -1, attempts: 1})
	}
	switch pol := e.policyOf(u.p); {
	case pol == Skip:
		return e.report(t, ev, permanent(cause), Skipped)
	case pol == Hold && fed != "":
		return e.holdUnroutable(ctx, target{p: u.p, id: fed}, ev, cause)
	case pol == Hold && readErr != nil && !errors.Is(readErr, ErrStreamDeleted):
		// Which document to hold is the stream's to say: not the event's
		// fault, tried again (as a store error is), never parked without it.
		return e.fail(t, ev, failure{err: fmt.Errorf("reading the stream of an event that cannot be routed, for the document to hold: %w", readErr),
			wanted: -1, seen: -1, attempts: 1})
	case pol == Park, pol == Hold: // no document to hold
		recorded, err := e.parker.Park(ctx, parkedOf(t, ev, cause, 1))
		switch {
		case err != nil:
			return e.fail(t, ev, failure{err: fmt.Errorf("parking the event: %w", err), wanted: -1, seen: -1, attempts: 1})
		case !recorded:
			// Delivered again: parked once, and counted once.
			return Result{Projection: u.p.Name(), Outcome: Duplicate}
		}
		return e.report(t, ev, permanent(cause), Parked)
	}
	return e.fail(t, ev, permanent(cause))
}

// applyStep is the projection's step for one event; it fails for an event
// that cannot be applied.
type applyStep func(state any) (any, error)

// applier returns the step of ev in p; undecodable, the decoding error of
// ev's payload, fails it.
func (e *Engine) applier(p Definition, ev Event, undecodable error) applyStep {
	return func(state any) (any, error) {
		if undecodable != nil {
			return nil, undecodable
		}
		return p.applyTo(state, ev)
	}
}

// step runs apply on state. A permanent failure under [Skip] or [Park]
// gives state itself (the zero state for nil) and the cause in skipped.
func (e *Engine) step(p Definition, state any, apply applyStep) (next any, skipped, err error) {
	next, err = apply(state)
	if err == nil {
		return next, nil, nil
	}
	if !e.movesPast(p) {
		return nil, nil, retry.Permanent(err)
	}
	if state == nil {
		state = p.newState()
	}
	return state, err, nil
}

// refusedStep is err, the failure of ev's handling in document t, where
// it is the store's refusal of the state ev's step gave
// ([driver.ErrUnencodable]: nothing was written) and t's policy moves past
// a failing step; nil otherwise. The handling is then done again, in the
// same turn of the document, with a step that fails with it (failing), so
// that the policy parks or skips ev as it does an event whose handler
// fails, and nothing else sees ev fail. Under [Hold] the refusal, a
// permanent failure, holds the document; under [Block] it stops there.
func (e *Engine) refusedStep(t target, err error) error {
	if e.rerun || !e.movesPast(t.p) || !errors.Is(err, driver.ErrUnencodable) || errors.Is(err, ErrPredecessorFailed) {
		return nil
	}
	return err
}

// onceRefused returns a view of e for handling an event again whose
// state the store refused: if it refuses the state that view writes
// (the document as stored, or a new one's zero state), the event fails.
func (e *Engine) onceRefused() *Engine {
	v := *e
	v.rerun = true
	return &v
}

// failing is a step that fails with err.
func failing(err error) applyStep {
	return func(any) (any, error) { return nil, err }
}

// waitsEndAt returns a view of e whose gate waits for predecessors end once
// stop is done: the events waiting then fail with [retry.ErrStopped] (see
// [stoppedWaiting]), while the store calls in progress go on under their
// own context. A runner handles its events through such a view and stops
// its workers' waits when it starts stopping: what they write finishes, and
// an event waiting for a predecessor that may never come is left for the
// next run.
func (e *Engine) waitsEndAt(stop context.Context) *Engine {
	v := *e
	v.stop = stop
	return &v
}

// outOfOrder returns a view of e for deliveries out of log order.
func (e *Engine) outOfOrder() *Engine {
	v := *e
	v.unordered = true
	return &v
}

// timedBy returns a view of e whose store calls add their time to clock.
func (e *Engine) timedBy(clock *storeClock) *Engine {
	if clock == e.clock {
		return e // untimed (tracing off), as most events are: no view to make
	}
	v := *e
	v.clock = clock
	return &v
}

// retryOptions are the options of the gate's waits: the stop of
// [Engine.waitsEndAt].
func (e *Engine) retryOptions() []retry.Option {
	if e.stop == nil {
		return nil
	}
	return []retry.Option{retry.WithStop(e.stop)}
}

// policyCounting is the engine's policy with a hook that counts the waits of
// one event, logs them and notes them on the span of ctx, then calls the
// user's hook.
func (e *Engine) policyCounting(ctx context.Context, t target, ev Event, waits *int) retry.Policy {
	pol := e.policy
	user := pol.OnRetry
	pol.OnRetry = func(a retry.Attempt) {
		*waits++
		traceWait(ctx, a)
		// Rate-limited: the first wait and then every power of two.
		if a.Number&(a.Number-1) == 0 {
			e.logger.Debug("gate waits", "projection", t.p.Name(), "document", t.id, "stream", ev.StreamID,
				"revision", ev.StreamRevision, "attempt", a.Number, "delay", a.Delay, "reason", a.Err)
		}
		if user != nil {
			user(a)
		}
	}
	return pol
}
