package projectortest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/retry"
)

// Delivery says how [Prove] delivers events: the faults a real subscription
// has.
type Delivery struct {
	// MaxTimes: each event is delivered 1 to MaxTimes times, the copies late
	// (default 3).
	MaxTimes int
	// Workers deliver at once, each taking the next delivery of one shuffled
	// list, so events of a stream arrive out of order (default 8; 1, and no
	// more, under a strategy that needs the log in order).
	Workers int
	// Shuffle delivers in a random order; otherwise in log order with the
	// late copies.
	Shuffle bool
	// SeparateEngines gives each worker its own engine, as competing
	// processes would have. It needs a store whose conditional writes are
	// atomic (MongoDB; not FerretDB 1.24, on which Prove refuses it).
	SeparateEngines bool
	// Seed makes the run repeatable; the same seed gives the same deliveries.
	Seed uint64
	// Retry is the gate's policy (default: 5 ms doubling to 100 ms, for up
	// to half a second). An event whose predecessor is not there in time goes
	// back to the end of the deliveries, as a subscription would redeliver it.
	Retry *retry.Policy
	// Options are passed to every engine (a failure policy, a parker). A
	// store that records parked and held events (mongostore's) is the
	// engines' parker unless they name another.
	Options []projector.Option
	// Metadata, if set, gives the metadata of each stream's events (the
	// write side's, such as the cart's client).
	Metadata func(stream string) []byte
}

// Report is what [Prove] did. Events counts every event of the log, also
// those the projection does not take (Applied and Duplicates count its
// own).
type Report struct {
	Events, Deliveries, Documents int
	// Outcomes of the deliveries, summed over the projection's documents:
	// Applied (skipped and parked ones too), Duplicates, Failed (held ones
	// too), and
	// Requeued, those whose predecessor did not come in time, delivered
	// again later as a subscription would (Deliveries counts them again).
	// Waits are the gate's, summed over deliveries.
	Applied, Duplicates, Failed, Requeued, Waits int
}

func (r Report) String() string {
	return fmt.Sprintf("%d events, %d deliveries, %d documents: %d applied, %d duplicates, %d failed, %d delivered again later, %d waits",
		r.Events, r.Deliveries, r.Documents, r.Applied, r.Duplicates, r.Failed, r.Requeued, r.Waits)
}

// ErrNotExactlyOnce: a document is not the fold of its events after
// duplicated, shuffled, concurrent delivery.
var ErrNotExactlyOnce = errors.New("projection is not exactly-once under redelivery")

