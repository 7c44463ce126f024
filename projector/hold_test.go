package projector_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// trail is a read model that shows the order its events were applied in:
// the revisions, and the quantity of each product.
type trail struct {
	Revisions []uint64       `bson:"revisions"`
	Items     map[string]int `bson:"items"`
}

// trailProjection is a projection with a bug while broken is set: it fails
// on the product "poison".
func trailProjection(broken *atomic.Bool, opts ...func(*projector.Projection[trail])) *projector.Projection[trail] {
	p := projector.New[trail]("trail", projector.StreamSuffix(cart.StreamPrefix))
	step := func(s trail, ev projector.Event, product string, qty int) (trail, error) {
		if broken.Load() && product == "poison" {
			return s, errors.New("bug: cannot handle the poison product")
		}
		items := map[string]int{}
		for k, v := range s.Items {
			items[k] = v
		}
		if product != "" {
			items[product] += qty
		}
		return trail{Revisions: append(slices.Clone(s.Revisions), ev.StreamRevision), Items: items}, nil
	}
	projector.Create(p, func(cart.ShoppingCartOpened) (trail, error) {
		return trail{Revisions: []uint64{0}, Items: map[string]int{}}, nil
	})
	projector.OnEvent(p, func(s trail, e cart.ProductItemAddedToShoppingCart, ev projector.Event) (trail, error) {
		return step(s, ev, e.ProductItem.ProductID, e.ProductItem.Quantity)
	})
	projector.OnEvent(p, func(s trail, e cart.ProductItemRemovedFromShoppingCart, ev projector.Event) (trail, error) {
		return step(s, ev, e.ProductItem.ProductID, -e.ProductItem.Quantity)
	})
	projector.OnEvent(p, func(s trail, _ cart.ShoppingCartConfirmed, ev projector.Event) (trail, error) {
		return step(s, ev, "", 0)
	})
	projector.OnEvent(p, func(s trail, _ cart.ShoppingCartCanceled, ev projector.Event) (trail, error) {
		return step(s, ev, "", 0)
	})
	for _, o := range opts {
		o(p)
	}
	return p
}

// holdLog is n carts and one with a poison product at revision 2,
// shuffled over the log; it returns the log, each cart's events, and the
// poisoned cart's id.
func holdLog(t *testing.T, n int) (all []projector.Event, carts map[string][]projector.Event, poisoned string) {
	t.Helper()
	r := rand.New(rand.NewPCG(16, 16))
	log := projectortest.NewLog(cart.Registry())
	lives := map[string][]any{}
	var order []string
	for i := range n {
		id := fmt.Sprintf("h%03d", i)
		lives[id] = cart.RandomLife(r, id, "client", 8, t0)
	}
	poisoned = "poisoned"
	item := func(p string, q int) cart.ProductItem { return cart.ProductItem{ProductID: p, Quantity: q} }
	lives[poisoned] = []any{
		cart.ShoppingCartOpened{ShoppingCartID: poisoned, ClientID: "client", OpenedAt: t0},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: poisoned, ProductItem: item("a", 2)},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: poisoned, ProductItem: item("poison", 1)},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: poisoned, ProductItem: item("b", 3)},
		cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: poisoned, ProductItem: item("a", 1)},
		cart.ProductItemAddedToShoppingCart{ShoppingCartID: poisoned, ProductItem: item("c", 1)},
		cart.ShoppingCartConfirmed{ShoppingCartID: poisoned, ConfirmedAt: t0},
	}
	for id, life := range lives {
		for range life {
			order = append(order, id)
		}
	}
	slices.Sort(order)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	carts = map[string][]projector.Event{}
	for _, id := range order {
		ev := log.MustAppend(t, cart.StreamID(id), lives[id][len(carts[id])])[0]
		carts[id] = append(carts[id], ev)
		ev.Payload = nil // delivered encoded, as from a server
		all = append(all, ev)
	}
	return all, carts, poisoned
}

