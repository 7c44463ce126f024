package projector_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
)

// A bank ledger: one account per stream "acct-<branch>.<n>". A deposit
// carries the bank's reference, a 64-bit hash, which BSON cannot encode
// above MaxInt64: the account whose deposit has one cannot be stored.
type AcctOpened struct {
	ID string `json:"id"`
}

type AcctDeposited struct {
	Cents int64  `json:"cents"`
	Ref   uint64 `json:"ref"`
}

type account struct {
	Balance int64  `bson:"balance"`
	LastRef uint64 `bson:"lastRef"`
	Moves   int    `bson:"moves"`
}

// branch sums the accounts of a branch: one document fed by many streams.
type branch struct {
	Total   int64  `bson:"total"`
	LastRef uint64 `bson:"lastRef"`
	Moves   int    `bson:"moves"`
}

func ledgerRegistry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[AcctOpened](r, "acct.opened")
	projector.Register[AcctDeposited](r, "acct.deposited")
	return r
}

func accounts() *projector.Projection[account] {
	p := projector.New[account]("accounts", projector.StreamSuffix("acct-")).RoutesByEnvelope()
	projector.Create(p, func(e AcctOpened) (account, error) { return account{}, nil })
	projector.On(p, func(a account, e AcctDeposited) (account, error) {
		a.Balance += e.Cents
		a.LastRef = e.Ref
		a.Moves++
		return a, nil
	})
	return p
}

func branches(strategy projector.Strategy) *projector.Projection[branch] {
	p := projector.New[branch]("branches", func(ev projector.Event) (string, bool) {
		id, ok := strings.CutPrefix(ev.StreamID, "acct-")
		b, _, _ := strings.Cut(id, ".")
		return b, ok
	}).Idempotency(strategy)
	projector.On(p, func(s branch, e AcctDeposited) (branch, error) {
		s.Total += e.Cents
		s.LastRef = e.Ref
		s.Moves++
		return s, nil
	})
	return p
}

const bigRef = uint64(1)<<63 + 12345 // above MaxInt64

// ledgerLog: accounts a.1, a.2 and b.1; a.2's second deposit has a
// reference BSON cannot encode, and its next deposit replaces it.
func ledgerLog(t *testing.T) []projector.Event {
	return rawLog(t, ledgerRegistry(), func(add func(string, ...any)) {
		add("acct-a.1", AcctOpened{ID: "a.1"}, AcctDeposited{Cents: 100, Ref: 1})
		add("acct-a.2", AcctOpened{ID: "a.2"}, AcctDeposited{Cents: 10, Ref: 2})
		add("acct-b.1", AcctOpened{ID: "b.1"}, AcctDeposited{Cents: 7, Ref: 3})
		add("acct-a.2", AcctDeposited{Cents: 20, Ref: bigRef})
		add("acct-a.1", AcctDeposited{Cents: 5, Ref: 4})
		add("acct-a.2", AcctDeposited{Cents: 40, Ref: 5})
		add("acct-b.1", AcctDeposited{Cents: 1, Ref: 6})
	})
}

// Per event and batched, under Park, Skip and Hold: the account whose state
// the store cannot keep costs its own document only. Per event, a.2 moves
// past the deposit (Park, Skip: the fold without it; Park records it) or is
// held before it (Hold). A batch folds a.2 past the state it cannot store,
// to the next deposit's, which it can: the fold.
func TestEngine_a_state_the_store_cannot_keep_costs_its_own_document_only(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Park, projector.Skip, projector.Hold} {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/batched=%v", pol, batched), func(t *testing.T) {
				ctx := context.Background()
				raw := ledgerLog(t)
				s := newStore(t)
				p := accounts()
				e := faultEngine(t, s, ledgerRegistry(), pol, raw, p)
				for i, rs := range deliver(e, raw, batched) {
					for _, r := range rs {
						if r.Outcome == projector.Failed {
							t.Errorf("%s@%d failed (a runner stops the projection there): %v", raw[i].StreamID, raw[i].StreamRevision, r.Err)
						}
					}
				}
				dec := decodeAll(t, ledgerRegistry(), raw)
				docs := p.Documents(dec)
				for _, id := range []string{"a.1", "b.1"} {
					if err := projectortest.CheckDocument(ctx, s, p, id, docs[id]); err != nil {
						t.Errorf("%s: %v", id, err)
					}
				}
				a2 := docs["a.2"]
				if !batched {
					a2 = slices.DeleteFunc(slices.Clone(a2), func(ev projector.Event) bool {
						return ev.StreamRevision == 2 || (pol == projector.Hold && ev.StreamRevision > 2)
					})
				}
				if err := projectortest.CheckDocument(ctx, s, p, "a.2", a2); err != nil {
					t.Errorf("a.2: %v", err)
				}
				all, held, _ := parkedRecords(t, s, p.Name())
				want := map[projector.FailurePolicy]int{projector.Park: 1, projector.Skip: 0, projector.Hold: 2}[pol]
				if batched {
					want = 0
				}
				if len(all) != want {
					t.Fatalf("%d records, want %d", len(all), want)
				}
				if want > 0 && (all[0].StreamID != "acct-a.2" || all[0].StreamRevision != 2 || !strings.Contains(all[0].Error, driver.ErrUnencodable.Error())) {
					t.Errorf("record %s@%d %q, want acct-a.2@2 naming the refusal", all[0].StreamID, all[0].StreamRevision, all[0].Error)
				}
				if pol == projector.Hold && !batched && len(held) != 2 {
					t.Errorf("%d held records, want 2 (the deposit, and the one behind it)", len(held))
				}
			})
		}
	}
}