// Prove runs projection p against store the way production delivers events:
// it appends streams (stream name -> payloads, in order; a payload may be a
// [projector.Event], an event as stored in an older form, as [Log.Append]
// takes it, so that the proof covers its upcasters: decoded in the reverse
// order first, each must decode as in the log's order, or the error wraps
// [ErrNotExactlyOnce] and says which is not a function of the stored event
// alone) to a [Log], delivers
// every event 1 to MaxTimes times, shuffled, from concurrent workers, through
// the engine, then compares every document with the pure fold of its events.
// The error wraps [ErrNotExactlyOnce] and names the documents that differ;
// when they differ only in what the store keeps of the fold's state (a time
// with nanoseconds, which BSON keeps to the millisecond), or depend on an
// order of their events that the projection's strategy does not keep
// (each is the fold of its events in the order they were applied, or the
// fold differs in another order the engine may apply them in: streams one
// after another or in turns, and, under a strategy that keeps no order, the
// events reversed or rotated), it wraps [ErrMismatch] instead, and says
// so. Floats are compared to within rounding (a relative 1e-9, or an
// absolute 1e-9 near zero): a sum in another order differs in its last
// bits.
//
// Use it in a projection's tests, on a real store (mongostore on a MongoDB or
// the embedded server), to prove the projection exactly-once in a few lines.
// The projection's collection must hold none of its documents yet: give
// each proof a fresh database (e2e's servers.Database(t)).
// The engines read the log's streams as they read an event store's
// (stream folds, and the ties of [projector.Projection.TieStreams]). The
// fold it compares with is pure: an event that does not decode fails the
// proof before any delivery, and one that fails its handler fails it
// whatever the projection's failure policy. Test skipping and parking
// with the binary's end-to-end kit (package e2e), or with an engine handed
// events in log order. Prove's engines read the streams it appended, so a
// projection that ties streams needs nothing more here; an engine of your
// own for such a projection needs a [projector.StreamHistory] that holds
// its events: a [Log] is in memory only, so append them to the e2e servers
// (e2e.Servers.Append returns them as delivered), whose event store's
// client, kurrent.Dial(servers.ESDBURI(), nil), is one. Ties read the
// streams: an event of a stream the history does not hold is taken for one
// of a stream that is not the projection's, and nothing is written. An
// event delivered before its predecessors has them folded from its stream
// (see [projector.StreamHistory]) under the revision gate and under
// [projector.RevisionMap], so the proof waits for none there; the other
// strategies take events in any order.
//
// It fails before any delivery, wrapping [ErrNotExactlyOnce] and saying
// why, where the fold is not a function of the events, which no delivery
// can match: folded twice, a document's state differs (a handler reads the
// clock or draws a random number; documents share a map or slice of their
// starting state), or the router, asked again, sends an event elsewhere.
//
// It fails before any delivery where the projection handles a type of
// which the streams hold events and its router sends none of them to a
// document: that handler would never be called, and the engine passes over
// those events, under a strategy other than the revision gate with nothing
// to say, so the documents would equal folds that route them the same way.
//
// A projection under [projector.GlobalPosition] takes its events in log
// order from one consumer, as its runner does: Prove delivers them so (one
// worker, unless Workers says otherwise; a late copy is then a duplicate,
// as it is in production), and refuses more than one worker, Shuffle or
// SeparateEngines for it, as a runner refuses them, rather than report as
// the projection's the differences that out-of-order delivery makes.
func Prove[S any](ctx context.Context, store driver.Store, registry *projector.Registry, p *projector.Projection[S], streams map[string][]any, d Delivery) (Report, error) {
	switch {
	case store == nil || reflect.ValueOf(store).Kind() == reflect.Pointer && reflect.ValueOf(store).IsNil():
		return Report{}, errors.New("projectortest: Prove needs a store (a mongostore.Store on the test's database), not nil")
	case registry == nil:
		return Report{}, errors.New("projectortest: Prove needs the event registry, not nil")
	case p == nil:
		return Report{}, errors.New("projectortest: Prove needs a projection, not nil")
	}
	d, err := withDefaults(d, p)
	if err != nil {
		return Report{}, err
	}
	if err := checkSeparateEngines(ctx, store, d); err != nil {
		return Report{}, err
	}
	policy := gatePolicy(d)
	r := rand.New(rand.NewPCG(d.Seed, d.Seed^0x9e3779b97f4a7c15))
	events, err := appendStreams(r, registry, streams, d.Metadata)
	if err != nil {
		return Report{}, err
	}
	if err := checkDecode(registry, events); err != nil {
		return Report{}, err
	}
	// The engines read the log's streams as they read the event store's:
	// stream folds, holes, and the ties of TieStreams.
	opts := []projector.Option{projector.WithRetry(policy), projector.WithStreamReader(newHistory(events))}
	if parker, ok := store.(projector.Parker); ok {
		// Where a projection's own Park or Hold records (mongostore's
		// store is one), unless d.Options says otherwise.
		opts = append(opts, projector.WithParker(parker))
	}
	opts = append(opts, d.Options...)
	newEngine := func() (*projector.Engine, error) {
		e, err := projector.NewEngine(store, registry, []projector.Definition{p}, opts...)
		if err == nil {
			err = e.Prepare(ctx)
		}
		return e, err
	}
	byDoc := p.Documents(events)
	if err := checkBefore(ctx, store, registry, p, events, byDoc); err != nil {
		return Report{}, err
	}
	// Delivered as a subscription delivers: undecoded, so that the engine
	// routes and decodes them as it does in production.
	for i := range events {
		events[i].Payload = nil
	}
	deliveries := Redeliver(r, events, d.MaxTimes)
	if d.Shuffle {
		deliveries = Shuffled(r, deliveries)
	}
	rep := Report{Events: len(events), Deliveries: len(deliveries), Documents: len(byDoc)}
	applied := map[string][]projector.Event{}
	// Under a strategy that applies each stream's events in their order,
	// the events a gap's fill applied are inferred (see noteApplied).
	var filled map[string][]projector.Event
	if p.Strategy().NeedsEveryRevision() {
		filled = byDoc
	}
	if err := deliver(ctx, &rep, applied, filled, deliveries, d, newEngine); err != nil {
		return rep, err
	}
	if err := checkFolds(ctx, store, p, byDoc, applied); err != nil {
		return rep, err
	}
	return rep, checkOrders(p, byDoc, rand.New(rand.NewPCG(d.Seed, 0x5eed)))
}

// checkBefore is what Prove checks before any delivery: a fold that is a
// function of its events, ties that stay, handlers that the router feeds,
// and a collection without the documents yet.
func checkBefore[S any](ctx context.Context, store driver.Store, registry *projector.Registry, p *projector.Projection[S],
	events []projector.Event, byDoc map[string][]projector.Event) error {
	if err := checkDeterministic(p, events, byDoc); err != nil {
		return err
	}
	if err := checkTiesStay(registry, p, events, byDoc); err != nil {
		return err
	}
	if err := checkHandledRouted(registry, p, p.TiedStreams(), events, byDoc); err != nil {
		return err
	}
	return checkNoDocuments(ctx, store, p, byDoc)
}

