package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/revgate/projector/retry"
)

// Engine applies events to projections through the revision gate. It is safe
// for concurrent use: events may be handled from many goroutines at once, in
// any order.
type Engine struct {
	store       Store
	registry    *Registry
	projections []Definition
	policy      retry.Policy
	retryOpts   []retry.Option
	logger      *slog.Logger
	queue       *queue
	onFailure   FailurePolicy
	parker      Parker
	locks       docLocks
}

// Option configures an [Engine].
type Option func(*Engine)

// WithRetry sets the policy the gate waits with (default [retry.Default]).
func WithRetry(p retry.Policy) Option { return func(e *Engine) { e.policy = p } }

// WithLogger sets the logger (default: none). Waits are logged at debug level,
// failures at warn level.
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.logger = l } }

// WithFailurePolicy sets what the gate does with an event that fails
// permanently (default [Block]).
func WithFailurePolicy(p FailurePolicy) Option { return func(e *Engine) { e.onFailure = p } }

// WithRetryOptions passes options to every retry loop: a timer or clock for
// tests and simulations.
func WithRetryOptions(opts ...retry.Option) Option {
	return func(e *Engine) { e.retryOpts = append(e.retryOpts, opts...) }
}

// NewEngine returns an engine that keeps projections in store, decoding
// payloads with registry.
func NewEngine(store Store, registry *Registry, projections []Definition, opts ...Option) (*Engine, error) {
	e := &Engine{
		store:       store,
		registry:    registry,
		projections: projections,
		policy:      retry.Default(),
		logger:      slog.New(slog.DiscardHandler),
		queue:       newQueue(),
	}
	for _, o := range opts {
		o(e)
	}
	if store == nil || registry == nil {
		return nil, errors.New("projector: engine needs a store and a registry")
	}
	for _, pol := range append([]FailurePolicy{e.onFailure}, projectionPolicies(projections)...) {
		switch {
		case pol != Block && pol != Skip && pol != Park:
			return nil, fmt.Errorf("projector: unknown failure policy %d", int(pol))
		case pol == Park && e.parker == nil:
			return nil, errors.New("projector: the park policy needs a place to record parked events: WithParker (mongostore.Store is one)")
		}
	}
	if err := e.policy.Validate(); err != nil {
		return nil, fmt.Errorf("projector: %w", err)
	}
	if err := Validate(registry, projections...); err != nil {
		return nil, err
	}
	return e, nil
}

// Prepare checks that the store can keep the projections' strategies (the
// inbox needs transactions) and creates what they need: indexes, inboxes.
func (e *Engine) Prepare(ctx context.Context) error {
	if err := e.prepareStrategies(ctx); err != nil {
		return err
	}
	for _, p := range e.projections {
		if err := e.store.EnsureIndexes(ctx, p.Collection(), p.Indexes()); err != nil {
			return fmt.Errorf("projector: indexes of %q: %w", p.Name(), err)
		}
	}
	return nil
}

// Projections returns the projections the engine runs.
func (e *Engine) Projections() []Definition { return e.projections }

// InFlight returns how many events, summed over projections, are being
// handled now, queued or waiting included.
func (e *Engine) InFlight() int { return e.queue.inFlight() }

// Outcome is what handling an event did to one projection's document.
type Outcome int

const (
	// Applied: the event changed the document (or advanced its revision).
	Applied Outcome = iota + 1
	// Duplicate: the document had the event's effect already; nothing written.
	Duplicate
	// Failed: the event was not applied; Result.Err says why.
	Failed
	// Skipped: the event failed permanently (Result.Err says why) and, under
	// the [Skip] policy, the document's revision moved past it with its state
	// unchanged, so the stream's later events apply.
	Skipped
	// Parked: as Skipped, under the [Park] policy: the event was recorded
	// first.
	Parked
)

// FailurePolicy is what the gate does with an event that fails permanently:
// a payload that does not decode, a domain error, a projection that panics.
// Transient failures (a predecessor that does not arrive in time, a store that
// does not answer) are always [Failed]: nothing can be skipped safely then.
type FailurePolicy int

const (
	// Block leaves the document at the revision before the event and reports
	// the event [Failed]; the stream's later events for that document wait for
	// it, and fail in turn. Nothing is lost: someone must look.
	Block FailurePolicy = iota
	// Skip moves the document's revision past the event with its state
	// unchanged and reports it [Skipped], so the rest of the stream flows. The
	// document is then the fold of the stream without that event. A skipped
	// creation event creates the document with the zero state.
	Skip
	// Park is Skip that first records the event, the error and the attempts
	// with the engine's [Parker], so that it can be looked at and replayed
	// ([Engine.Replay]) once the projection is fixed. It reports [Parked].
	Park
)

