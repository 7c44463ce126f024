package projector_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// stored is an event as the event store keeps it: its type and JSON.
type stored struct{ typ, data string }

// appendStored appends events to stream of log as they are stored, and
// returns them undecoded (as a subscription delivers them) and decoded
// with r where they decode (as a fold takes them).
func appendStored(t *testing.T, log *projectortest.Log, r *projector.Registry, stream string, events ...stored) (raw, decoded []projector.Event) {
	t.Helper()
	for _, s := range events {
		ev := log.MustAppend(t, stream, projector.Event{Type: s.typ, Data: []byte(s.data)})[0]
		ev.Payload = nil
		raw = append(raw, ev)
		d, _ := r.Decode(ev) // one that does not decode stays as it is
		decoded = append(decoded, d)
	}
	return raw, decoded
}

func laneEngine(t *testing.T, r *projector.Registry, p projector.Definition, opts ...projector.Option) (*projector.Engine, *mongostore.Store) {
	t.Helper()
	s := newStore(t)
	e, err := projector.NewEngine(s, r, []projector.Definition{p}, append([]projector.Option{projector.WithRetry(patient()), projector.WithParker(s)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, s
}

// Events of every form in one stream (v1, v2, a v1 its upcaster drops, the
// old name, v3) project into the fold of what they decode to, at the last
// revision: the dropped event moved the document past it, as an event of a
// type the projection ignores does. One by one and in a batch.
func TestUpcast_every_form_in_one_stream_projects_to_the_fold(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			r := boardRegistry()
			p := laneProjection(r)
			e, s := laneEngine(t, r, p)
			log := projectortest.NewLog(r)
			raw, decoded := appendStored(t, log, r, "card-1",
				stored{"CardMoved", `{"to": "Todo"}`},
				stored{"CardMoved.v2", `{"column": {"name": "Doing"}}`},
				stored{"CardMoved", `{"to": "-"}`},
				stored{"CardShifted", `{"column": {"name": "Done"}}`},
				stored{"CardMovedV3", `{"column": {"name": "Done"}}`})
			// The same history written in v3 alone, the dropped event an
			// event of a type the projection does not handle.
			rawV3, decodedV3 := appendStored(t, log, r, "card-2",
				stored{"CardMovedV3", `{"column": {"name": "Todo"}}`},
				stored{"CardMovedV3", `{"column": {"name": "Doing"}}`},
				stored{"CardArchived", `{}`},
				stored{"CardMovedV3", `{"column": {"name": "Done"}}`},
				stored{"CardMovedV3", `{"column": {"name": "Done"}}`})
			handleAll(t, e, batched, append(raw, rawV3...))
			ctx := context.Background()
			for id, evs := range map[string][]projector.Event{"1": decoded, "2": decodedV3} {
				if err := projectortest.CheckDocument(ctx, s, p, id, evs); err != nil {
					t.Error(err)
				}
			}
			var one, two lanes
			projector.ReadDocument(ctx, s, p, "1", &one)
			projector.ReadDocument(ctx, s, p, "2", &two)
			if fmt.Sprint(one) != fmt.Sprint(two) || one.Columns["Done"] != 2 {
				t.Fatalf("mixed forms %+v, v3 alone %+v: want the same, with 2 moves to Done", one, two)
			}
		})
	}
}

// handleAll handles events one by one, or in one batch, and fails on a
// failed event.
func handleAll(t *testing.T, e *projector.Engine, batched bool, events []projector.Event) {
	t.Helper()
	for i, rs := range deliver(e, events, batched) {
		for _, r := range rs {
			if r.Outcome == projector.Failed {
				t.Fatalf("event %d: %v", i, r.Err)
			}
		}
	}
}

// poisonCase is an event that fails in the lanes projection, between two
// good ones, under each failure policy.
type poisonCase struct {
	registry *projector.Registry
	p        *projector.Projection[lanes]
	bad      stored
	says     string // what its error says
}

var policyOutcomes = []struct {
	policy projector.FailurePolicy
	bad    projector.Outcome // the poison's
	next   projector.Outcome // the good event after it
	past   bool              // the document moved past it
}{
	{projector.Block, projector.Failed, projector.Failed, false},
	{projector.Skip, projector.Skipped, projector.Applied, true},
	{projector.Park, projector.Parked, projector.Applied, true},
	{projector.Hold, projector.Held, projector.Held, false},
}

