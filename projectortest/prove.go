package projectortest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

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
	// list, so events of a stream arrive out of order (default 8).
	Workers int
	// Shuffle delivers in a random order; otherwise in log order with the
	// late copies.
	Shuffle bool
	// SeparateEngines gives each worker its own engine, as competing
	// processes would have. It needs a store whose conditional writes are
	// atomic (MongoDB; not FerretDB 1.24).
	SeparateEngines bool
	// Seed makes the run repeatable; the same seed gives the same deliveries.
	Seed uint64
	// Retry is the gate's policy (default: 5 ms doubling to 100 ms, for up
	// to half a second). An event whose predecessor is not there in time goes
	// back to the end of the deliveries, as a subscription would redeliver it.
	Retry *retry.Policy
	// Options are passed to every engine (a failure policy, a parker).
	Options []projector.Option
	// Metadata, if set, gives the metadata of each stream's events (the
	// write side's, such as the cart's client).
	Metadata func(stream string) []byte
}

// Report is what [Prove] did.
type Report struct {
	Events, Deliveries, Documents int
	// Outcomes of the deliveries, summed over the projection's documents:
	// Applied (skipped and parked ones too), Duplicates, Failed, and
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
// it appends streams (stream name -> payloads, in order) to a [Log], delivers
// every event 1 to MaxTimes times, shuffled, from concurrent workers, through
// the engine, then compares every document with the pure fold of its events.
// The error wraps [ErrNotExactlyOnce] and names the documents that differ.
//
// Use it in a projection's tests, on a real store (mongostore on a MongoDB or
// the embedded server), to prove the projection exactly-once in a few lines.
func Prove[S any](ctx context.Context, store driver.Store, registry *projector.Registry, p *projector.Projection[S], streams map[string][]any, d Delivery) (Report, error) {
	if d.MaxTimes < 1 {
		d.MaxTimes = 3
	}
	if d.Workers < 1 {
		d.Workers = 8
	}
	policy := retry.Default()
	policy.InitialDelay, policy.MaxDelay, policy.MaxRetries, policy.MaxElapsed = 5*time.Millisecond, 100*time.Millisecond, -1, 500*time.Millisecond
	if d.Retry != nil {
		policy = *d.Retry
	}
	newEngine := func() (*projector.Engine, error) {
		e, err := projector.NewEngine(store, registry, []projector.Definition{p}, append([]projector.Option{projector.WithRetry(policy)}, d.Options...)...)
		if err == nil {
			err = e.Prepare(ctx)
		}
		return e, err
	}

	// Append in a fixed order, interleaving the streams as a global log does.
	r := rand.New(rand.NewPCG(d.Seed, d.Seed^0x9e3779b97f4a7c15))
	names := make([]string, 0, len(streams))
	for s := range streams {
		names = append(names, s)
	}
	sort.Strings(names)
	log := NewLog(registry)
	next := map[string]int{}
	var events []projector.Event
	for left := len(names); left > 0; {
		s := names[r.IntN(len(names))]
		if next[s] == len(streams[s]) {
			continue
		}
		var meta []byte
		if d.Metadata != nil {
			meta = d.Metadata(s)
		}
		evs, err := log.AppendWithMetadata(s, meta, streams[s][next[s]])
		if err != nil {
			return Report{}, err
		}
		events = append(events, evs...)
		if next[s]++; next[s] == len(streams[s]) {
			left--
		}
	}
	byDoc := map[string][]projector.Event{}
	for _, ev := range events {
		if id, ok := p.DocumentID(ev); ok {
			byDoc[id] = append(byDoc[id], ev)
		}
	}

	// The documents must not exist yet: on a store that has them already,
	// every delivery would be a duplicate and prove nothing.
	for id := range byDoc {
		found, _, err := projector.ReadDocument(ctx, store, p, id, nil)
		if err != nil {
			return Report{}, err
		}
		if found {
			return Report{}, fmt.Errorf("projectortest: %s/%s exists already: Prove needs an empty collection", p.Collection(), id)
		}
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
	var mu sync.Mutex
	var firstErr error
	queue := deliveries
	requeued := 0
	take := func() (projector.Event, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(queue) == 0 || firstErr != nil {
			return projector.Event{}, false
		}
		ev := queue[0]
		queue = queue[1:]
		return ev, true
	}
	var wg sync.WaitGroup
	var shared *projector.Engine
	busy := 0
	idle := sync.NewCond(&mu)
	for range d.Workers {
		e := shared
		if e == nil || d.SeparateEngines {
			var err error
			if e, err = newEngine(); err != nil {
				return rep, err
			}
			shared = e
		}
		wg.Go(func() {
			for {
				ev, ok := take()
				if !ok {
					// Others may still put events back: wait for them.
					mu.Lock()
					for len(queue) == 0 && busy > 0 && firstErr == nil {
						idle.Wait()
					}
					done := len(queue) == 0 || firstErr != nil
					mu.Unlock()
					if done {
						return
					}
					continue
				}
				mu.Lock()
				busy++
				mu.Unlock()
				rs, err := e.Handle(ctx, ev)
				mu.Lock()
				busy--
				for _, res := range rs {
					rep.Waits += res.Waits
					switch {
					case res.Outcome == projector.Failed && res.Err != nil && requeued < 100*len(deliveries) &&
						(errors.Is(res.Err, projector.ErrPredecessorMissing) || errors.Is(res.Err, projector.ErrPredecessorFailed)):
						queue = append(queue, ev) // redelivered later, as a subscription would
						requeued++
						err = nil
					case res.Outcome == projector.Applied, res.Outcome == projector.Skipped, res.Outcome == projector.Parked:
						rep.Applied++
					case res.Outcome == projector.Duplicate:
						rep.Duplicates++
					case res.Outcome == projector.Failed:
						rep.Failed++
					}
				}
				if err != nil && firstErr == nil && ctx.Err() == nil {
					firstErr = err
				}
				if ctx.Err() != nil && firstErr == nil {
					firstErr = ctx.Err()
				}
				idle.Broadcast()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rep.Deliveries += requeued
	rep.Requeued = requeued
	if firstErr != nil {
		return rep, fmt.Errorf("projectortest: an event failed: %w", firstErr)
	}

	var wrong []string
	for id, evs := range byDoc {
		if err := CheckDocument(ctx, store, p, id, evs); err != nil {
			if !errors.Is(err, ErrMismatch) {
				return rep, err
			}
			wrong = append(wrong, err.Error())
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		return rep, fmt.Errorf("%w: %d of %d documents differ from the fold:\n%s", ErrNotExactlyOnce, len(wrong), len(byDoc), strings.Join(wrong, "\n"))
	}
	return rep, nil
}
