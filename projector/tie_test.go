package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
	"github.com/revgate/projector/subscription"
)

// A kanban board, fed by its own stream and by the streams of its cards.
// Only a card's first event names its board; the others name the card
// alone.
type (
	BoardOpened struct {
		BoardID, Name string
	}
	CardAdded struct {
		CardID, BoardID, Title string
	}
	CardRenamed struct {
		CardID, Title string
	}
	CardMoved struct {
		CardID, Column string
	}
	CardArchived struct {
		CardID string
	}
)

type boardCard struct {
	Title, Column string
	Moves         int
	Archived      bool
}

type board struct {
	Name  string
	Cards map[string]boardCard
}

const (
	boardStreams = "board-"
	cardStreams  = "card-"
)

func kanbanRegistry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[BoardOpened](r, "BoardOpened")
	projector.Register[CardAdded](r, "CardAdded")
	projector.Register[CardRenamed](r, "CardRenamed")
	projector.Register[CardMoved](r, "CardMoved")
	projector.Register[CardArchived](r, "CardArchived")
	return r
}

// boards is the board summary: one document per board, under the
// per-stream revision map, with the card streams tied to the board their
// first event names.
func boards() *projector.Projection[board] { return boardsTying(cardStreams) }

// boardsTying is the board summary tying the streams of prefixes.
func boardsTying(prefixes ...string) *projector.Projection[board] {
	return boardsRouted(func(id string) bool { return true }, prefixes...)
}

// boardsDecliningEmpty is boards with a router that declines an event that
// names no board, as a router that checks its field does.
func boardsDecliningEmpty() *projector.Projection[board] {
	return boardsRouted(func(id string) bool { return id != "" }, cardStreams)
}

// boardsRouted is the board summary tying the streams of prefixes, whose
// router sends an event to the board it names when named says so of it.
func boardsRouted(named func(id string) bool, prefixes ...string) *projector.Projection[board] {
	p := projector.New[board]("kanban_boards", func(ev projector.Event) (string, bool) {
		switch pl := ev.Payload.(type) {
		case BoardOpened:
			return pl.BoardID, named(pl.BoardID)
		case CardAdded:
			return pl.BoardID, named(pl.BoardID)
		}
		return "", false
	}).Idempotency(projector.RevisionMap()).TieStreams(prefixes...)
	card := func(s board, id string, f func(*boardCard)) board {
		if s.Cards == nil {
			s.Cards = map[string]boardCard{}
		}
		c := s.Cards[id]
		f(&c)
		s.Cards[id] = c
		return s
	}
	projector.On(p, func(s board, e BoardOpened) (board, error) { s.Name = e.Name; return s, nil })
	projector.On(p, func(s board, e CardAdded) (board, error) {
		return card(s, e.CardID, func(c *boardCard) { c.Title, c.Column = e.Title, "todo" }), nil
	})
	projector.On(p, func(s board, e CardRenamed) (board, error) {
		return card(s, e.CardID, func(c *boardCard) { c.Title = e.Title }), nil
	})
	projector.On(p, func(s board, e CardMoved) (board, error) {
		return card(s, e.CardID, func(c *boardCard) { c.Column = e.Column; c.Moves++ }), nil
	})
	projector.On(p, func(s board, e CardArchived) (board, error) {
		return card(s, e.CardID, func(c *boardCard) { c.Archived = true }), nil
	})
	return p
}