func (c poisonCase) run(t *testing.T) {
	for _, want := range policyOutcomes {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/batched=%v", want.policy, batched), func(t *testing.T) {
				ctx := context.Background()
				// Under block, the event after the poison waits for it in
				// vain: not for long.
				soon := patient()
				soon.MaxElapsed = 200 * time.Millisecond
				e, s := laneEngine(t, c.registry, c.p, projector.WithFailurePolicy(want.policy), projector.WithRetry(soon))
				log := projectortest.NewLog(c.registry)
				raw, decoded := appendStored(t, log, c.registry, "card-9",
					stored{"CardMovedV3", `{"column": {"name": "Todo"}}`}, c.bad, stored{"CardMovedV3", `{"column": {"name": "Done"}}`})
				results := deliver(e, raw, batched)
				bad := results[1]
				if len(bad) != 1 || bad[0].Outcome != want.bad || !errors.Is(bad[0].Err, projector.ErrUndecodable) || !strings.Contains(bad[0].Err.Error(), c.says) {
					t.Fatalf("the poison: %+v; want %v, wrapping ErrUndecodable, saying %q", bad, want.bad, c.says)
				}
				if next := results[2]; len(next) != 1 || next[0].Outcome != want.next && !(batched && want.next == projector.Failed && errors.Is(next[0].Err, projector.ErrNotHandled)) {
					t.Fatalf("the event after it: %+v, want %v", next, want.next)
				}
				// The document: the first event's fold at its revision, or
				// past the poison, the fold of the two good events.
				good, wantRev := decoded[:1], int64(0)
				if want.past {
					good, wantRev = []projector.Event{decoded[0], decoded[2]}, 2
				}
				wantState, _ := c.p.Fold(good...)
				var got lanes
				_, rev, err := projector.ReadDocument(ctx, s, c.p, "9", &got)
				if err != nil || rev != wantRev || fmt.Sprint(got) != fmt.Sprint(wantState) {
					t.Fatalf("document %+v at revision %d (%v), want %+v at %d", got, rev, err, wantState, wantRev)
				}
			})
		}
	}
}

func TestUpcast_a_failing_upcaster_under_each_failure_policy(t *testing.T) {
	r := boardRegistry()
	poisonCase{registry: r, p: laneProjection(r), bad: stored{"CardMoved", `{"to": ""}`},
		says: `CardMoved event`}.run(t)
}

func TestUnknownTypes_failed_under_each_failure_policy(t *testing.T) {
	r := boardRegistry()
	poisonCase{registry: r, p: laneProjection(r).FailUnknownTypes(), bad: stored{"CardTeleported", `{"to": "Mars"}`},
		says: `event type "CardTeleported" is not in the event registry (projection "boards" fails unknown types)`}.run(t)
}

