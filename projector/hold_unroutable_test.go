package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// Hold, with two events of z's stream that cannot be routed (a failing
// upcaster of an event routed by its payload) in one hole: after the fix,
// a replay in the app's order (held documents first, then the plain
// records) must give the fold.
func TestHold_at_a_hole_of_two_unroutable_events_holds_both_in_order(t *testing.T) {
	for _, batched := range []bool{false, true} {
		for _, heldFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("batched=%v/heldFirst=%v", batched, heldFirst), func(t *testing.T) {
				ctx := context.Background()
				var broken atomic.Bool
				broken.Store(true)
				r := poisonRegistry(&broken)
				raw := rawLog(t, r, func(add func(string, ...any)) {
					add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"})
					add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
					add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
					add(cardStreams+"z", CardRenamed{CardID: "z", Title: "z2"}, CardMoved{CardID: "z", Column: "done"})
				})
				p := cardsByPayload()
				s := newStore(t)
				e := faultEngine(t, s, r, projector.Hold, raw, p)
				for i, rs := range deliver(e, raw, batched) {
					t.Logf("event %d: %+v", i, rs)
				}
				broken.Store(false)
				_, held, plain := parkedRecords(t, s, p.Name())
				if heldFirst {
					replayHeld(t, e, s, p.Name(), held)
					replayPlain(t, e, plain)
				} else {
					replayPlain(t, e, plain)
					replayHeld(t, e, s, p.Name(), held)
				}
				docs := p.Documents(decodeAll(t, r, raw))
				if err := projectortest.CheckDocument(ctx, s, p, "z", docs["z"]); err != nil {
					t.Errorf("z after the replay: %v", err)
				}
			})
		}
	}
}

// Hold, with the last event of z's stream failing to decode, so that it
// cannot be routed and no later event of the stream comes to hold z at it:
// the stream's earlier events feed z, so z is held at once, not the event
// parked with no document while z's other events go on. Under a revision
// map, an event of another stream of z then waits behind it.
func TestHold_an_unroutable_last_event_of_a_stream_holds_its_document_at_once(t *testing.T) {
	for _, revmap := range []bool{false, true} {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("revisionMap=%v/batched=%v", revmap, batched), func(t *testing.T) {
				ctx := context.Background()
				var broken atomic.Bool
				broken.Store(true)
				r := poisonRegistry(&broken)
				raw := rawLog(t, r, func(add func(string, ...any)) {
					add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"})
					add(cardStreams+"y", CardAdded{CardID: "y", Title: "y"})
					add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
					if revmap {
						add("notes-z", CardRenamed{CardID: "z", Title: "z2"})
					}
					add(cardStreams+"y", CardMoved{CardID: "y", Column: "doing"})
				})
				p := cardsByPayload()
				if revmap {
					p = p.Idempotency(projector.RevisionMap())
				}
				s := newStore(t)
				e := faultEngine(t, s, r, projector.Hold, raw, p)
				results := deliver(e, raw, batched)
				for i, rs := range results {
					t.Logf("event %d %s@%d %s: %+v", i, raw[i].StreamID, raw[i].StreamRevision, raw[i].Type, rs)
				}
				if rs := results[2]; len(rs) != 1 || rs[0].Outcome != projector.Held || rs[0].Document != "z" {
					t.Fatalf("the poison: %+v, want z held at it", rs)
				}
				if rs := results[3]; revmap && (len(rs) != 1 || rs[0].Outcome != projector.Held) {
					t.Errorf("z's event of another stream: %+v, want it held behind the poison", rs)
				}
				_, held, plain := parkedRecords(t, s, p.Name())
				if want := map[bool]int{false: 1, true: 2}[revmap]; len(held) != want || len(plain) != 0 || held[0].Document != "z" {
					t.Fatalf("%d held, %d parked with no document; want %d held behind z, none parked", len(held), len(plain), want)
				}
				broken.Store(false)
				docs := p.Documents(decodeAll(t, r, raw))
				if err := projectortest.CheckDocument(ctx, s, p, "y", docs["y"]); err != nil {
					t.Errorf("y, which the poison is not of: %v", err)
				}
				replayHeld(t, e, s, p.Name(), held)
				if err := projectortest.CheckDocument(ctx, s, p, "z", docs["z"]); err != nil {
					t.Errorf("z after the replay: %v", err)
				}
			})
		}
	}
}