// checkTiesStay fails where a stream moves between documents under a tie
// ([projector.Projection.TieStreams]): its router sends one of its events
// to another document than the earlier ones, and an event it declines
// after that, of a type the projection handles, goes by the tie to the
// document of the stream's first routed event rather than to the one the
// stream last went to. A tie does not move: a meter moved to another
// substation would have its later readings counted at the old one, and
// the engine does the same (it says so in its log), so the folds agree and
// nothing else would fail. events are decoded, in log order.
func checkTiesStay(registry *projector.Registry, p projector.Definition, events []projector.Event, byDoc map[string][]projector.Event) error {
	placed := map[string]string{} // event id -> the document Documents gives it
	for id, evs := range byDoc {
		for _, ev := range evs {
			placed[ev.ID] = id
		}
	}
	handled := projector.HandledTypes(registry, p)
	type route struct {
		first, last string
		at          uint64 // where the stream last went to last
	}
	streams := map[string]*route{}
	for _, ev := range events {
		id, ok, err := p.Route(ev)
		s := streams[ev.StreamID]
		switch {
		case err != nil:
		case ok && s == nil:
			streams[ev.StreamID] = &route{first: id, last: id}
		case ok && id != s.last:
			s.last, s.at = id, ev.StreamRevision
		case !ok && s != nil && placed[ev.ID] == s.first && s.last != s.first && slices.Contains(handled, ev.Type):
			return fmt.Errorf("projection %s: stream %q moves from document %q to %q at revision %d (its router sends that event there), "+
				"but its revision %d (%s), which the router declines, goes by the stream's tie (TieStreams) to %q, the document of its first routed event: "+
				"a tie does not move; let each event of a stream that moves between documents name its document "+
				"(the write side can put the current one in the metadata, and the router read it there: RoutesByEnvelope)",
				p.Name(), ev.StreamID, s.first, s.last, s.at, ev.StreamRevision, ev.Type, s.first)
		}
	}
	return nil
}

// checkHandledRouted fails where the projection handles a type of which
// the streams hold events, none of which its router sends to a document:
// its handler is never called, and the engine passes over those events
// (under a strategy other than the revision gate, with nothing to say:
// nothing waits for a revision), so the proof, whose fold routes them as
// the engine does, would pass. Most often the events of that type do not
// carry what the router reads (an order's payment names no conference):
// the router can read it from the metadata, or, under RevisionMap, the
// stream can be tied to the document of its first event (TieStreams). A
// projection that ties streams (tied, its prefixes) is told instead that
// such events come before their stream's first routed event.
func checkHandledRouted(registry *projector.Registry, p projector.Definition, tied []string, events []projector.Event, byDoc map[string][]projector.Event) error {
	placed := map[string]bool{}
	for _, evs := range byDoc {
		for _, ev := range evs {
			placed[ev.ID] = true
		}
	}
	// By the type each event decodes to, as registered: an older form
	// counts as its type, and an event its upcaster dropped (which no
	// projection sees) counts as none.
	given, routed, away := map[string]int{}, map[string]int{}, map[string]int{}
	for _, ev := range events {
		name, ok := registry.Name(ev.Payload)
		if !ok {
			continue
		}
		given[name]++
		if placed[ev.ID] {
			routed[name]++
		} else if _, ok, err := p.Route(ev); err == nil && ok {
			away[name]++ // routed, but away from its stream's document
		}
	}
	for _, t := range projector.HandledTypes(registry, p) {
		switch {
		case given[t] == 0 || routed[t] > 0:
			continue
		case away[t] > 0:
			return fmt.Errorf("projection %s handles %s, and its router routes the %d %s events given, but each to another document "+
				"than its stream's earlier events: under %s a stream feeds one document, and the engine refuses them (ErrRoutedAway: "+
				"parked, held or failed under the policy); for a stream that moves between documents, let each event name its document "+
				"under a strategy that needs no order (HandledIDs)", p.Name(), t, away[t], t, p.Strategy())
		}
		if len(tied) > 0 {
			return fmt.Errorf("projection %s handles %s, but none of the %d %s events given reaches a document: its handler is never called; "+
				"it ties streams (TieStreams), which sends an event its router declines to the document of its stream's first routed event, "+
				"so these come before that event or in streams it does not tie: let the router route each tied stream's first event, "+
				"or find their document (in the payload or the metadata: RoutesByEnvelope)",
				p.Name(), t, given[t], t)
		}
		return fmt.Errorf("projection %s handles %s, but its router sends none of the %d %s events given to a document: "+
			"its handler is never called, and the engine passes over them; let the router find their document "+
			"(in the payload or the metadata: RoutesByEnvelope), or tie each stream to the document of its first routed event (TieStreams, under RevisionMap or HandledIDs)",
			p.Name(), t, given[t], t)
	}
	return nil
}