// kanbanLog appends, interleaved at random, nBoards boards and nCards cards
// (each on a random board, with 3 to 7 later events that name no board) to
// server, and returns the events as $all delivers them and each board's
// events in that order.
func kanbanLog(t *testing.T, client *subscription.Client, seed uint64, nBoards, nCards int) (all []projector.Event, byBoard map[string][]projector.Event) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed))
	lives := map[string][]any{}
	boardOf := map[string]string{}
	for i := range nBoards {
		id := fmt.Sprintf("b%d", i)
		lives[boardStreams+id] = []any{BoardOpened{BoardID: id, Name: "board " + id}}
	}
	columns := []string{"todo", "doing", "review", "done"}
	for i := range nCards {
		id := fmt.Sprintf("c%03d", i)
		b := fmt.Sprintf("b%d", r.IntN(nBoards))
		boardOf[cardStreams+id] = b
		life := []any{CardAdded{CardID: id, BoardID: b, Title: "card " + id}}
		for j := range 3 + r.IntN(5) {
			switch r.IntN(4) {
			case 0:
				life = append(life, CardRenamed{CardID: id, Title: fmt.Sprintf("card %s v%d", id, j)})
			case 3:
				if j > 2 {
					life = append(life, CardArchived{CardID: id})
					continue
				}
				fallthrough
			default:
				life = append(life, CardMoved{CardID: id, Column: columns[r.IntN(len(columns))]})
			}
		}
		lives[cardStreams+id] = life
	}
	var order []string
	for s, life := range lives {
		for range life {
			order = append(order, s)
		}
	}
	slices.Sort(order)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	reg := kanbanRegistry()
	next := map[string]int{}
	ctx := context.Background()
	for _, s := range order {
		name, data, err := reg.Encode(lives[s][next[s]])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (appender{client}).Append(ctx, s, sourcetest.AnyRevision, sourcetest.Event{ID: uuid.New(), Type: name, Data: data}); err != nil {
			t.Fatal(err)
		}
		next[s]++
	}
	src := kanbanSource(t, client)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sub, err := src.Subscribe(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	byBoard = map[string][]projector.Event{}
	for len(all) < len(order) {
		d, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("reading $all after %d events: %v", len(all), err)
		}
		if d.Event == nil {
			continue
		}
		ev, err := reg.Decode(*d.Event)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, *d.Event)
		b, ok := boardOf[ev.StreamID]
		if !ok {
			b = strings.TrimPrefix(ev.StreamID, boardStreams)
		}
		byBoard[b] = append(byBoard[b], ev)
	}
	return all, byBoard
}

