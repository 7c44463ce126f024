package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/subscription"
)

// A cart whose third event (revision 2) its client summary cannot have:
// of a type the registry does not know and with no client in its metadata
// (the router declines it), or with a client id holding invalid UTF-8 (it
// goes to another document, "x\uFFFD\uFFFD"). The summary of client x,
// fed by the cart under the per-stream revision map, needs every event of
// the cart: its later events find, on their first wait, that revision 2 is
// not coming, and the failure policy has it at once. Under block the
// projection stops at one event with a message naming the stream, the
// event, the documents and the rule; under park and skip the summary is the
// fold of the cart's other events, and under park the bad event is parked
// once.
func TestRoutedAway_an_event_of_a_revision_map_stream_routed_elsewhere_goes_through_the_policy_at_once(t *testing.T) {
	cases := []struct {
		name     string
		typ      string
		metadata string
		is       error  // the failure under block
		want     string // in its message
		strayDoc string // the document the bad event goes to, if any
	}{
		// The router says it cannot route the event: it fails (under
		// block), or is parked or skipped with no document, when it comes.
		{name: "unknown type, no client", typ: "ShoppingCartTagged", metadata: `{}`, is: projector.ErrUnroutable,
			want: `no client in the cart event's metadata; under the per-stream revision map a document fed by a stream needs every event of it routed to it (stream "shopping_cart-`},
		// It routes to another document, which never had the cart: a
		// stray there, refused by the policy.
		{name: "client id with invalid UTF-8", typ: "ProductItemAddedToShoppingCart", metadata: "{\"clientId\":\"x\xff\xfe\"}",
			is:   projector.ErrRoutedAway,
			want: `is routed to document "x` + "\uFFFD\uFFFD" + `", but of its earlier events revision 0`, strayDoc: "x\uFFFD\uFFFD"},
	}
	server := esdbtest.New(t)
	client := dialESDB(t, server)
	app := appender{client}
	ctx := context.Background()
	for _, c := range cases {
		for _, policy := range []projector.FailurePolicy{projector.Block, projector.Park, projector.Skip, projector.Hold} {
			if policy == projector.Hold && c.strayDoc == "" {
				continue // held at the document, as failures.md says: another test's
			}
			t.Run(c.name+"/"+policy.String(), func(t *testing.T) {
				id := "r" + uuid.NewString()[:8]
				stream := cart.StreamID(id)
				meta := []byte(`{"clientId":"x"}`)
				payload := func(v any) []byte {
					b, err := json.Marshal(v)
					if err != nil {
						t.Fatal(err)
					}
					return b
				}
				evs := []sourcetest.Event{
					{ID: uuid.New(), Type: "ShoppingCartOpened", Data: payload(cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: "x", OpenedAt: t0}), Metadata: meta},
					{ID: uuid.New(), Type: "ProductItemAddedToShoppingCart", Data: payload(add(id, "p", 1)), Metadata: meta},
					{ID: uuid.New(), Type: c.typ, Data: payload(add(id, "bad", 9)), Metadata: []byte(c.metadata)},
					{ID: uuid.New(), Type: "ProductItemAddedToShoppingCart", Data: payload(add(id, "q", 2)), Metadata: meta},
					{ID: uuid.New(), Type: "ShoppingCartConfirmed", Data: payload(cart.ShoppingCartConfirmed{ShoppingCartID: id, ConfirmedAt: t0}), Metadata: meta},
				}
				if _, err := app.Append(ctx, stream, sourcetest.NoStream, evs...); err != nil {
					t.Fatal(err)
				}
				var delivered []projector.Event
				if err := client.ReadStream(ctx, stream, 0, func(ev projector.Event) error {
					delivered = append(delivered, ev)
					return nil
				}); err != nil || len(delivered) != len(evs) {
					t.Fatalf("read %d events of %d: %v", len(delivered), len(evs), err)
				}
				s := newStore(t)
				summary := cart.NewClientSummaryProjection()
				e := holeEngine(t, s, client, policy, summary)
				var failed []projector.Result
				var badOutcome projector.Outcome
				for i, ev := range delivered {
					rs, _ := e.Handle(ctx, ev)
					for _, r := range rs {
						if i == 2 {
							badOutcome = r.Outcome
						}
						if r.Outcome == projector.Failed {
							failed = append(failed, r)
						}
						if r.Waits > 1 {
							t.Errorf("%s@%d waited %d times: the policy must have it at once", ev.StreamID, ev.StreamRevision, r.Waits)
						}
					}
					if policy == projector.Block && len(failed) > 0 {
						break // the runner stops here
					}
				}
				parked, err := s.Parked(ctx, cart.ClientSummaryName)
				if err != nil {
					t.Fatal(err)
				}
				if policy == projector.Block {
					if len(failed) != 1 || !errors.Is(failed[0].Err, c.is) {
						t.Fatalf("under block, want one failure of %v: %+v", c.is, failed)
					}
					msg := failed[0].Err.Error()
					for _, w := range []string{c.want, `stream "` + stream + `"`, "revision 2", "needs every event of it routed to it", cart.ClientSummaryName, `document "x"`} {
						if !strings.Contains(msg, w) {
							t.Errorf("message %q does not say %q", msg, w)
						}
					}
					if len(parked) != 0 {
						t.Errorf("parked under block: %+v", parked)
					}
					return
				}
				if len(failed) != 0 {
					t.Fatalf("failures under %v: %+v", policy, failed)
				}
				var want []projector.Event
				for _, ev := range []projector.Event{delivered[0], delivered[1], delivered[3], delivered[4]} {
					decoded, err := cart.Registry().Decode(ev)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, decoded)
				}
				if err := projectortest.CheckDocument(ctx, s, summary, "x", want); err != nil {
					t.Error(err)
				}
				if c.strayDoc != "" {
					if found, _, err := projector.ReadDocument(ctx, s, summary, c.strayDoc, nil); err != nil || found {
						t.Errorf("the stray's document %q: found %v (%v), want none", c.strayDoc, found, err)
					}
				}
				// Under hold, a stray holds no document (it never had the
				// stream): parked, and said so, as under park.
				parks := policy == projector.Park || policy == projector.Hold
				switch {
				case parks && (len(parked) != 1 || parked[0].ID != delivered[2].ID || !strings.Contains(parked[0].Error, c.is.Error())):
					t.Errorf("under %v, want the bad event parked once: %+v", policy, parked)
				case parks && badOutcome != projector.Parked:
					t.Errorf("under %v, the bad event's outcome is %v, want parked (a record was made)", policy, badOutcome)
				case policy == projector.Skip && (len(parked) != 0 || badOutcome != projector.Skipped):
					t.Errorf("under skip: parked %+v, outcome %v; want none parked, the event skipped", parked, badOutcome)
				}
			})
		}
	}
}