// checkOrders folds each document's events in orders its strategy lets
// the engine apply them in (see otherOrders), which the deliveries may not
// have met, and fails where a fold differs from the one in the log's order
// (floats to within rounding, see sameState) or fails: the projection
// depends on an order its strategy does not keep, and events delivered out
// of the log's order (a persistent group's competing consumers, a late
// copy, a replay of parked events) can leave a document so. The error wraps
// [ErrMismatch] and names each such document, where its folds differ.
func checkOrders[S any](p *projector.Projection[S], byDoc map[string][]projector.Event, r *rand.Rand) error {
	s := p.Strategy()
	if s.NeedsOrderedSource() {
		return nil // GlobalPosition: the log's order, from one consumer
	}
	var wrong []string
	for _, id := range slices.Sorted(maps.Keys(byDoc)) {
		evs := byDoc[id]
		want, err := p.Fold(evs...)
		if err != nil {
			continue // not reached: checkFolds fails on a fold that fails
		}
		for _, o := range otherOrders(evs, s.NeedsEveryRevision(), r) {
			got, err := p.Fold(o.events...)
			if err != nil {
				wrong = append(wrong, fmt.Sprintf("%s/%s: with %s, the fold fails: %v", p.Collection(), id, o.how, err))
				break
			}
			if !sameState(got, want) {
				d := firstDiff(reflect.ValueOf(got), reflect.ValueOf(want), "state")
				wrong = append(wrong, fmt.Sprintf("%s/%s: with %s, %v (in the log's order)", p.Collection(), id, o.how, d))
				break
			}
		}
	}
	if len(wrong) == 0 {
		return nil
	}
	return &mismatchError{fmt.Sprintf("%d of %d documents fold to another state in another order of their events that the engine may apply "+
		"(the strategy, %v, does not keep the log's order; events delivered out of it, to a persistent group's competing consumers, "+
		"late copies, a replay of parked events, can leave them so): %s:\n%s", len(wrong), len(byDoc), s, orderAdvice(s), strings.Join(wrong, "\n"))}
}

// mismatchError is an error that wraps [ErrMismatch] without its text: a
// document that differs from its fold in another order, where the one
// stored may equal the fold in the log's order.
type mismatchError struct{ msg string }

func (e *mismatchError) Error() string { return e.msg }
func (e *mismatchError) Unwrap() error { return ErrMismatch }

// reordering is a document's events in an order, and what that order is.
type reordering struct {
	events []projector.Event
	how    string
}

// otherOrders are evs in other orders the engine may apply them in. With
// several streams (each stream's events kept in their order): the streams
// one after another, the first to start first and the last to start
// first, taken in turns, an event of each, both ways, and randomOrders
// random interleavings of them (from r). Without perStream (a strategy
// that keeps no order: HandledIDs, Inbox, None), also the events in
// reverse, the last moved first, the first moved last, and randomOrders
// random orders. They sample the orders, they do not try them all.
func otherOrders(evs []projector.Event, perStream bool, r *rand.Rand) []reordering {
	var out []reordering
	streams, byStream := streamsOf(evs)
	if len(streams) > 1 {
		backward := slices.Clone(streams)
		slices.Reverse(backward)
		out = append(out,
			reordering{concat(byStream, streams), "its streams one after another, the first to start first"},
			reordering{concat(byStream, backward), "its streams one after another, the last to start first"},
			reordering{inTurns(byStream, streams), "its streams in turns, an event of each, the first to start first"},
			reordering{inTurns(byStream, backward), "its streams in turns, an event of each, the last to start first"})
		if perStream {
			for range randomOrders {
				out = append(out, reordering{interleaved(r, byStream, streams), "its streams interleaved at random"})
			}
		}
	}
	if !perStream && len(evs) > 1 {
		rev := slices.Clone(evs)
		slices.Reverse(rev)
		n := len(evs)
		out = append(out,
			reordering{rev, "its events in reverse"},
			reordering{append([]projector.Event{evs[n-1]}, evs[:n-1]...), "its last event first"},
			reordering{append(slices.Clone(evs[1:]), evs[0]), "its first event last"})
		for range randomOrders {
			shuffled := slices.Clone(evs)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			out = append(out, reordering{shuffled, "its events in a random order"})
		}
	}
	return out
}

// streamsOf returns the streams of evs, in the order they start, and each
// stream's events, in their order.
func streamsOf(evs []projector.Event) (streams []string, byStream map[string][]projector.Event) {
	byStream = map[string][]projector.Event{}
	for _, ev := range evs {
		if byStream[ev.StreamID] == nil {
			streams = append(streams, ev.StreamID)
		}
		byStream[ev.StreamID] = append(byStream[ev.StreamID], ev)
	}
	return streams, byStream
}

// randomOrders is how many random orders otherOrders adds to its fixed
// ones: each costs a fold of the document, in memory.
const randomOrders = 8

