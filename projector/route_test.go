package projector_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// byMetadata routes cart events to the document their metadata names ("doc"
// field), under the events' own cart stream's revision map; an event with no
// such field is the projection's but cannot be routed. A router that meets
// the word "panic" there panics.
func byMetadata() *projector.Projection[cart.ClientSummary] {
	p := projector.NewRouted[cart.ClientSummary]("by_metadata", func(ev projector.Event) (string, bool, error) {
		if !strings.HasPrefix(ev.StreamID, cart.StreamPrefix) {
			return "", false, nil
		}
		doc, ok := strings.CutPrefix(string(ev.Metadata), "doc=")
		switch {
		case !ok:
			return "", true, errors.New("no doc= in the metadata")
		case doc == "panic":
			panic("the router met a panic")
		}
		return doc, true, nil
	}).Idempotency(projector.HandledIDs(100))
	projector.On(p, func(s cart.ClientSummary, e cart.ShoppingCartOpened) (cart.ClientSummary, error) {
		s.CartsOpened++
		return s, nil
	})
	return p
}

// An event that a projection wants but cannot route (its router says so,
// returns an empty id, or panics) fails permanently in that projection,
// under its failure policy, on the event-at-a-time path and the batch path
// alike: blocked ([projector.Failed]), skipped, or parked with no document
// and replayed into its document once the router can route it. It is never
// left alone as unwanted, and nothing panics out of the engine.
func TestRoute_an_event_the_projection_cannot_route_goes_through_the_failure_policy(t *testing.T) {
	reg := cart.Registry()
	position := uint64(0)
	opened := func(id, meta string) projector.Event {
		position += 10
		name, data, err := reg.Encode(cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "c", OpenedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		return projector.Event{ID: "id-" + id, Type: name, StreamID: cart.StreamID(id), Position: position, Data: data, Metadata: []byte(meta), Created: t0}
	}
	good, lost, empty, panics := opened("a", "doc=d1"), opened("b", "nothing"), opened("c", "doc="), opened("d", "doc=panic")
	next := opened("e", "doc=d1")
	wantCause := map[string]string{lost.ID: "no doc= in the metadata", empty.ID: "empty document id", panics.ID: "the router panicked"}
	quick := retry.Default()
	quick.MaxRetries = 1

	for _, policy := range []projector.FailurePolicy{projector.Block, projector.Skip, projector.Park} {
		for _, batched := range []bool{false, true} {
			name := policy.String()
			if batched {
				name += "_batched"
			}
			t.Run(name, func(t *testing.T) {
				s := newStore(t)
				e, err := projector.NewEngine(s, reg, []projector.Definition{byMetadata(), cart.NewDetailsProjection()},
					projector.WithRetry(quick), projector.WithFailurePolicy(policy), projector.WithParker(s))
				if err != nil {
					t.Fatal(err)
				}
				events := []projector.Event{good, lost, empty, panics, next}
				var results [][]projector.Result
				if batched {
					results = e.HandleBatch(context.Background(), events)
				} else {
					for _, ev := range events {
						rs, _ := e.Handle(context.Background(), ev)
						results = append(results, rs)
					}
				}
				want := map[projector.FailurePolicy]projector.Outcome{projector.Block: projector.Failed, projector.Skip: projector.Skipped, projector.Park: projector.Parked}[policy]
				for i, ev := range events {
					var mine *projector.Result
					for k := range results[i] {
						if results[i][k].Projection == "by_metadata" {
							mine = &results[i][k]
						}
					}
					cause, bad := wantCause[ev.ID]
					switch {
					case mine == nil && batched && policy == projector.Block && i > 1:
						// The batch leaves alone what follows a failure.
						if len(results[i]) != 1 || !errors.Is(results[i][0].Err, projector.ErrNotHandled) {
							t.Errorf("event %d after the failure: %+v, want not handled", i, results[i])
						}
					case mine == nil:
						t.Errorf("event %d: no result of by_metadata in %+v", i, results[i])
					case !bad && mine.Outcome != projector.Applied:
						t.Errorf("event %d: %v %v, want applied", i, mine.Outcome, mine.Err)
					case bad && (mine.Outcome != want || !errors.Is(mine.Err, projector.ErrUnroutable) || !strings.Contains(mine.Err.Error(), cause)):
						t.Errorf("event %d: %v %v, want %v with %q", i, mine.Outcome, mine.Err, want, cause)
					case bad && mine.Document != "":
						t.Errorf("event %d: unroutable, yet document %q", i, mine.Document)
					}
					if policy == projector.Block && !batched && bad {
						var perr *projector.Error
						if !errors.As(mine.Err, &perr) || perr.Retryable() {
							t.Errorf("event %d: a routing failure must be permanent: %v", i, mine.Err)
						}
					}
				}
				var doc cart.ClientSummary
				opens := 2
				if batched && policy == projector.Block {
					opens = 1 // the last one was left alone
				}
				if _, _, err := projector.ReadDocument(context.Background(), s, byMetadata(), "d1", &doc); err != nil || doc.CartsOpened != opens {
					t.Fatalf("d1: %+v (%v), want %d routable openings", doc, err, opens)
				}
				parked, err := s.Parked(context.Background(), "by_metadata")
				if err != nil {
					t.Fatal(err)
				}
				if policy != projector.Park {
					if len(parked) != 0 {
						t.Fatalf("%d parked under %v", len(parked), policy)
					}
					return
				}
				if len(parked) != 3 {
					t.Fatalf("parked %+v, want the 3 unroutable events", parked)
				}
				// Replayed by an engine whose router now routes them all to d2.
				fixed := projector.NewRouted[cart.ClientSummary]("by_metadata", func(ev projector.Event) (string, bool, error) {
					return "d2", strings.HasPrefix(ev.StreamID, cart.StreamPrefix), nil
				}).Idempotency(projector.HandledIDs(100))
				projector.On(fixed, func(s cart.ClientSummary, e cart.ShoppingCartOpened) (cart.ClientSummary, error) {
					s.CartsOpened++
					return s, nil
				})
				re, err := projector.NewEngine(s, reg, []projector.Definition{fixed}, projector.WithRetry(quick))
				if err != nil {
					t.Fatal(err)
				}
				for _, pe := range parked {
					if pe.Document != "" {
						t.Errorf("parked %s with document %q", pe.ID, pe.Document)
					}
					if r := re.Replay(context.Background(), pe); r.Outcome != projector.Applied || r.Document != "d2" {
						t.Errorf("replay of %s: %v %v into %q", pe.ID, r.Outcome, r.Err, r.Document)
					}
					// Replayed twice: the document has it; not applied again.
					if r := re.Replay(context.Background(), pe); r.Outcome != projector.Applied {
						t.Errorf("second replay of %s: %v %v", pe.ID, r.Outcome, r.Err)
					}
				}
				var d2 cart.ClientSummary
				if _, _, err := projector.ReadDocument(context.Background(), s, fixed, "d2", &d2); err != nil || d2.CartsOpened != 3 {
					t.Fatalf("d2 after replay: %+v (%v), want the 3 parked openings once each", d2, err)
				}
			})
		}
	}
}

// A projection built from an IDFunc behaves as before: an event it does not
// want has no result, and DocumentID and Route agree.
func TestRoute_an_IDFunc_projection_leaves_unwanted_events_alone(t *testing.T) {
	p := cart.NewDetailsProjection()
	log := projectortest.NewLog(cart.Registry())
	ev := log.MustAppend(t, "other-1", cart.ShoppingCartOpened{ShoppingCartID: "1", ClientID: "x", OpenedAt: t0})[0]
	if id, ok, err := p.Route(ev); ok || err != nil || id != "" {
		t.Fatalf("Route of another category: %q %v %v", id, ok, err)
	}
	mine := log.MustAppend(t, cart.StreamID("1"), cart.ShoppingCartOpened{ShoppingCartID: "1", ClientID: "x", OpenedAt: t0})[0]
	if id, ok, err := p.Route(mine); !ok || err != nil || id != "1" {
		t.Fatalf("Route of a cart event: %q %v %v", id, ok, err)
	}
	if id, ok := p.DocumentID(mine); !ok || id != "1" {
		t.Fatalf("DocumentID of a cart event: %q %v", id, ok)
	}
	s := newStore(t)
	e := newEngine(t, s, retry.Default(), p)
	if rs, err := e.Handle(context.Background(), ev); len(rs) != 0 || err != nil {
		t.Fatalf("an unwanted event: %+v %v", rs, err)
	}
}