var _ projector.StreamHistory = (*subscription.Client)(nil)

// An event its projection cannot route, delivered three times under park:
// parked once, and reported parked once (then a duplicate), so that the
// parked count of a process equals the records it made.
func TestPark_an_unroutable_event_delivered_again_is_parked_and_counted_once(t *testing.T) {
	s := newStore(t)
	summary := cart.NewClientSummaryProjection()
	e := holeEngine(t, s, nil, projector.Park, summary)
	log := projectortest.NewLog(cart.Registry())
	evs, err := log.AppendWithMetadata(cart.StreamID("u"), []byte(`{}`), add("u", "p", 1))
	if err != nil {
		t.Fatal(err)
	}
	var got []projector.Outcome
	for range 3 {
		rs, _ := e.Handle(context.Background(), evs[0])
		for _, r := range rs {
			got = append(got, r.Outcome)
		}
	}
	want := []projector.Outcome{projector.Parked, projector.Duplicate, projector.Duplicate}
	if !slices.Equal(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	parked, err := s.Parked(context.Background(), cart.ClientSummaryName)
	if err != nil || len(parked) != 1 {
		t.Fatalf("parked %+v (%v), want one record", parked, err)
	}
}

// The traps of the client summary through a runner of 4 workers catching
// up a log of 16 carts of two clients, one cart with an event of an
// unknown type and no client, another with a client id holding invalid
// UTF-8. Under park and skip the runner reaches the head, each client's
// summary is the fold of its other events, and under park the two events
// are parked, once each. Under block the runner stops at a bad event, with
// the message of the rule.
func TestRoutedAway_the_client_summary_traps_through_a_runner(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	server := esdbtest.New(t)
	client := dialESDB(t, server)
	app := appender{client}
	ctx := context.Background()
	payload := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	r := rand.New(rand.NewPCG(21, 21))
	bad := map[string]sourcetest.Event{
		"t05": {ID: uuid.New(), Type: "ShoppingCartTagged", Data: payload(add("t05", "bad", 9)), Metadata: []byte(`{}`)},
		"t11": {ID: uuid.New(), Type: "ProductItemAddedToShoppingCart", Data: payload(add("t11", "bad", 9)), Metadata: []byte("{\"clientId\":\"y\xff\xfe\"}")},
	}
	for round := range 6 {
		for i := range 16 {
			id, who := fmt.Sprintf("t%02d", i), []string{"x", "y"}[i%2]
			meta := []byte(`{"clientId":"` + who + `"}`)
			var ev any = add(id, fmt.Sprint("p", r.IntN(5)), 1+r.IntN(3))
			if round == 0 {
				ev = cart.ShoppingCartOpened{ShoppingCartID: id, ClientID: who, OpenedAt: t0}
			}
			name, data, err := cart.Registry().Encode(ev)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := app.Append(ctx, cart.StreamID(id), sourcetest.AnyRevision, sourcetest.Event{ID: uuid.New(), Type: name, Data: data, Metadata: meta}); err != nil {
				t.Fatal(err)
			}
			if b, ok := bad[id]; ok && round == 2 {
				if _, err := app.Append(ctx, cart.StreamID(id), sourcetest.AnyRevision, b); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	src, err := subscription.NewAll(client, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}})
	if err != nil {
		t.Fatal(err)
	}
	// The events as delivered, and each client's in log order, the bad
	// ones left out.
	byClient := map[string][]projector.Event{}
	sub, err := src.Subscribe(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for n := 0; n < 16*6+2; {
		d, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Event == nil {
			continue
		}
		n++
		last = d.Event.Position
		if d.Event.ID == bad["t05"].ID.String() || d.Event.ID == bad["t11"].ID.String() {
			continue
		}
		ev, err := cart.Registry().Decode(*d.Event)
		if err != nil {
			t.Fatal(err)
		}
		who, _ := cart.ClientOf(ev)
		byClient[who] = append(byClient[who], ev)
	}
	sub.Close()
	for _, policy := range []projector.FailurePolicy{projector.Block, projector.Park, projector.Skip} {
		t.Run(policy.String(), func(t *testing.T) {
			s := newStore(t)
			summary := cart.NewClientSummaryProjection()
			e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{summary}, projector.WithRetry(patient()),
				projector.WithFailurePolicy(policy), projector.WithParker(s), projector.WithStreamReader(client))
			if err != nil {
				t.Fatal(err)
			}
			src, err := subscription.NewAll(client, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}})
			if err != nil {
				t.Fatal(err)
			}
			runner := sourcetest.NewRunner(t, "traps", e, src, s, projector.WithWorkers(4), projector.WithBatch(10, 5*time.Millisecond))
			x := sourcetest.Start(t, runner)
			if policy == projector.Block {
				err := x.Wait(t)
				if err == nil || !strings.Contains(err.Error(), "needs every event of it routed to it") {
					t.Fatalf("under block: Run returned %v, want the rule", err)
				}
				// The runner stops at the first failure; meanwhile other
				// workers may fail the other bad event, or a later event of
				// a bad event's cart that finds it missing (ErrRoutedAway):
				// two failures a bad event at most, nothing moved past.
				if st := runner.Stats(); st.Failed < 1 || st.Failed > 4 || st.Parked+st.Skipped != 0 {
					t.Errorf("under block: %d failed, want the bad events' only (stats %+v)", st.Failed, st)
				}
				return
			}
			x.WaitFor(t, "the head", func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position >= last })
			if err := x.Stop(); err != nil {
				t.Fatal(err)
			}
			for _, who := range []string{"x", "y"} {
				if err := projectortest.CheckDocument(ctx, s, summary, who, byClient[who]); err != nil {
					t.Error(err)
				}
			}
			parked, err := s.Parked(ctx, cart.ClientSummaryName)
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]int{}
			for _, pe := range parked {
				ids[pe.ID]++
			}
			want := map[string]int{}
			if policy == projector.Park {
				want = map[string]int{bad["t05"].ID.String(): 1, bad["t11"].ID.String(): 1}
			}
			if !maps.Equal(ids, want) {
				t.Errorf("parked %v, want %v", ids, want)
			}
		})
	}
}