// Under the hold policy a poison event holds its document only: the
// document stays before it, its later events are recorded behind it in
// order without being applied, the other documents (200 batched, 50 one
// event at a time) are the fold of their events, and the checkpoint
// reaches the end. Once the projection is
// fixed, ReplayHeld brings the held document to the fold of all its
// events; replayed again (a replay killed before its records were marked),
// it applies nothing twice.
func TestHold_a_poison_event_holds_its_document_only_and_replay_brings_it_to_the_fold(t *testing.T) {
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			ctx := context.Background()
			var broken atomic.Bool
			broken.Store(true)
			p := trailProjection(&broken, func(p *projector.Projection[trail]) { p.OnFailure(projector.Hold) })
			n := 200
			if !batched {
				n = 50 // a write at a time, each a pass over the collection on FerretDB: bounded under -race on a loaded machine
			}
			all, carts, poisoned := holdLog(t, n)
			s := newStore(t)
			var logs lockedbuf.Buffer
			e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()), projector.WithParker(s),
				projector.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			// Quarantined, not an error: the event that holds its document is
			// logged at warn, with its error, and then the hold.
			t.Cleanup(func() {
				for _, want := range []string{`level=WARN msg="event failed" projection=trail document=` + poisoned, `level=WARN msg="document held: `} {
					if !strings.Contains(logs.String(), want) {
						t.Errorf("the log lacks %s:\n%s", want, logs.String())
					}
				}
				if strings.Contains(logs.String(), "level=ERROR") {
					t.Errorf("an error line, though the document is held:\n%s", logs.String())
				}
			})
			opts := []projector.RunnerOption{projector.WithWorkers(2), projector.WithReconnect(fastReconnect())}
			if !batched {
				opts = append(opts, projector.WithBatch(1, 0))
			}
			r, err := projector.NewRunner("hold", e, &scripted{events: all}, s, opts...)
			if err != nil {
				t.Fatal(err)
			}
			last := all[len(all)-1].Position
			err = runUntil(t, r, func(st projector.RunnerStats) bool {
				return st.Checkpoint != nil && st.Checkpoint.Position == last
			})
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("run: %v", err)
			}
			held := carts[poisoned][2:]
			st := r.Stats()
			if st.Failed != 0 || st.Held != uint64(len(held)) {
				t.Fatalf("failed %d, held %d: want 0 failed and the %d events from the poison on held", st.Failed, st.Held, len(held))
			}
			for id, evs := range carts {
				if id == poisoned {
					continue
				}
				if err := projectortest.CheckDocument(ctx, s, p, id, evs); err != nil {
					t.Fatal(err)
				}
			}
			// The held document stays before the poison event.
			if err := projectortest.CheckDocument(ctx, s, p, poisoned, carts[poisoned][:2]); err != nil {
				t.Fatalf("held document: %v", err)
			}
			records := heldRecords(t, s, poisoned)
			var revs []uint64
			for _, pe := range records {
				revs = append(revs, pe.StreamRevision)
			}
			slices.Sort(revs)
			if want := []uint64{2, 3, 4, 5, 6}; !slices.Equal(revs, want) {
				t.Fatalf("held records of revisions %v, want %v", revs, want)
			}
			if docs, err := s.Held(ctx, "trail", "trail"); err != nil || len(docs) != 1 || docs[poisoned] != len(held) {
				t.Fatalf("held documents %v (%v), want %s holding %d", docs, err, poisoned, len(held))
			}

			// Still broken: nothing past the poison applies.
			again, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()), projector.WithParker(s))
			if err != nil {
				t.Fatal(err)
			}
			rep := again.ReplayHeld(ctx, "trail", records)
			if len(rep.Applied) != 0 || len(rep.Left) != len(records) || rep.Err == nil {
				t.Fatalf("replay while broken: %d applied, %d left, %v", len(rep.Applied), len(rep.Left), rep.Err)
			}
			// Fixed.
			broken.Store(false)
			rep = again.ReplayHeld(ctx, "trail", records)
			if len(rep.Left) != 0 || len(rep.Applied) != len(records) {
				t.Fatalf("replay once fixed: %d applied, %d left: %v", len(rep.Applied), len(rep.Left), rep.Err)
			}
			if err := projectortest.CheckDocument(ctx, s, p, poisoned, carts[poisoned]); err != nil {
				t.Fatalf("after the replay: %v", err)
			}
			// Killed before marking: a second replay applies nothing twice.
			rep = again.ReplayHeld(ctx, "trail", records)
			if len(rep.Left) != 0 {
				t.Fatalf("second replay: %d left: %v", len(rep.Left), rep.Err)
			}
			if err := projectortest.CheckDocument(ctx, s, p, poisoned, carts[poisoned]); err != nil {
				t.Fatalf("after a second replay: %v", err)
			}
			for _, pe := range rep.Applied {
				if err := s.Replayed(ctx, pe, nil); err != nil {
					t.Fatal(err)
				}
			}
			if docs, err := s.Held(ctx, "trail", "trail"); err != nil || len(docs) != 0 {
				t.Fatalf("held documents after the replay: %v (%v)", docs, err)
			}
		})
	}
}

func heldRecords(t *testing.T, s *mongostore.Store, doc string) []projector.ParkedEvent {
	t.Helper()
	parked, err := s.Parked(context.Background(), "trail")
	if err != nil {
		t.Fatal(err)
	}
	var out []projector.ParkedEvent
	for _, pe := range parked {
		if pe.Held && pe.Document == doc {
			out = append(out, pe)
		}
	}
	return out
}

// The hold policy needs documents that know which events they have
// applied: under the other strategies it is refused in one line.
func TestHold_is_refused_for_a_strategy_without_revisions(t *testing.T) {
	var broken atomic.Bool
	p := trailProjection(&broken, func(p *projector.Projection[trail]) {
		p.OnFailure(projector.Hold).Idempotency(projector.HandledIDs(100))
	})
	s := newStore(t)
	_, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithParker(s))
	if err == nil || !strings.Contains(err.Error(), "the hold policy needs the StreamRevision or RevisionMap strategy") {
		t.Fatalf("NewEngine: %v, want the hold policy refused", err)
	}
}

// Prepare under the hold policy sets up the parked records' index (the
// lookups of a held document's events use it); under another policy it
// leaves projector_parked alone.
func TestHold_Prepare_creates_the_held_lookups_index(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Hold, projector.Block} {
		t.Run(pol.String(), func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
				projector.WithParker(s), projector.WithFailurePolicy(pol))
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			specs, err := s.Database().Collection(mongostore.ParkedCollection).Indexes().ListSpecifications(ctx)
			if err != nil {
				t.Fatal(err)
			}
			indexed := slices.ContainsFunc(specs, func(sp mongo.IndexSpecification) bool {
				return strings.Contains(sp.KeysDocument.String(), `"document"`)
			})
			if indexed != (pol == projector.Hold) {
				t.Fatalf("under %v: indexed %v (%d indexes)", pol, indexed, len(specs))
			}
		})
	}
}