// interleaved is the events of streams interleaved at random, each
// stream's in their order: every interleaving equally likely (the next
// event is a stream's with a chance in proportion to the events it has
// left).
func interleaved(r *rand.Rand, byStream map[string][]projector.Event, streams []string) []projector.Event {
	next := make([]int, len(streams))
	left := 0
	for _, s := range streams {
		left += len(byStream[s])
	}
	out := make([]projector.Event, 0, left)
	for ; left > 0; left-- {
		pick := r.IntN(left)
		for i, s := range streams {
			rest := len(byStream[s]) - next[i]
			if pick < rest {
				out = append(out, byStream[s][next[i]])
				next[i]++
				break
			}
			pick -= rest
		}
	}
	return out
}

// concat is the events of streams, one stream after another.
func concat(byStream map[string][]projector.Event, streams []string) []projector.Event {
	var out []projector.Event
	for _, s := range streams {
		out = append(out, byStream[s]...)
	}
	return out
}

// inTurns is the events of streams taken in turns: the first event of each,
// then the second of each, and so on.
func inTurns(byStream map[string][]projector.Event, streams []string) []projector.Event {
	var out []projector.Event
	for i := 0; ; i++ {
		took := false
		for _, s := range streams {
			if i < len(byStream[s]) {
				out, took = append(out, byStream[s][i]), true
			}
		}
		if !took {
			return out
		}
	}
}

// checkSeparateEngines refuses engines of their own for the workers (d) on
// a store that says its conditional writes are not atomic (FerretDB):
// competing engines there overwrite each other's writes, and the proof
// would wait for events lost that way until it gave up.
func checkSeparateEngines(ctx context.Context, store driver.Store, d Delivery) error {
	s, ok := store.(interface {
		Capabilities(context.Context) (mongostore.Capabilities, error)
	})
	if !d.SeparateEngines || !ok {
		return nil
	}
	caps, err := s.Capabilities(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("projectortest: %w", err)
	case !caps.AtomicConditionalWrites:
		return fmt.Errorf("projectortest: SeparateEngines needs a store whose conditional writes are atomic, and those of %s are not: "+
			"engines of their own would overwrite each other's writes there; prove it with one engine, or on MongoDB", caps.Server)
	}
	return nil
}

// checkDecode fails on the first event of events whose payload does not
// decode (or that an upcaster fails): the pure fold would leave it out, as
// if the projection did not handle its type.
func checkDecode(registry *projector.Registry, events []projector.Event) error {
	for _, ev := range events {
		if ev.Payload != nil {
			continue
		}
		if _, err := registry.Decode(ev); err != nil {
			return fmt.Errorf("projectortest: Prove folds every event, and %w; test an event that does not decode with the engine and a Log", err)
		}
	}
	return nil
}

// withDefaults is d with the defaults of the settings it leaves at zero,
// for proving definition p: one worker for a strategy that needs the log
// in order, which refuses what would deliver out of it.
func withDefaults(d Delivery, p projector.Definition) (Delivery, error) {
	if d.MaxTimes < 1 {
		d.MaxTimes = 3
	}
	ordered := p.Strategy().NeedsOrderedSource()
	switch {
	case d.Workers < 1 && ordered:
		d.Workers = 1
	case d.Workers < 1:
		d.Workers = 8
	}
	if ordered && (d.Workers > 1 || d.Shuffle || d.SeparateEngines) {
		return d, fmt.Errorf("projectortest: projection %s uses the %s strategy, which takes the log in order from one consumer "+
			"(its runner refuses more): prove it with one worker (Delivery's default for it), without Shuffle or SeparateEngines, not %s",
			p.Name(), p.Strategy(), outOfOrder(d))
	}
	return d, nil
}

// outOfOrder names what d sets that delivers events out of the log's order.
func outOfOrder(d Delivery) string {
	var set []string
	if d.Workers > 1 {
		set = append(set, fmt.Sprintf("%d workers", d.Workers))
	}
	if d.Shuffle {
		set = append(set, "Shuffle")
	}
	if d.SeparateEngines {
		set = append(set, "SeparateEngines")
	}
	return strings.Join(set, ", ")
}

// gatePolicy is the gate's retry policy under d: its own, else 5 ms
// doubling to 100 ms, for up to half a second.
func gatePolicy(d Delivery) retry.Policy {
	if d.Retry != nil {
		return *d.Retry
	}
	policy := retry.Default()
	policy.InitialDelay, policy.MaxDelay, policy.MaxRetries, policy.MaxElapsed = 5*time.Millisecond, 100*time.Millisecond, -1, 500*time.Millisecond
	return policy
}