func kanbanSource(t *testing.T, client *subscription.Client) *subscription.All {
	t.Helper()
	src, err := subscription.NewAll(client, subscription.AllOptions{StreamPrefixes: []string{boardStreams, cardStreams}, MaxSearchWindow: 8, CheckpointInterval: 2})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func kanbanEngine(t *testing.T, store driver.Store, client *subscription.Client, policy retry.Policy) *projector.Engine {
	t.Helper()
	e, err := projector.NewEngine(store, kanbanRegistry(), []projector.Definition{boards()},
		projector.WithRetry(policy), projector.WithStreamReader(client))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// checkBoards asserts that every board is the fold of its events.
func checkBoards(t *testing.T, store driver.Store, byBoard map[string][]projector.Event) {
	t.Helper()
	p := boards()
	for _, id := range slices.Sorted(maps.Keys(byBoard)) {
		want, err := p.Fold(byBoard[id]...)
		if err != nil {
			t.Fatal(err)
		}
		var got board
		found, _, err := projector.ReadDocument(context.Background(), store, p, id, &got)
		switch {
		case err != nil || !found:
			t.Errorf("board %s: found %v, %v", id, found, err)
		case !reflect.DeepEqual(got, want):
			t.Errorf("board %s differs from the fold of its %d events:\n got %+v\nwant %+v", id, len(byBoard[id]), got, want)
		}
	}
}

// upTo is a source that delivers nothing past position: the subscription
// waits there, as at the head of a log that ends there.
type upTo struct {
	*subscription.All
	position uint64
}

func (u *upTo) Subscribe(ctx context.Context, from *projector.Checkpoint) (projector.Subscription, error) {
	sub, err := u.All.Subscribe(ctx, from)
	if err != nil {
		return nil, err
	}
	return &upToSub{Subscription: sub, position: u.position}, nil
}

type upToSub struct {
	projector.Subscription
	position uint64
}

func (s *upToSub) Next(ctx context.Context) (projector.Delivery, error) {
	d, err := s.Subscription.Next(ctx)
	if err == nil && d.Checkpoint != nil && d.Checkpoint.Position > s.position {
		<-ctx.Done()
		return projector.Delivery{}, ctx.Err()
	}
	return d, err
}

func TestTieStreams_needs_a_stream_history(t *testing.T) {
	_, err := projector.NewEngine(newStore(t), kanbanRegistry(), []projector.Definition{boards()})
	if err == nil || !strings.Contains(err.Error(), "TieStreams") || !strings.Contains(err.Error(), "WithStreamReader") {
		t.Fatalf("NewEngine without a stream reader: %v", err)
	}
}

// A kanban board under the per-stream revision map, whose cards' later
// events name no board: tied to the board of their card's first event,
// they reach it. A runner of 4 workers catches up through duplicate
// deliveries and is stopped half-way; a new engine and runner (which know
// no tie: they read them again) go on from its checkpoint. Every event is
// applied once, and every board is the fold of its events.
func TestTieStreams_a_revision_map_fed_by_card_streams_through_duplicates_and_a_restart(t *testing.T) {
	server := esdbtest.New(t)
	client := dialESDB(t, server)
	all, byBoard := kanbanLog(t, client, 71, 5, 80)
	store := newStore(t)
	server.DuplicateDeliveries(0.25)
	defer server.DuplicateDeliveries(0)
	run := func(name string, src projector.Source, until func(projector.RunnerStats) bool) projector.RunnerStats {
		r := sourcetest.NewRunner(t, "kanban", kanbanEngine(t, store, client, patient()), src, store,
			projector.WithBatch(8, 5*time.Millisecond), projector.WithCheckpointEvery(10, 10*time.Millisecond), projector.WithWorkers(4))
		x := sourcetest.Start(t, r)
		x.WaitFor(t, name, until)
		if err := x.Stop(); err != nil {
			t.Fatalf("%s: Run: %v", name, err)
		}
		return r.Stats()
	}
	total := uint64(len(all))
	reached := func(pos uint64) func(projector.RunnerStats) bool {
		return func(st projector.RunnerStats) bool { return st.Checkpoint != nil && st.Checkpoint.Position >= pos }
	}
	// The first run sees the first half of the log only: it stops in the
	// middle, whatever the machine's speed.
	mid := all[len(all)/2].Position
	first := run("first", &upTo{All: kanbanSource(t, client), position: mid}, reached(mid))
	second := run("second", kanbanSource(t, client), reached(all[len(all)-1].Position))
	t.Logf("first %+v\nsecond %+v", first, second)
	for _, st := range []projector.RunnerStats{first, second} {
		if st.Failed != 0 || st.Skipped != 0 || st.Parked != 0 || st.Unrouted != 0 {
			t.Fatalf("failed, skipped, parked or unrouted events: %+v", st)
		}
	}
	if first.Applied == 0 || second.Applied == 0 || second.Events >= total {
		t.Errorf("applied %d, then %d of %d events read: want the second run to go on from the first's checkpoint", first.Applied, second.Applied, second.Events)
	}
	if got := first.Applied + second.Applied; got != total {
		t.Errorf("applied %d over both runs, want each of the %d events once", got, total)
	}
	checkBoards(t, store, byBoard)
}

// The same log delivered shuffled, each event one to three times, by 4
// goroutines handling one event at a time on one engine, then by a second
// engine (a restart: it knows no tie) from the middle: an event whose
// predecessor has not come in time goes back to the end of the deliveries,
// as a subscription would deliver it again. Every board is the fold of its
// events.
func TestTieStreams_shuffled_duplicate_deliveries_to_4_workers(t *testing.T) {
	server := esdbtest.New(t)
	client := dialESDB(t, server)
	all, byBoard := kanbanLog(t, client, 72, 3, 20)
	store := newStore(t)
	r := rand.New(rand.NewPCG(73, 73))
	var deliveries []projector.Event
	for _, ev := range all {
		for range 1 + r.IntN(3) {
			deliveries = append(deliveries, ev)
		}
	}
	r.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })
	quick := retry.Default()
	quick.InitialDelay, quick.MaxDelay, quick.MaxRetries, quick.MaxElapsed = 2*time.Millisecond, 20*time.Millisecond, -1, 100*time.Millisecond
	applied, appliedIDs, duplicateAfter := 0, map[string]bool{}, map[string]bool{}
	// deliver hands queue to 4 goroutines; an event whose predecessor did
	// not come in time goes to the end of the queue, or, when final is
	// false, to the deliveries after the restart, which it returns.
	deliver := func(e *projector.Engine, queue []projector.Event, final bool) (later []projector.Event) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		busy := 0
		for range 4 {
			wg.Go(func() {
				for {
					mu.Lock()
					if len(queue) == 0 {
						if busy == 0 {
							mu.Unlock()
							return
						}
						mu.Unlock()
						time.Sleep(time.Millisecond)
						continue
					}
					ev := queue[0]
					queue = queue[1:]
					busy++
					mu.Unlock()
					rs, _ := e.Handle(context.Background(), ev)
					mu.Lock()
					busy--
					for _, res := range rs {
						switch {
						case res.Outcome == projector.Applied:
							applied++
							if appliedIDs[ev.ID] {
								t.Errorf("%s@%d applied twice", ev.StreamID, ev.StreamRevision)
							}
							appliedIDs[ev.ID] = true
						case res.Outcome == projector.Duplicate && final:
							duplicateAfter[ev.ID] = true
						case res.Outcome == projector.Failed && errors.Is(res.Err, projector.ErrPredecessorMissing) && final:
							queue = append(queue, ev) // delivered again later
						case res.Outcome == projector.Failed && errors.Is(res.Err, projector.ErrPredecessorMissing):
							later = append(later, ev)
						case res.Outcome != projector.Duplicate:
							t.Errorf("%s@%d: %v %v", ev.StreamID, ev.StreamRevision, res.Outcome, res.Err)
						}
					}
					if len(rs) != 1 {
						t.Errorf("%s@%d: %d results, want 1", ev.StreamID, ev.StreamRevision, len(rs))
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return later
	}
	half := len(deliveries) / 2
	later := deliver(kanbanEngine(t, store, client, quick), deliveries[:half], false)
	deliver(kanbanEngine(t, store, client, quick), append(later, deliveries[half:]...), true)
	// No event is applied twice, and each is counted applied, or the
	// second engine found it a duplicate: an event the first engine folded
	// ahead from its stream (a gap's fill) and that comes to the second
	// only is a duplicate there (the count is per engine, as the README's
	// gate section says); the boards are the fold either way.
	for _, ev := range all {
		if !appliedIDs[ev.ID] && !duplicateAfter[ev.ID] {
			t.Errorf("%s@%d: never counted applied, and not a duplicate after the restart", ev.StreamID, ev.StreamRevision)
		}
	}
	if applied > len(all) {
		t.Errorf("applied %d of %d events", applied, len(all))
	}
	checkBoards(t, store, byBoard)
}

// failingHistory is a stream history whose reads fail while failing is set.
type failingHistory struct {
	*streams
	failing atomic.Bool
}

func (f *failingHistory) ReadStream(ctx context.Context, stream string, from uint64, each func(projector.Event) error) error {
	if f.failing.Load() {
		return errors.New("connection refused")
	}
	return f.streams.ReadStream(ctx, stream, from, each)
}

// A tied event whose stream cannot be read fails as a store error does,
// retryable, under park too: not parked, not skipped. Once the stream reads
// again, the same event goes to its stream's document. An event before its
// stream's first routed one is declined, as in a stream that is not tied:
// the document the stream's first routed event went to found it missing,
// and under park it is parked there.
func TestTieStreams_a_stream_that_cannot_be_read_is_not_the_events_fault(t *testing.T) {
	s := newStore(t)
	log := projectortest.NewLog(kanbanRegistry())
	early := log.MustAppend(t, cardStreams+"z", CardRenamed{CardID: "z", Title: "draft"})
	evs := log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", BoardID: "b1", Title: "zed"}, CardMoved{CardID: "z", Column: "doing"})
	board := log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
	h := &failingHistory{streams: newStreams(append(append(early, evs...), board...)...)}
	quick := retry.Default()
	quick.InitialDelay, quick.MaxRetries = time.Millisecond, 2
	e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(quick),
		projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(h))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ev := range append(board, evs[0]) {
		if rs, err := e.Handle(ctx, ev); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Applied {
			t.Fatalf("%s@%d: %+v %v", ev.StreamID, ev.StreamRevision, rs, err)
		}
	}
	h.failing.Store(true)
	rs, _ := e.Handle(ctx, evs[1])
	var fe *projector.Error
	if len(rs) != 1 || rs[0].Outcome != projector.Failed || !errors.As(rs[0].Err, &fe) || !fe.Retryable() {
		t.Fatalf("with the stream unreadable: %+v, want a retryable failure", rs)
	}
	h.failing.Store(false)
	if rs, err := e.Handle(ctx, evs[1]); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Applied || rs[0].Document != "b1" {
		t.Fatalf("once the stream reads: %+v %v", rs, err)
	}
	// Revision 0 came before the card named its board.
	if rs, err := e.Handle(ctx, early[0]); err != nil || len(rs) != 0 {
		t.Fatalf("an event before the stream's first routed one: %+v %v; want it declined", rs, err)
	}
	parked, err := s.Parked(ctx, "kanban_boards")
	if err != nil || len(parked) != 1 || parked[0].ID != early[0].ID || parked[0].Document != "b1" || !strings.Contains(parked[0].Error, projector.ErrRoutedAway.Error()) {
		t.Fatalf("parked %+v (%v), want the early event only, against b1, routed away", parked, err)
	}
}

// An event of a tied stream whose payload does not decode, of a type whose
// router reads the payload (here a card's second CardAdded, a second board
// named), fails on the document the stream is tied to, where its policy
// has it: parked against that board, not without a document.
func TestTieStreams_an_undecodable_event_of_a_tied_stream_fails_on_the_tied_document(t *testing.T) {
	s := newStore(t)
	log := projectortest.NewLog(kanbanRegistry())
	board := log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
	card := log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", BoardID: "b1", Title: "zed"},
		projector.Event{Type: "CardAdded", Data: []byte(`{"CardID": "z", "BoardID": `)})
	if card[1].Payload != nil {
		t.Fatal("the second CardAdded decoded")
	}
	e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(retry.Default()),
		projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(newStreams(append(board, card...)...)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ev := range append(board, card[0]) {
		if rs, err := e.Handle(ctx, ev); err != nil || len(rs) != 1 || rs[0].Outcome != projector.Applied {
			t.Fatalf("%s@%d: %+v %v", ev.StreamID, ev.StreamRevision, rs, err)
		}
	}
	rs, err := e.Handle(ctx, card[1])
	if err != nil || len(rs) != 1 || rs[0].Outcome != projector.Parked || rs[0].Document != "b1" || !errors.Is(rs[0].Err, projector.ErrUndecodable) {
		t.Fatalf("the undecodable event: %+v %v; want it parked against b1, undecodable", rs, err)
	}
	parked, err := s.Parked(ctx, "kanban_boards")
	if err != nil || len(parked) != 1 || parked[0].Document != "b1" {
		t.Fatalf("parked %+v (%v), want the event against b1", parked, err)
	}
}

// Once its payload decodes, an event parked against its stream's tied
// document while it did not is not replayed there when its router names
// another document: the replay fails, saying to rebuild.
func TestTieStreams_a_replay_does_not_apply_an_event_its_router_sends_elsewhere(t *testing.T) {
	type cardAddedV0 struct{ Card, Board string }
	var broken atomic.Bool
	broken.Store(true)
	r := projector.NewRegistry()
	projector.Register[BoardOpened](r, "BoardOpened")
	projector.Register[CardAdded](r, "CardAdded", projector.Upcast("CardAddedV0", func(old cardAddedV0) (CardAdded, error) {
		if broken.Load() {
			return CardAdded{}, errors.New("the upcaster is broken")
		}
		return CardAdded{CardID: old.Card, BoardID: old.Board}, nil
	}))
	projector.Register[CardRenamed](r, "CardRenamed")
	projector.Register[CardMoved](r, "CardMoved")
	projector.Register[CardArchived](r, "CardArchived")
	s := newStore(t)
	log := projectortest.NewLog(r)
	opened := log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
	card := log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", BoardID: "b1", Title: "zed"},
		projector.Event{Type: "CardAddedV0", Data: []byte(`{"Card": "y", "Board": "b2"}`)})
	e, err := projector.NewEngine(s, r, []projector.Definition{boards()}, projector.WithRetry(retry.Default()),
		projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(newStreams(append(opened, card...)...)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ev := range append(opened, card...) {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	parked, err := s.Parked(ctx, "kanban_boards")
	if err != nil || len(parked) != 1 || parked[0].Document != "b1" {
		t.Fatalf("parked %+v (%v), want the undecodable event against b1", parked, err)
	}
	broken.Store(false) // the fix: the event names board b2
	res := e.Replay(ctx, parked[0])
	if res.Outcome != projector.Failed || res.Err == nil || !strings.Contains(res.Err.Error(), `sends it to document "b2"`) {
		t.Fatalf("replay: %v %v; want it refused, naming b2", res.Outcome, res.Err)
	}
	var got board
	if _, _, err := projector.ReadDocument(ctx, s, boards(), "b1", &got); err != nil || len(got.Cards) != 1 {
		t.Fatalf("b1 after the refused replay: %+v (%v); want card z alone", got, err)
	}
}

// A card stream's revision 0 that the board summary has nothing to do with
// (an event its upcaster dropped, one of a type nobody registered, one of a
// registered type the summary has no handler for) is declined by a router
// that switches on the payload's type, and the card's board moves past it
// under every policy, block included, tied or not, with nothing parked: the
// board equals its fold. A stream none of whose events the router routes is
// not the projection's, even when the summary handles their types.
func TestRevisionMap_a_declined_event_the_projection_does_not_handle_is_not_a_hole(t *testing.T) {
	type note struct{ Text string }
	r := kanbanRegistry()
	projector.Register[note](r, "CardNoted", projector.Upcast("CardPinged", func(json.RawMessage) (note, error) { return note{}, projector.DropEvent }))
	for _, c := range []struct {
		name string
		p    *projector.Projection[board]
	}{{"tied", boards()}, {"not tied", boardsTying()}} {
		for _, first := range []projector.Event{
			{Type: "CardPinged", Data: []byte(`{}`)},
			{Type: "CardFlipped", Data: []byte(`{}`)},
			{Type: "CardNoted", Data: []byte(`{"Text": "hello"}`)},
		} {
			t.Run(c.name+"/"+first.Type, func(t *testing.T) {
				log := projectortest.NewLog(r)
				evs := log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})
				evs = append(evs, log.MustAppend(t, cardStreams+"z", first, CardAdded{CardID: "z", BoardID: "b1", Title: "zed"})...)
				// Streams none of whose events is routed.
				evs = append(evs, log.MustAppend(t, cardStreams+"y", first, first)...)
				evs = append(evs, log.MustAppend(t, cardStreams+"x", CardRenamed{CardID: "x", Title: "orphan"}, CardMoved{CardID: "x", Column: "done"})...)
				// And one in the middle of a stream, between two routed ones.
				evs = append(evs, log.MustAppend(t, cardStreams+"w", CardAdded{CardID: "w", BoardID: "b1", Title: "w"}, first,
					CardAdded{CardID: "w", BoardID: "b1", Title: "w again"})...)
				s := newStore(t)
				e, err := projector.NewEngine(s, r, []projector.Definition{c.p}, projector.WithRetry(patient()),
					projector.WithFailurePolicy(projector.Block), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				// The card's CardAdded first, so that its board finds
				// revision 0 missing and reads the stream for it.
				for _, ev := range []projector.Event{evs[0], evs[2], evs[1], evs[3], evs[4], evs[5], evs[6], evs[7], evs[8], evs[9]} {
					if _, err := e.Handle(ctx, ev); err != nil {
						t.Fatalf("%s@%d: %v", ev.StreamID, ev.StreamRevision, err)
					}
				}
				docs := c.p.Documents(evs)
				if len(docs) != 1 {
					t.Fatalf("documents %v, want b1 only", docs)
				}
				if err := projectortest.CheckDocument(ctx, s, c.p, "b1", docs["b1"]); err != nil {
					t.Fatal(err)
				}
				if parked, err := s.Parked(ctx, "kanban_boards"); err != nil || len(parked) != 0 {
					t.Fatalf("parked %+v (%v), want none", parked, err)
				}
			})
		}
	}
}

// A parked event refused as a stray (its document never had its stream,
// whose earlier events feed another document) is refused again by a
// replay, with the same error: the replay would have given the document
// the stream from the middle. The document stays as it was.
func TestRevisionMap_a_replay_refuses_a_stray_as_the_run_did(t *testing.T) {
	log := projectortest.NewLog(kanbanRegistry())
	evs := log.MustAppend(t, boardStreams+"b2", BoardOpened{BoardID: "b2", Name: "two"})
	evs = append(evs, log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", BoardID: "b1", Title: "zed"}, CardAdded{CardID: "z", BoardID: "b2", Title: "zed"})...)
	p := boardsTying() // routes each CardAdded to the board it names
	s := newStore(t)
	e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{p}, projector.WithRetry(patient()),
		projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(newStreams(evs...)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ev := range evs {
		if _, err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	parked, err := s.Parked(ctx, "kanban_boards")
	if err != nil || len(parked) != 1 || parked[0].Document != "b2" || !strings.Contains(parked[0].Error, projector.ErrRoutedAway.Error()) {
		t.Fatalf("parked %+v (%v), want the second CardAdded against b2, routed away", parked, err)
	}
	var before board
	if _, _, err := projector.ReadDocument(ctx, s, p, "b2", &before); err != nil {
		t.Fatal(err)
	}
	r := e.Replay(ctx, parked[0])
	if r.Outcome != projector.Failed || !errors.Is(r.Err, projector.ErrRoutedAway) || !strings.Contains(r.Err.Error(), "not replayed") {
		t.Fatalf("replay: %+v, want it refused as routed away", r)
	}
	var after board
	if _, _, err := projector.ReadDocument(ctx, s, p, "b2", &after); err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("b2 after the replay %+v (%v), want it as it was, %+v", after, err, before)
	}
}

// deletedStreams is an event store whose streams named in gone are deleted:
// their reads fail, and nothing is left of them (ErrStreamDeleted), as
// after a soft delete, while their events are still in $all.
type deletedStreams struct {
	*streams
	gone map[string]bool
}

func (d deletedStreams) FirstRevision(ctx context.Context, stream string) (uint64, error) {
	if d.gone[stream] {
		return 0, projector.ErrStreamDeleted
	}
	return d.streams.FirstRevision(ctx, stream)
}

func (d deletedStreams) ReadStream(ctx context.Context, stream string, from uint64, each func(projector.Event) error) error {
	if d.gone[stream] {
		return fmt.Errorf("stream %q not found", stream)
	}
	return d.streams.ReadStream(ctx, stream, from, each)
}

// A tied stream deleted since its events were written, its events still in
// $all: a catch-up or a rebuild from the start sees its first routed event
// before the declined ones, and sends those to its document too, as the
// live run did, rather than leaving them alone for want of a stream to
// read. Per event and in one batch.
func TestTieStreams_a_deleted_stream_ties_its_events_by_the_routed_one_seen(t *testing.T) {
	log := projectortest.NewLog(kanbanRegistry())
	var evs []projector.Event
	evs = append(evs, log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})...)
	evs = append(evs, log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", BoardID: "b1", Title: "t"},
		CardMoved{CardID: "z", Column: "done"}, CardArchived{CardID: "z"})...)
	ctx := context.Background()
	for _, batched := range []bool{false, true} {
		s := newStore(t)
		history := deletedStreams{newStreams(evs...), map[string]bool{cardStreams + "z": true}}
		e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(patient()),
			projector.WithStreamReader(history))
		if err != nil {
			t.Fatal(err)
		}
		if batched {
			e.HandleBatch(ctx, evs)
		} else {
			for _, ev := range evs {
				if _, err := e.Handle(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := projectortest.CheckDocument(ctx, s, boards(), "b1", boards().Documents(evs)["b1"]); err != nil {
			t.Errorf("batched %v: %v", batched, err)
		}
	}
}

// A tied stream deleted since, its events still in $all, whose first events
// its router declines (a card added to no board, renamed) before one it
// routes: a catch-up or a rebuild from the start (under block here) leaves
// those alone, as it would with the stream still there (none before them
// routes), instead of failing the second one for a stream it cannot read,
// which stopped the projection. Per event and in one batch.
func TestTieStreams_a_deleted_stream_whose_first_events_are_declined_leaves_them_alone(t *testing.T) {
	log := projectortest.NewLog(kanbanRegistry())
	var evs []projector.Event
	evs = append(evs, log.MustAppend(t, boardStreams+"b1", BoardOpened{BoardID: "b1", Name: "one"})...)
	evs = append(evs, log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", Title: "draft"},
		CardRenamed{CardID: "z", Title: "t"}, CardAdded{CardID: "z", BoardID: "b1", Title: "t"},
		CardMoved{CardID: "z", Column: "done"})...)
	ctx := context.Background()
	boards := func() *projector.Projection[board] {
		return boardsDecliningEmpty().Idempotency(projector.HandledIDs(100))
	}
	want := boards().Documents(evs)["b1"]
	if len(want) != 3 {
		t.Fatalf("the board's events: %d, want its opening, the card's adding to it and its move", len(want))
	}
	for _, batched := range []bool{false, true} {
		s := newStore(t)
		history := deletedStreams{newStreams(evs...), map[string]bool{cardStreams + "z": true}}
		e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boards()}, projector.WithRetry(patient()),
			projector.WithFailurePolicy(projector.Block), projector.WithStreamReader(history))
		if err != nil {
			t.Fatal(err)
		}
		var rs []projector.Result
		if batched {
			for _, r := range e.HandleBatch(ctx, evs) {
				rs = append(rs, r...)
			}
		} else {
			for _, ev := range evs {
				r, err := e.Handle(ctx, ev)
				if err != nil {
					t.Fatalf("batched %v: %s@%d: %v", batched, ev.StreamID, ev.StreamRevision, err)
				}
				rs = append(rs, r...)
			}
		}
		for _, r := range rs {
			if r.Err != nil || r.Outcome != projector.Applied {
				t.Errorf("batched %v: %+v, want each event applied or left alone", batched, r)
			}
		}
		if err := projectortest.CheckDocument(ctx, s, boards(), "b1", want); err != nil {
			t.Errorf("batched %v: %v", batched, err)
		}
	}
}

// The same deleted tied stream, its events out of order (a group's
// consumers, a redelivery): its first event is seen declined, then its
// third, whose second is not known (it fails under the policy: which
// document the second feeds cannot be read), then its second, which is
// left alone, as its only earlier event was seen declined. A read that
// finds the stream deleted keeps what was known before it.
func TestTieStreams_a_deleted_stream_out_of_order_keeps_what_it_knew_of_its_first_events(t *testing.T) {
	log := projectortest.NewLog(kanbanRegistry())
	evs := log.MustAppend(t, cardStreams+"z", CardAdded{CardID: "z", Title: "draft"},
		CardRenamed{CardID: "z", Title: "t"}, CardRenamed{CardID: "z", Title: "u"})
	ctx := context.Background()
	s := newStore(t)
	history := deletedStreams{newStreams(evs...), map[string]bool{cardStreams + "z": true}}
	e, err := projector.NewEngine(s, kanbanRegistry(), []projector.Definition{boardsDecliningEmpty().Idempotency(projector.HandledIDs(100))},
		projector.WithRetry(patient()), projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(history))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ev     projector.Event
		parked bool
	}{{evs[0], false}, {evs[2], true}, {evs[1], false}} {
		rs, err := e.Handle(ctx, c.ev)
		if err != nil {
			t.Fatal(err)
		}
		parked := len(rs) == 1 && rs[0].Outcome == projector.Parked
		if parked != c.parked || (!c.parked && len(rs) != 0) {
			t.Errorf("revision %d: %+v, want parked %v (else left alone)", c.ev.StreamRevision, rs, c.parked)
		}
	}
}