// By default an event of a type nobody registered is passed over, and the
// document moves past it; so is an event of the node's own type ($...) in
// a projection that fails unknown types.
func TestUnknownTypes_ignored_by_default_and_the_document_moves_past(t *testing.T) {
	for _, c := range []struct {
		name string
		fail bool
		typ  string
	}{{"ignored", false, "CardTeleported"}, {"a node's own type", true, "$statsCollected"}} {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batched=%v", c.name, batched), func(t *testing.T) {
				r := boardRegistry()
				p := laneProjection(r)
				if c.fail {
					p.FailUnknownTypes()
				}
				e, s := laneEngine(t, r, p)
				log := projectortest.NewLog(r)
				raw, decoded := appendStored(t, log, r, "card-5",
					stored{"CardMovedV3", `{"column": {"name": "Todo"}}`}, stored{c.typ, `{}`}, stored{"CardMovedV3", `{"column": {"name": "Done"}}`})
				handleAll(t, e, batched, raw)
				if err := projectortest.CheckDocument(context.Background(), s, p, "5", decoded); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// A runner counts the events of types nobody registered, by type, each
// once, and says
// in its log when such a type is close to a registered one, or is in a
// stream that feeds a document (which moves past it), at Warn; otherwise
// at Info.
func TestUnknownTypes_a_runner_counts_them_and_logs_one_close_to_a_registered_type(t *testing.T) {
	r := boardRegistry()
	log := projectortest.NewLog(r)
	raw, _ := appendStored(t, log, r, "card-3",
		stored{"CardMovedV3", `{"column": {"name": "Todo"}}`},
		stored{"CardMovedV4", `{"column": {"name": "Doing", "wip": 3}}`},
		stored{"CardTeleported", `{}`},
		stored{"CardMovedV4", `{"column": {"name": "Done", "wip": 3}}`},
		stored{"$statsCollected", `{}`})
	other, _ := appendStored(t, log, r, "audit-1", stored{"AuditNoted", `{}`}) // a stream that feeds no document
	// Delivered again (a restart from an earlier checkpoint, a segment
	// taken over): counted once.
	raw = append(append(raw, other...), raw[1], raw[2], other[0])
	runner, text := runLogged(t, r, laneProjection(r), raw)
	if got, want := fmt.Sprint(runner.Stats().UnknownTypes), "map[AuditNoted:1 CardMovedV4:2 CardTeleported:1]"; got != want {
		t.Fatalf("unknown types %s, want %s", got, want)
	}
	for _, want := range []string{
		`level=WARN msg="an event type nobody registered, close to a registered one: a rename or a new version without its upcaster?" runner=boards type=CardMovedV4 registered=CardMoved`,
		`level=WARN msg="an event type nobody registered, in a stream that feeds a document: the document moves past it (a rename or a new version without its upcaster? FailUnknownTypes makes such events fail instead)" runner=boards type=CardTeleported projection=boards document=3`,
		`level=INFO msg="an event type nobody registered: projections pass over its events, or fail them (FailUnknownTypes)" runner=boards type=AuditNoted`,
	} {
		if strings.Count(text, want) != 1 {
			t.Errorf("the log does not say, once:\n%s\nit says:\n%s", want, text)
		}
	}
}

// In a projection that fails unknown types, such an event fails under its
// policy (parked here): the log does not also say that its document moved
// past it.
func TestUnknownTypes_a_projection_that_fails_them_does_not_log_that_its_document_moved_past(t *testing.T) {
	r := boardRegistry()
	raw, _ := appendStored(t, projectortest.NewLog(r), r, "card-3",
		stored{"CardMovedV3", `{"column": {"name": "Todo"}}`},
		stored{"CardTeleported", `{}`},
		stored{"CardMovedV3", `{"column": {"name": "Done"}}`})
	runner, text := runLogged(t, r, laneProjection(r).FailUnknownTypes(), raw, projector.WithFailurePolicy(projector.Park))
	if st := runner.Stats(); st.Parked != 1 {
		t.Fatalf("parked %d, want the unknown event parked", st.Parked)
	}
	if !strings.Contains(text, `msg="event parked"`) || strings.Contains(text, "moves past it") {
		t.Fatalf("want the event parked, and nothing said of the document moving past it; the log says:\n%s", text)
	}
}

// The first event of a type nobody registered comes to a document held
// (Hold): held behind, its document does not move past it. A later one, to
// a document that does, is still said at Warn, once: the first event's
// fate does not keep the warning back.
func TestUnknownTypes_the_warning_of_a_document_moving_past_one_waits_for_the_first_that_does(t *testing.T) {
	r := boardRegistry()
	log := projectortest.NewLog(r)
	held, _ := appendStored(t, log, r, "card-1", stored{"CardMovedV3", `{"column": 5}`}, stored{"CardTeleported", `{}`})
	free, _ := appendStored(t, log, r, "card-2", stored{"CardMovedV3", `{"column": {"name": "Todo"}}`},
		stored{"CardTeleported", `{}`}, stored{"CardTeleported", `{}`})
	runner, text := runLogged(t, r, laneProjection(r), append(held, free...), projector.WithFailurePolicy(projector.Hold))
	if st := runner.Stats(); st.Held != 2 {
		t.Fatalf("held %d, want card 1's two events", st.Held)
	}
	want := `msg="an event type nobody registered, in a stream that feeds a document: the document moves past it ` +
		`(a rename or a new version without its upcaster? FailUnknownTypes makes such events fail instead)" runner=boards type=CardTeleported projection=boards document=2`
	if strings.Count(text, "the document moves past it") != 1 || !strings.Contains(text, want) {
		t.Fatalf("want said once:\n%s\nthe log says:\n%s", want, text)
	}
}

// runLogged runs a runner of p over raw, one worker, until it has caught
// up, with an engine given opts (a parker besides, and a logger), and
// returns it and what it logged.
func runLogged(t *testing.T, r *projector.Registry, p projector.Definition, raw []projector.Event, opts ...projector.Option) (*projector.Runner, string) {
	t.Helper()
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedbuf.Writer{Mu: &mu, W: &logs}, nil))
	s := newStore(t)
	opts = append([]projector.Option{projector.WithRetry(patient()), projector.WithLogger(logger), projector.WithParker(s)}, opts...)
	e, err := projector.NewEngine(s, r, []projector.Definition{p}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	runner, err := projector.NewRunner("boards", e, &scripted{events: raw}, nil, projector.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	waitFor(t, "the runner caught up", runner.CaughtUp)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return runner, logs.String()
}

// An event its projection cannot route, skipped (no document moves past
// it), and delivered again (a restart from an earlier checkpoint): counted
// skipped once, and a duplicate each time after, as an event a document
// moved past is; it was counted skipped at each delivery.
func TestSkip_an_unroutable_event_delivered_again_counts_skipped_once(t *testing.T) {
	r := boardRegistry()
	p := projector.NewRouted[lanes]("boards", func(ev projector.Event) (string, bool, error) {
		if ev.StreamID == "card-9" {
			return "", false, errors.New("no board")
		}
		return strings.TrimPrefix(ev.StreamID, "card-"), true, nil
	})
	projector.On(p, func(b lanes, _ Moved) (lanes, error) { return b, nil })
	log := projectortest.NewLog(r)
	bad, _ := appendStored(t, log, r, "card-9", stored{"CardMovedV3", `{"column": {"name": "Todo"}}`})
	good, _ := appendStored(t, log, r, "card-1", stored{"CardMovedV3", `{"column": {"name": "Todo"}}`})
	runner, _ := runLogged(t, r, p, append(append(append(bad, good...), bad...), bad...), projector.WithFailurePolicy(projector.Skip))
	if st := runner.Stats(); st.Skipped != 1 || st.Duplicates != 2 || st.Applied != 1 {
		t.Fatalf("skipped %d, duplicates %d, applied %d; want the unroutable event skipped once and a duplicate twice, the other applied",
			st.Skipped, st.Duplicates, st.Applied)
	}
}

// An event of a revision-map stream routed to another document than its
// stream's earlier events (a stray), under park, and delivered again: the
// document refuses it at each delivery and the same record is parked
// again; the runner counts it parked once, then a duplicate (it counted
// it parked at each delivery).
func TestPark_a_stray_delivered_again_counts_parked_once(t *testing.T) {
	r := boardRegistry()
	p := projector.New[lanes]("boards", func(ev projector.Event) (string, bool) {
		if m, ok := ev.Payload.(Moved); ok && m.Column.Name == "Elsewhere" {
			return "other", true
		}
		return "home", true
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(b lanes, _ Moved) (lanes, error) { return b, nil })
	raw, _ := appendStored(t, projectortest.NewLog(r), r, "card-1",
		stored{"CardMovedV3", `{"column": {"name": "Todo"}}`},
		stored{"CardMovedV3", `{"column": {"name": "Elsewhere"}}`})
	runner, _ := runLogged(t, r, p, append(raw, raw[1]), projector.WithFailurePolicy(projector.Park), projector.WithStreamReader(newStreams(raw...)))
	if st := runner.Stats(); st.Parked != 1 || st.Duplicates != 1 || st.Applied != 1 {
		t.Fatalf("parked %d, duplicates %d, applied %d; want the stray parked once and a duplicate once, the other applied",
			st.Parked, st.Duplicates, st.Applied)
	}
}

// A projection that fails unknown types, under hold, has such an event
// delivered again (a duplicate, already held): the log does not say that
// its document moved past it (a probe saw it, with advice to use
// FailUnknownTypes, which the projection has).
func TestUnknownTypes_a_held_one_delivered_again_is_not_said_moved_past(t *testing.T) {
	r := boardRegistry()
	raw, _ := appendStored(t, projectortest.NewLog(r), r, "card-3",
		stored{"CardMovedV3", `{"column": {"name": "Todo"}}`},
		stored{"CardTeleported", `{}`})
	runner, text := runLogged(t, r, laneProjection(r).FailUnknownTypes(), append(raw, raw[1], raw[1]), projector.WithFailurePolicy(projector.Hold))
	if st := runner.Stats(); st.Held != 1 {
		t.Fatalf("held %d, want the unknown event held", st.Held)
	}
	if strings.Contains(text, "moves past it") {
		t.Fatalf("the log says the document moved past the event it holds at:\n%s", text)
	}
}