// appendStreams appends streams to a new [Log] in an order r draws,
// interleaving the streams as a global log does (each stream's events in
// order), with the metadata that metadata gives (nil: none), and returns
// the events appended, in log order.
func appendStreams(r *rand.Rand, registry *projector.Registry, streams map[string][]any, metadata func(stream string) []byte) ([]projector.Event, error) {
	names := make([]string, 0, len(streams))
	for s, payloads := range streams {
		if len(payloads) > 0 { // a stream of no events appends nothing
			names = append(names, s)
		}
	}
	sort.Strings(names)
	type at struct {
		stream string
		i      int
	}
	var order []at
	next := map[string]int{}
	for left := len(names); left > 0; {
		s := names[r.IntN(len(names))]
		if next[s] == len(streams[s]) {
			continue
		}
		order = append(order, at{s, next[s]})
		if next[s]++; next[s] == len(streams[s]) {
			left--
		}
	}
	metaOf := func(s string) []byte {
		if metadata == nil {
			return nil
		}
		return metadata(s)
	}
	// The events given as stored are decoded once in the reverse order
	// first, before the log decodes them in its order (checkUpcastersPure).
	backward := map[int]projector.Event{}
	for j, a := range slices.Backward(order) {
		if p, ok := streams[a.stream][a.i].(projector.Event); ok {
			ev, _ := encode(registry, p, metaOf(a.stream)) // as the log stores it
			ev.StreamID = a.stream
			backward[j], _ = registry.Decode(ev)
		}
	}
	log := NewLog(registry)
	events := make([]projector.Event, 0, len(order))
	for _, a := range order {
		evs, err := log.AppendWithMetadata(a.stream, metaOf(a.stream), streams[a.stream][a.i])
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, checkUpcastersPure(events, backward)
}

// checkUpcastersPure fails where an event given as stored decoded to
// another payload in the log's order (events) than in the reverse order,
// before it (backward, by place): an upcaster (or a type's UnmarshalJSON)
// that keeps something from the events it decoded before decodes an event
// one way in a process that read the log from its start, and another after
// a restart from a checkpoint, or in a rebuild.
func checkUpcastersPure(events []projector.Event, backward map[int]projector.Event) error {
	for j, ev := range events {
		b, ok := backward[j]
		if !ok || ev.Payload == nil || b.Payload == nil || sameState(b.Payload, ev.Payload) {
			continue // events that do not decode: checkDecode says so
		}
		return fmt.Errorf("projectortest: %w: event %s (%s of stream %q, revision %d) decodes to %+v in the log's order and to %+v "+
			"when the events after it are decoded first: its upcasters are not a function of the stored event alone "+
			"(they keep something from the events they decoded before), so a process that restarts from a checkpoint, or a rebuild, decodes it otherwise",
			ErrNotExactlyOnce, ev.ID, ev.Type, ev.StreamID, ev.StreamRevision, ev.Payload, b.Payload)
	}
	return nil
}

// checkNoDocuments fails when a document of byDoc exists already: on a
// store that has them, every delivery would be a duplicate and prove
// nothing.
func checkNoDocuments[S any](ctx context.Context, store driver.Store, p *projector.Projection[S], byDoc map[string][]projector.Event) error {
	for id := range byDoc {
		found, _, err := projector.ReadDocument(ctx, store, p, id, nil)
		if err != nil {
			return err
		}
		if found {
			return fmt.Errorf("projectortest: %s/%s exists already: Prove needs an empty collection", p.Collection(), id)
		}
	}
	return nil
}

// checkFolds compares every document of byDoc with the fold of its events;
// the error wraps [ErrNotExactlyOnce] and names those that differ.
func checkFolds[S any](ctx context.Context, store driver.Store, p *projector.Projection[S], byDoc, applied map[string][]projector.Event) error {
	var wrong []string
	notKept, reordered := 0, 0
	for id, evs := range byDoc {
		if err := CheckDocument(ctx, store, p, id, evs); err != nil {
			if !errors.Is(err, ErrMismatch) {
				return err
			}
			switch {
			case errors.Is(err, errNotKept):
				notKept++
			case foldOfAnotherOrder(ctx, store, p, id, evs, applied[id]):
				reordered++
			}
			wrong = append(wrong, err.Error())
		}
	}
	if len(wrong) == 0 {
		return nil
	}
	sort.Strings(wrong)
	switch {
	case notKept == len(wrong):
		// Applied exactly once; the state does not survive its store.
		return fmt.Errorf("%d of %d documents differ from the fold only in what the store keeps of a state, not under redelivery: %w",
			len(wrong), len(byDoc), errors.Join(ErrMismatch, errors.New(strings.Join(wrong, "\n"))))
	case reordered == len(wrong):
		return fmt.Errorf("%d of %d documents differ from the fold of their events in the log's order, and each is the fold in the order it "+
			"applied them, each once: the projection depends on the order of its events, which its strategy (%v) does not keep; %s: %w",
			len(wrong), len(byDoc), p.Strategy(), orderAdvice(p.Strategy()), errors.Join(ErrMismatch, errors.New(strings.Join(wrong, "\n"))))
	}
	return fmt.Errorf("%w: %d of %d documents differ from the fold:\n%s", ErrNotExactlyOnce, len(wrong), len(byDoc), strings.Join(wrong, "\n"))
}

// orderAdvice is what to do about a projection whose documents depend on
// the order of their events, which strategy s does not keep.
func orderAdvice(s projector.Strategy) string {
	if s == projector.RevisionMap() {
		return "it keeps each stream's order, not the order between a document's streams: make the steps independent of " +
			"that order (a field per stream, or the latest by the event's own time rather than by arrival; register a stream's " +
			"first event with On, not Create, which starts the document anew), or run the projection under GlobalPosition " +
			"with one ordered consumer"
	}
	return "make its steps independent of their order, or choose a strategy that keeps it (RevisionMap keeps each stream's)"
}

// foldOfAnotherOrder reports whether document id holds the fold of its
// events evs (in the log's order) in the order it applied them (applied,
// undecoded): each of them once, in another order.
func foldOfAnotherOrder[S any](ctx context.Context, store driver.Store, p *projector.Projection[S], id string, evs, applied []projector.Event) bool {
	if len(applied) != len(evs) {
		return false
	}
	byID := make(map[string]projector.Event, len(evs))
	for _, ev := range evs {
		byID[ev.ID] = ev
	}
	order := make([]projector.Event, 0, len(applied))
	for _, ev := range applied {
		decoded, ok := byID[ev.ID]
		if !ok {
			return false // applied twice, or not its event
		}
		delete(byID, ev.ID)
		order = append(order, decoded)
	}
	return CheckDocument(ctx, store, p, id, order) == nil
}

// deliver hands deliveries to d.Workers concurrent workers, each with an
// engine from newEngine (one shared by all, or each its own under
// d.SeparateEngines), until every one is handled or an event fails, and
// counts their outcomes in rep, and, by document, the events applied in
// applied; filled is each document's events under a strategy whose gap
// fills noteApplied infers (nil otherwise). An event whose predecessor is
// not there in time goes back to the end of the queue, as a subscription
// would deliver it again.
func deliver(ctx context.Context, rep *Report, applied, filled map[string][]projector.Event, deliveries []projector.Event, d Delivery, newEngine func() (*projector.Engine, error)) error {
	q := &deliveryQueue{queue: deliveries, maxRequeued: 100 * len(deliveries), rep: rep, applied: applied,
		streams: map[string]map[string][]projector.Event{}, seen: map[string]map[string]bool{}, ahead: map[string]map[string]bool{}}
	for doc, evs := range filled {
		_, q.streams[doc] = streamsOf(evs)
	}
	q.idle = sync.NewCond(&q.mu)
	var wg sync.WaitGroup
	var shared *projector.Engine
	for range d.Workers {
		e := shared
		if e == nil || d.SeparateEngines {
			var err error
			if e, err = newEngine(); err != nil {
				*rep = Report{} // nothing delivered
				return err
			}
			shared = e
		}
		wg.Go(func() { q.work(ctx, e) })
	}
	wg.Wait()
	rep.Deliveries += q.requeued
	rep.Requeued = q.requeued
	if q.firstErr != nil {
		return fmt.Errorf("projectortest: an event failed: %w", q.firstErr)
	}
	return nil
}

// deliveryQueue is the deliveries that [Prove]'s workers take, one at a
// time, and put back.
type deliveryQueue struct {
	mu   sync.Mutex
	idle *sync.Cond // on mu: a worker has handled a delivery
	// queue is the deliveries not taken yet.
	queue []projector.Event
	// busy counts the workers handling a delivery, which may put it back.
	busy int
	// requeued counts the deliveries put back, up to maxRequeued.
	requeued, maxRequeued int
	// firstErr is the first error of a delivery; the workers stop at it.
	firstErr error
	// rep counts the outcomes.
	rep *Report
	// applied is, by document, the events applied to it, in the order
	// they were applied (see noteApplied); streams, by document and
	// stream, the document's events in their order, under a strategy that
	// applies each stream's events in their order (empty otherwise); seen,
	// by document, the ids of the events in applied, and ahead those of
	// them applied before their own delivery.
	applied     map[string][]projector.Event
	streams     map[string]map[string][]projector.Event
	seen, ahead map[string]map[string]bool
}

// noteApplied records ev as applied to document doc. Under a strategy that
// applies each stream's events in their order (streams set), an event
// delivered before its stream's predecessors has them folded from its
// stream with it (a gap's fill): those the document had not been seen to
// apply were applied then, just before ev, and are recorded so; their own
// deliveries, later, count as applied (to the engine that filled the gap;
// another engine, under SeparateEngines, finds them duplicates) but apply
// nothing, and are not recorded again. An event applied twice otherwise is
// recorded twice.
func (q *deliveryQueue) noteApplied(doc string, ev projector.Event) {
	seen, ahead := q.seen[doc], q.ahead[doc]
	if seen == nil {
		seen, ahead = map[string]bool{}, map[string]bool{}
		q.seen[doc], q.ahead[doc] = seen, ahead
	}
	if ahead[ev.ID] {
		delete(ahead, ev.ID)
		return
	}
	for _, pred := range q.streams[doc][ev.StreamID] {
		if pred.StreamRevision >= ev.StreamRevision {
			break
		}
		if !seen[pred.ID] {
			q.applied[doc] = append(q.applied[doc], pred)
			seen[pred.ID], ahead[pred.ID] = true, true
		}
	}
	q.applied[doc] = append(q.applied[doc], ev)
	seen[ev.ID] = true
}

// work handles the deliveries it takes with engine e until none is left or
// one failed.
func (q *deliveryQueue) work(ctx context.Context, e *projector.Engine) {
	for {
		ev, ok := q.take()
		if !ok {
			if q.drained() {
				return
			}
			continue
		}
		q.mu.Lock()
		q.busy++
		q.mu.Unlock()
		rs, err := e.Handle(ctx, ev)
		q.handled(ctx, ev, rs, err)
	}
}

// take returns the next delivery; none when the queue is empty or a
// delivery failed.
func (q *deliveryQueue) take() (projector.Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 || q.firstErr != nil {
		return projector.Event{}, false
	}
	ev := q.queue[0]
	q.queue = q.queue[1:]
	return ev, true
}

// drained waits, with the queue empty, while other workers may still put
// deliveries back, and reports whether the work is over: the queue is still
// empty, or a delivery failed.
func (q *deliveryQueue) drained() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.queue) == 0 && q.busy > 0 && q.firstErr == nil {
		q.idle.Wait()
	}
	return len(q.queue) == 0 || q.firstErr != nil
}

