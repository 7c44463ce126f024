package projector_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/revgate/projector/projector"
)

// The catch-up's later events of a stream a batch folded are routed by the
// fold's word, without decoding their payloads again (the fold decoded
// them, and an event's payload does not change): delivered here with
// payloads that do not decode, they still count as applied once and the
// documents stay the fold. An event past what the folds read is decoded as
// usual, and one that does not decode fails.
func TestStreamFold_routes_the_events_it_folded_without_decoding_them_again(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	all, carts := interleaved(t, r, 40, 10)
	s := newStore(t)
	h := newStreams(all...)
	e := foldEngine(t, s, h)
	half := len(all) / 2
	first, _ := handleInBatches(t, e, all[:half], 37)
	if e.StreamsFolded() == 0 {
		t.Fatal("no stream folded: nothing to route by")
	}
	met := map[string]bool{}
	for _, ev := range all[:half] {
		met[ev.StreamID] = true
	}
	var rest []projector.Event
	for _, ev := range all[half:] {
		if met[ev.StreamID] {
			ev.Data, ev.Payload = []byte("{not json"), nil // as a server delivers it
			rest = append(rest, ev)
		}
	}
	if len(rest) < 2 {
		t.Fatalf("only %d later events of folded streams", len(rest))
	}
	second, dup := handleInBatches(t, e, rest, 23)
	if dup != 0 {
		t.Fatalf("%d of the folded streams' later events counted as duplicates on their first delivery", dup)
	}
	var want int
	for _, evs := range carts {
		if met[evs[0].StreamID] {
			want += len(evs)
		}
	}
	// Carts first met in the second half were not delivered: only the
	// events of carts met in the first half count.
	if first+second < want {
		t.Fatalf("applied %d + %d, want at least %d", first, second, want)
	}
	for id, evs := range carts {
		if !met[evs[0].StreamID] {
			delete(carts, id)
		}
	}
	checkCarts(t, s, carts)

	// Past what the folds read: decoded, and it fails.
	id := ""
	for c := range carts {
		id = c
		break
	}
	evs := carts[id]
	last := evs[len(evs)-1]
	extra := last
	extra.ID, extra.StreamRevision, extra.Position = "past-the-folds", last.StreamRevision+1, all[len(all)-1].Position+1
	extra.Data, extra.Payload = []byte("{not json"), nil
	bad := []projector.Event{last, extra}
	results := e.HandleBatch(context.Background(), bad)
	if got := results[1]; len(got) != 1 || got[0].Outcome != projector.Failed {
		t.Fatalf("an undecodable event past the folds: %v, want it failed", got)
	}
}

// An engine that remembers few documents forgets folds while it catches
// up: the events it no longer knows are decoded and go through the batch's
// read again, and the documents are the fold all the same.
func TestStreamFold_with_a_small_memory_of_documents_is_exact(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	all, carts := interleaved(t, r, 40, 10)
	s := newStore(t)
	h := newStreams(all...)
	e := foldEngine(t, s, h, projector.WithKnownDocuments(3))
	delivered := make([]projector.Event, len(all))
	for i, ev := range all {
		ev.Payload = nil // as a server delivers it
		delivered[i] = ev
	}
	applied, _ := handleInBatches(t, e, delivered, 31)
	if e.StreamsFolded() == 0 {
		t.Fatal("no stream folded")
	}
	if applied == 0 || applied > len(all) {
		t.Fatalf("applied %d of %d events", applied, len(all))
	}
	checkCarts(t, s, carts)
}