// projectionPolicies returns the failure policies projections set themselves.
func projectionPolicies(defs []Definition) []FailurePolicy {
	var out []FailurePolicy
	for _, d := range defs {
		if p, ok := d.failurePolicy(); ok {
			out = append(out, p)
		}
	}
	return out
}

// policyOf returns the failure policy of projection p: its own, or the
// engine's.
func (e *Engine) policyOf(p Definition) FailurePolicy {
	if pol, ok := p.failurePolicy(); ok {
		return pol
	}
	return e.onFailure
}

func (p FailurePolicy) String() string {
	switch p {
	case Block:
		return "block"
	case Skip:
		return "skip"
	case Park:
		return "park"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(p))
}

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Failed:
		return "failed"
	case Skipped:
		return "skipped"
	case Parked:
		return "parked"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the outcome of one event in one projection.
type Result struct {
	Projection string
	Document   string
	Outcome    Outcome
	// Waits is how many times the gate waited with backoff for the document
	// to reach the event's predecessor (or for a write that matched nothing).
	Waits int
	// Err is set when Outcome is Failed, Skipped or Parked: an [*Error].
	Err error
}

// Handle applies ev to every projection that wants it and returns one result
// per such projection. The error joins the errors of the failed results
// (skipped ones are not failures); the results are complete either way. ev.Payload is decoded from ev.Data with the
// registry when it is nil.
func (e *Engine) Handle(ctx context.Context, ev Event) ([]Result, error) {
	type target struct {
		p  Definition
		id string
	}
	// Decoded first, so that a projection's IDFunc may read the payload.
	decoded, decodeErr := e.registry.Decode(ev)
	route := decoded
	if decodeErr != nil {
		route = ev
	}
	var targets []target
	for _, p := range e.projections {
		if id, ok := p.DocumentID(route); ok {
			targets = append(targets, target{p, id})
		}
	}
	if len(targets) == 0 {
		return nil, nil
	}
	results := make([]Result, len(targets))
	if decodeErr != nil {
		blocked := 0
		for i, t := range targets {
			if e.policyOf(t.p) == Block {
				results[i] = e.fail(t.p, t.id, ev, -1, -1, 0, retry.Permanent(decodeErr))
				blocked++
			}
		}
		if blocked == len(targets) {
			return results, joinFailures(results)
		}
	}
	if decodeErr != nil {
		// Skipped through the gate, undecoded. The zero value of its type
		// stands in for the payload, so that a creation event is still known
		// as one.
		decoded = ev
		decoded.Payload, _ = e.registry.zero(ev.Type)
	}
	if len(targets) == 1 {
		results[0] = e.gate(ctx, targets[0].p, targets[0].id, decoded, decodeErr)
	} else {
		var wg sync.WaitGroup
		for i, t := range targets {
			if decodeErr != nil && e.policyOf(t.p) == Block {
				continue // failed above
			}
			wg.Go(func() { results[i] = e.gate(ctx, t.p, t.id, decoded, decodeErr) })
		}
		wg.Wait()
	}
	return results, joinFailures(results)
}

func joinFailures(results []Result) error {
	var errs []error
	for _, r := range results {
		if r.Outcome == Failed {
			errs = append(errs, r.Err)
		}
	}
	return errors.Join(errs...)
}

// fail builds the failed result of ev in projection p, and logs it.
func (e *Engine) fail(p Definition, id string, ev Event, wanted, seen int64, attempts int, cause error) Result {
	err := &Error{
		Projection: p.Name(), Document: id, Stream: ev.StreamID,
		EventID: ev.ID, EventType: ev.Type, Revision: ev.StreamRevision,
		Wanted: wanted, Seen: seen, Attempts: attempts, Err: cause,
	}
	if !errors.Is(cause, context.Canceled) {
		e.logger.Warn("event failed", "projection", p.Name(), "document", id, "stream", ev.StreamID,
			"revision", ev.StreamRevision, "type", ev.Type, "retryable", err.Retryable(), "err", cause)
	}
	return Result{Projection: p.Name(), Document: id, Outcome: Failed, Err: err}
}