// handled records the results rs and the error err of handling delivery ev:
// it counts their outcomes, puts ev back when its predecessor did not come
// in time, keeps the first error, and wakes the workers waiting.
func (q *deliveryQueue) handled(ctx context.Context, ev projector.Event, rs []projector.Result, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.busy--
	for _, res := range rs {
		q.rep.Waits += res.Waits
		switch {
		case q.mayRequeue(res):
			q.queue = append(q.queue, ev) // redelivered later, as a subscription would
			q.requeued++
			err = nil
		case res.Outcome == projector.Skipped, res.Outcome == projector.Parked:
			q.rep.Failed++
			if err == nil {
				// The pure fold applies it: the document would differ,
				// and the proof say "not exactly-once", which it is not.
				err = fmt.Errorf("projectortest: event %s (%s of stream %q, revision %d) was %v in document %q under the failure policy: %w; "+
					"Prove folds every event, so it proves a projection whose every event applies (test skipping and parking with the engine, or the e2e kit)",
					ev.ID, ev.Type, ev.StreamID, ev.StreamRevision, res.Outcome, res.Document, res.Err)
			}
		case res.Outcome == projector.Applied:
			q.rep.Applied++
			q.noteApplied(res.Document, ev)
		case res.Outcome == projector.Duplicate:
			q.rep.Duplicates++
		case res.Outcome == projector.Failed, res.Outcome == projector.Held:
			q.rep.Failed++ // held: it failed, and the document waits at it
			if errors.Is(res.Err, projector.ErrOutsideWindow) && err != nil {
				err = fmt.Errorf("%w (Prove delivers a late copy anywhere after the event, up to the end of the deliveries, so its "+
					"window of handled ids must hold every event a document gets in the proof: a larger window here, or "+
					"Delivery{MaxTimes: 1}; in production it needs to hold the deliveries that can be replayed at once)", err)
			}
		}
	}
	if err != nil && q.firstErr == nil && ctx.Err() == nil {
		q.firstErr = err
	}
	if ctx.Err() != nil && q.firstErr == nil {
		q.firstErr = ctx.Err()
	}
	q.idle.Broadcast()
}