// Under Block the refusal stops at once, not after the retries of an
// outage, and says what the store refused.
func TestEngine_a_state_the_store_cannot_keep_fails_at_once_under_Block(t *testing.T) {
	raw := ledgerLog(t)
	s := newStore(t)
	e := faultEngine(t, s, ledgerRegistry(), projector.Block, raw, accounts())
	for _, ev := range raw[:6] {
		if _, err := e.Handle(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	rs, _ := e.Handle(context.Background(), raw[6])
	var fe *projector.Error
	if len(rs) != 1 || rs[0].Outcome != projector.Failed || !errors.As(rs[0].Err, &fe) || !errors.Is(rs[0].Err, driver.ErrUnencodable) {
		t.Fatalf("%s@%d: %+v, want failed with driver.ErrUnencodable", raw[6].StreamID, raw[6].StreamRevision, rs)
	}
	if fe.Retryable() || fe.Attempts != 1 || rs[0].Waits != 0 {
		t.Errorf("retryable %v after %d attempts and %d waits; want a permanent failure at the first", fe.Retryable(), fe.Attempts, rs[0].Waits)
	}
}

// A runner catching up under Park, for a document fed by one stream and
// for one fed by many under each versioned strategy: the deposit the store
// cannot keep is parked, and the checkpoint reaches the head.
func TestRunner_catches_up_past_a_state_the_store_cannot_keep(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	for name, def := range map[string]projector.Definition{
		"accounts":                accounts(),
		"branches/RevisionMap":    branches(projector.RevisionMap()),
		"branches/HandledIDs":     branches(projector.HandledIDs(100)),
		"branches/GlobalPosition": branches(projector.GlobalPosition()),
	} {
		t.Run(name, func(t *testing.T) {
			raw := rawLog(t, ledgerRegistry(), func(add func(string, ...any)) {
				add("acct-a.1", AcctOpened{ID: "a.1"}, AcctDeposited{Cents: 100, Ref: 1})
				add("acct-b.1", AcctOpened{ID: "b.1"}, AcctDeposited{Cents: 7, Ref: 3})
				add("acct-a.2", AcctOpened{ID: "a.2"}, AcctDeposited{Cents: 20, Ref: bigRef}) // a.2's (and branch a's) last
			})
			s := newStore(t)
			e := faultEngine(t, s, ledgerRegistry(), projector.Park, raw, def)
			r, err := projector.NewRunner("ledger", e, &scripted{events: raw}, s, projector.WithReconnect(fastReconnect()), projector.WithWorkers(1))
			if err != nil {
				t.Fatal(err)
			}
			last := raw[len(raw)-1].Position
			if err := runUntil(t, r, func(st projector.RunnerStats) bool {
				return st.CaughtUp && st.Checkpoint != nil && st.Checkpoint.Position == last
			}); err != nil {
				t.Fatalf("run: %v (stats %+v)", err, r.Stats())
			}
			all, _, _ := parkedRecords(t, s, def.Name())
			if len(all) != 1 || all[0].StreamID != "acct-a.2" || all[0].StreamRevision != 1 {
				t.Errorf("%d records; want acct-a.2@1 parked", len(all))
			}
		})
	}
}

// A document larger than MongoDB stores (16 MiB): an account that keeps its
// statement lines, and one import that makes it too large. Under Park the
// import is parked, and the other accounts are written.
type AcctImported struct {
	Lines []string `json:"lines"`
}

type statement struct {
	Lines []string `bson:"lines"`
}

func TestEngine_parks_an_event_that_makes_its_document_too_large(t *testing.T) {
	r := projector.NewRegistry()
	projector.Register[AcctImported](r, "acct.imported")
	p := projector.New[statement]("statements", projector.StreamSuffix("acct-")).RoutesByEnvelope()
	projector.On(p, func(s statement, e AcctImported) (statement, error) {
		s.Lines = append(s.Lines, e.Lines...)
		return s, nil
	})
	many := make([]string, 17)
	for i := range many {
		many[i] = strings.Repeat("x", 1<<20)
	}
	raw := rawLog(t, r, func(add func(string, ...any)) {
		add("acct-1", AcctImported{Lines: []string{"a"}})
		add("acct-2", AcctImported{Lines: []string{"b"}}, AcctImported{Lines: many})
		add("acct-3", AcctImported{Lines: []string{"c"}})
	})
	s := newStore(t)
	e := faultEngine(t, s, r, projector.Park, raw, p)
	start := time.Now()
	for i, rs := range deliver(e, raw, false) {
		want := projector.Applied
		if raw[i].StreamID == "acct-2" && raw[i].StreamRevision == 1 {
			want = projector.Parked
		}
		if len(rs) != 1 || rs[0].Outcome != want {
			t.Errorf("%s@%d: %+v, want %v", raw[i].StreamID, raw[i].StreamRevision, rs, want)
		}
	}
	t.Logf("delivered in %v", time.Since(start))
	for id, want := range map[string][]string{"1": {"a"}, "2": {"b"}, "3": {"c"}} {
		var got statement
		if _, found, err := s.Load(context.Background(), p.Collection(), id, 0, &got); err != nil || !found || strings.Join(got.Lines, ",") != strings.Join(want, ",") {
			t.Errorf("statement %s: %v found %v, err %v; want lines %v", id, len(got.Lines), found, err, want)
		}
	}
}

// A stored document that does not decode into the projection's state (its
// type changed in a way the document does not fit) fails the event at
// once, saying so, per event and batched: it was waited for as for a store
// that does not answer ("wanted revision 1, 8 attempts").
func TestEngine_a_stored_document_that_does_not_decode_fails_at_once(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			raw := rawLog(t, ledgerRegistry(), func(add func(string, ...any)) {
				add("acct-a.1", AcctOpened{ID: "a.1"}, AcctDeposited{Cents: 100, Ref: 1})
			})
			s := newStore(t)
			p := accounts()
			e := faultEngine(t, s, ledgerRegistry(), projector.Park, raw, p)
			deliver(e, raw[:1], false)
			// The document as an older version of the projection stored it.
			if _, err := s.Database().Collection(p.Collection()).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "a.1"}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "balance", Value: "one hundred"}}}}); err != nil {
				t.Fatal(err)
			}
			rs := deliver(e, raw[1:], batched)[0]
			var fe *projector.Error
			if len(rs) != 1 || rs[0].Outcome != projector.Failed || !errors.As(rs[0].Err, &fe) {
				t.Fatalf("%+v, want failed", rs)
			}
			if fe.Retryable() || rs[0].Waits != 0 || !strings.Contains(fe.Error(), "rebuild the projection") {
				t.Errorf("retryable %v after %d waits: %v; want a permanent failure at once, saying to rebuild", fe.Retryable(), rs[0].Waits, fe)
			}
		})
	}
}