// An event that cannot be routed, parked under another policy while its
// document went past it, and delivered again under hold (a restart from a
// checkpoint before it): the document is not held at it, and the replay of
// its record after the fix applies it.
func TestHold_an_unroutable_event_delivered_again_to_a_document_past_it_is_not_held(t *testing.T) {
	for _, revmap := range []bool{false, true} {
		t.Run(fmt.Sprintf("revisionMap=%v", revmap), func(t *testing.T) {
			ctx := context.Background()
			var broken atomic.Bool
			broken.Store(true)
			r := poisonRegistry(&broken)
			raw := rawLog(t, r, func(add func(string, ...any)) {
				add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"})
				add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
				add(cardStreams+"z", CardMoved{CardID: "z", Column: "doing"}, CardRenamed{CardID: "z", Title: "z2"})
			})
			p := cardsByPayload()
			if revmap {
				p = p.Idempotency(projector.RevisionMap())
			}
			s := newStore(t)
			parking := faultEngine(t, s, r, projector.Park, raw, p)
			deliver(parking, raw[:3], false) // z@1 parked, z past it
			holding := faultEngine(t, s, r, projector.Hold, raw, p)
			results := deliver(holding, raw[1:], false) // from a checkpoint before z@1
			for i, rs := range results {
				t.Logf("event %d: %+v", i+1, rs)
			}
			if rs := results[0]; len(rs) != 1 || rs[0].Outcome == projector.Held {
				t.Fatalf("z@1 again: %+v; want it not held, z is past it", rs)
			}
			if rs := results[2]; len(rs) != 1 || rs[0].Outcome != projector.Applied {
				t.Fatalf("z@3: %+v; want it applied, z is not held", rs)
			}
			broken.Store(false)
			_, held, plain := parkedRecords(t, s, p.Name())
			if len(held) != 0 || len(plain) != 1 {
				t.Fatalf("%d held, %d parked; want z@1 parked alone", len(held), len(plain))
			}
			if res := holding.Replay(ctx, plain[0]); res.Outcome != projector.Applied {
				t.Fatalf("the replay of z@1: %+v", res)
			}
			docs := p.Documents(decodeAll(t, r, raw))
			if err := projectortest.CheckDocument(ctx, s, p, "z", docs["z"]); err != nil {
				t.Errorf("z after the replay: %v", err)
			}
		})
	}
}

// Under hold, an event that cannot be routed whose stream cannot be read
// (the event store does not answer) fails as a store error does, to be
// tried again: it is not parked with no document, which would let its
// document go on without it. Once the stream reads, it holds its document.
func TestHold_an_unroutable_event_whose_stream_cannot_be_read_is_tried_again(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	r := poisonRegistry(&broken)
	raw := rawLog(t, r, func(add func(string, ...any)) {
		add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"})
		add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
	})
	p := cardsByPayload()
	s := newStore(t)
	h := &failingHistory{streams: newStreams(raw...)}
	soon := patient()
	soon.MaxElapsed = 200 * time.Millisecond
	e, err := projector.NewEngine(s, r, []projector.Definition{p}, projector.WithRetry(soon),
		projector.WithFailurePolicy(projector.Hold), projector.WithParker(s), projector.WithStreamReader(h))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	deliver(e, raw[:1], false)
	h.failing.Store(true)
	rs, _ := e.Handle(context.Background(), raw[1])
	var fe *projector.Error
	if len(rs) != 1 || rs[0].Outcome != projector.Failed || !errors.As(rs[0].Err, &fe) || !fe.Retryable() {
		t.Fatalf("with the stream unreadable: %+v; want a retryable failure", rs)
	}
	if all, _, _ := parkedRecords(t, s, p.Name()); len(all) != 0 {
		t.Fatalf("%d records; want none while the stream cannot be read", len(all))
	}
	h.failing.Store(false)
	if rs, _ := e.Handle(context.Background(), raw[1]); len(rs) != 1 || rs[0].Outcome != projector.Held || rs[0].Document != "z" {
		t.Fatalf("once the stream reads: %+v; want z held at it", rs)
	}
}

// Held at an event that could not be routed, a document's later events are
// logged as held, at Warn, as behind any event that failed: none of them
// is logged as a failure of its own ("event failed", at Error), which
// would page for every event held behind.
func TestHold_events_held_behind_an_unroutable_one_are_logged_as_held_not_failed(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			var broken atomic.Bool
			broken.Store(true)
			r := poisonRegistry(&broken)
			raw := rawLog(t, r, func(add func(string, ...any)) {
				// The stream's first event: parked with no document when
				// it comes, it holds z once the next names z.
				add(cardStreams+"z", projector.Event{Type: "CardMovedV1", Data: []byte(`{"CardID": "z", "To": "poison"}`)})
				add(cardStreams+"z", CardAdded{CardID: "z", Title: "z"}, CardRenamed{CardID: "z", Title: "z2"}, CardMoved{CardID: "z", Column: "done"})
			})
			var logged lockedbuf.Buffer
			s := newStore(t)
			p := cardsByPayload()
			soon := patient()
			soon.MaxElapsed = 2 * time.Second
			e, err := projector.NewEngine(s, r, []projector.Definition{p}, projector.WithRetry(soon), projector.WithFailurePolicy(projector.Hold),
				projector.WithParker(s), projector.WithStreamReader(newStreams(raw...)),
				projector.WithLogger(slog.New(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo}))))
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Prepare(context.Background()); err != nil {
				t.Fatal(err)
			}
			deliver(e, raw, batched)
			_, held, _ := parkedRecords(t, s, p.Name())
			if len(held) != 4 {
				t.Fatalf("%d events held, want 4 (the unroutable one and the 3 behind it)", len(held))
			}
			heldLines := 0
			for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
				var rec struct{ Level, Msg string }
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("%v: %s", err, line)
				}
				switch {
				case rec.Msg == "event failed":
					t.Errorf("logged as a failure: %s", line)
				case strings.HasPrefix(rec.Msg, "document held"):
					heldLines++
				case rec.Msg == "event held":
					// Behind the one that holds the document: at debug, not
					// a line each at info (a busy document held for hours).
					t.Errorf("an event held behind logged at %s: %s", rec.Level, line)
				}
			}
			if heldLines != 1 {
				t.Errorf("%d lines say the document held, want one:\n%s", heldLines, logged.String())
			}
		})
	}
}