// mayRequeue reports whether res is a delivery to put back: it failed
// because its predecessor did not come in time (is missing, or failed), and
// the queue has not put back too many already.
func (q *deliveryQueue) mayRequeue(res projector.Result) bool {
	return res.Outcome == projector.Failed && res.Err != nil && q.requeued < q.maxRequeued &&
		(errors.Is(res.Err, projector.ErrPredecessorMissing) || errors.Is(res.Err, projector.ErrPredecessorFailed))
}

// history is the log's streams as an event store has them, for the
// engines' stream reads ([projector.StreamHistory]): the events as stored,
// undecoded.
type history map[string][]projector.Event

// newHistory returns the history of events (in log order).
func newHistory(events []projector.Event) history {
	h := history{}
	for _, ev := range events {
		ev.Payload = nil
		h[ev.StreamID] = append(h[ev.StreamID], ev)
	}
	return h
}

// ReadStream implements [projector.StreamHistory].
func (h history) ReadStream(ctx context.Context, stream string, from uint64, each func(projector.Event) error) error {
	for _, ev := range h[stream] {
		if ev.StreamRevision < from {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := each(ev); errors.Is(err, projector.ErrStopRead) {
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

// FirstRevision implements [projector.StreamReader].
func (h history) FirstRevision(_ context.Context, stream string) (uint64, error) {
	if evs := h[stream]; len(evs) > 0 {
		return evs[0].StreamRevision, nil
	}
	return 0, projector.ErrStreamDeleted
}