// A stored document with a field the projection's state has no field for
// (one renamed without a bson tag keeping its stored name, "TotalCents"
// stored as "totalcents", now "Balance") fails the event at once, naming
// the field, under the revision gate and under a strategy of many streams,
// per event and batched: decoded, the field's value was lost without a
// word, and the document's next write dropped it.
func TestEngine_a_stored_document_with_a_field_the_state_has_not_fails_at_once(t *testing.T) {
	for _, strategy := range []projector.Strategy{projector.StreamRevision(), projector.RevisionMap()} {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/batched=%v", strategy, batched), func(t *testing.T) {
				raw := rawLog(t, ledgerRegistry(), func(add func(string, ...any)) {
					add("acct-a.1", AcctOpened{ID: "a.1"}, AcctDeposited{Cents: 100, Ref: 1}, AcctDeposited{Cents: 5, Ref: 2})
				})
				s := newStore(t)
				var p projector.Definition = accounts()
				id := "a.1"
				if strategy != projector.StreamRevision() {
					p, id = branches(strategy), "a"
				}
				e := faultEngine(t, s, ledgerRegistry(), projector.Park, raw, p)
				deliver(e, raw[:2], false)
				// The document as a build whose field had another name stored it.
				if _, err := s.Database().Collection(p.Collection()).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: id}},
					bson.D{{Key: "$set", Value: bson.D{{Key: "totalcents", Value: 100}}}}); err != nil {
					t.Fatal(err)
				}
				rs := deliver(e, raw[2:], batched)[0]
				var fe *projector.Error
				if len(rs) != 1 || rs[0].Outcome != projector.Failed || !errors.As(rs[0].Err, &fe) {
					t.Fatalf("%+v, want failed", rs)
				}
				if want := `the stored document has field "totalcents", which`; fe.Retryable() || !strings.Contains(fe.Error(), want) ||
					!strings.Contains(fe.Error(), "bson:\"totalcents\"") {
					t.Errorf("retryable %v: %v; want a permanent failure naming the field and the tag that keeps it", fe.Retryable(), fe)
				}
				doc, err := s.Database().Collection(p.Collection()).FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Raw()
				if err != nil || doc.Lookup("totalcents").IsZero() {
					t.Errorf("the stored field was dropped (%v): %s", err, doc)
				}
			})
		}
	}
}
