package projector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
)

// slowUpdates is the store with every Update slowed down: the event in
// flight stays there while the next one of its document queues behind it.
// The first Update of each document says which it is on entered as it
// begins.
type slowUpdates struct {
	*mongostore.Store
	delay   time.Duration
	seen    *sync.Map
	entered chan string
}

func (s slowUpdates) Update(ctx context.Context, collection, id string, from uint64, head driver.Head, state any) (bool, error) {
	if _, again := s.seen.LoadOrStore(id, true); !again {
		s.entered <- id
	}
	time.Sleep(s.delay)
	return s.Store.Update(ctx, collection, id, from, head, state)
}

// An account's deposit whose state the store refuses (a.N@1) is in flight
// while the account's next deposit (a.N@2, a fine one) queues behind it in
// the same engine, as a persistent subscription group's consumer delivers
// them. Under Park the refused deposit is parked and the next one must
// apply: it has nothing to do with the refusal.
func TestEngine_the_event_behind_an_unstorable_one_is_not_parked_with_its_refusal(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	const n = 200
	raw := rawLog(t, ledgerRegistry(), func(add func(string, ...any)) {
		for i := range n {
			s := fmt.Sprintf("acct-a.%d", i)
			add(s, AcctOpened{ID: s}, AcctDeposited{Cents: 20, Ref: bigRef}, AcctDeposited{Cents: 40, Ref: 5})
		}
	})
	s := newStore(t)
	st := slowUpdates{Store: s, delay: 10 * time.Millisecond, seen: &sync.Map{}, entered: make(chan string, 1)}
	soon := patient()
	soon.MaxElapsed = 5 * time.Second
	e, err := projector.NewEngine(st, ledgerRegistry(), []projector.Definition{accounts()}, projector.WithRetry(soon),
		projector.WithFailurePolicy(projector.Park), projector.WithParker(s), projector.WithStreamReader(newStreams(raw...)))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lost := 0
	for i := range n {
		open, refused, next := raw[3*i], raw[3*i+1], raw[3*i+2]
		if _, err := e.Handle(ctx, open); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var rRefused, rNext []projector.Result
		wg.Go(func() { rRefused, _ = e.Handle(ctx, refused) })
		if id := <-st.entered; "acct-"+id != refused.StreamID {
			t.Fatalf("the first Update is of document %s, want %s's", id, refused.StreamID)
		}
		// refused is in its Update: next queues behind it.
		wg.Go(func() { rNext, _ = e.Handle(ctx, next) })
		wg.Wait()
		if len(rRefused) != 1 || rRefused[0].Outcome != projector.Parked {
			t.Errorf("%s@1: %+v, want parked", refused.StreamID, rRefused)
		}
		if len(rNext) != 1 || rNext[0].Outcome != projector.Applied {
			lost++
			defer func() { t.Logf("after %d accounts", i+1) }()
			if lost == 1 {
				t.Errorf("%s@2, a deposit the store can keep: %v %v, want applied", next.StreamID, rNext[0].Outcome, rNext[0].Err)
			}
			if errors.Is(rNext[0].Err, projector.ErrPredecessorFailed) && errors.Is(rNext[0].Err, driver.ErrUnencodable) {
				t.Logf("%s@2 %v with its predecessor's refusal", next.StreamID, rNext[0].Outcome)
			}
			break
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d deposits behind a refused one not applied", lost, n)
	}
}

// Under GlobalPosition, the admission parked with no document is delivered
// again once the router is fixed (the runner restarts from a checkpoint
// before it, as a deploy of the fix does) and applies to w1; later events
// move w1 past it. replay-parked then replays the record: w1 has the
// admission already ("the event was delivered again and routed since"
// counts as replayed), and must not get it twice.
func TestEngine_Replay_under_GlobalPosition_of_an_unrouted_event_delivered_again_since_does_not_apply_it_twice(t *testing.T) {
	for _, name := range []string{"GlobalPosition", "RevisionMap"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var fixed atomic.Bool
			strategy := projector.GlobalPosition()
			if name == "RevisionMap" {
				strategy = projector.RevisionMap()
			}
			p := wards(strategy, &fixed)
			w1 := []byte(`{"ward": "w1"}`)
			var raw []projector.Event
			add := func(stream string, rev uint64, typ string, meta []byte) {
				wardEvent(&raw, stream, rev, typ, `{}`, meta)
			}
			add("patient-1", 0, "patient.admitted", w1)
			add("patient-2", 0, "patient.admitted", nil) // the desk without the ward
			add("patient-3", 0, "patient.admitted", w1)
			add("patient-4", 0, "patient.admitted", w1)
			s := newStore(t)
			e := faultEngine(t, s, wardRegistry(), projector.Park, raw, p)
			deliver(e, raw[:2], false) // patient-2's admission parked with no document; then the process stops
			parked, err := s.Parked(ctx, p.Name())
			if err != nil || len(parked) != 1 || parked[0].Document != "" {
				t.Fatalf("%d records (%v), want patient-2's admission, with no document", len(parked), err)
			}
			fixed.Store(true)
			// The fix deployed: the runner resumes from its checkpoint, before
			// patient-2's admission, which now routes to w1.
			for _, rs := range deliver(e, raw[1:], false) {
				if len(rs) != 1 || rs[0].Outcome != projector.Applied {
					t.Fatalf("redelivery: %+v", rs)
				}
			}
			want := ward{Occupied: 4, Admissions: 4}
			var before ward
			if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &before); err != nil || before != want {
				t.Fatalf("w1 = %+v (%v) before the replay, want %+v", before, err, want)
			}
			res := e.Replay(ctx, parked[0])
			var after ward
			if _, _, err := projector.ReadDocument(ctx, s, p, "w1", &after); err != nil || after != want {
				t.Errorf("replay: %v %v, w1 = %+v (%v); want %+v: the admission applied twice", res.Outcome, res.Err, after, err, want)
			}
		})
	}
}

// The same record replayed through the library's Engine.Replay into a
// rebuild's collection, which folded the admission (its router fixed): the
// record is another build's (Replay's doc: "the event was parked in an
// earlier build, and the current one, a rebuild, folded it" is a
// duplicate), and w1 must not get it twice.
func TestEngine_Replay_under_GlobalPosition_of_an_earlier_builds_unrouted_record_does_not_apply_it_twice(t *testing.T) {
	ctx := context.Background()
	var broken, fixed atomic.Bool
	fixed.Store(true)
	w1 := []byte(`{"ward": "w1"}`)
	var raw []projector.Event
	add := func(stream string, typ string, meta []byte) { wardEvent(&raw, stream, 0, typ, `{}`, meta) }
	add("patient-1", "patient.admitted", w1)
	add("patient-2", "patient.admitted", nil)
	add("patient-3", "patient.admitted", w1)
	old := wards(projector.GlobalPosition(), &broken)
	s := newStore(t)
	deliver(faultEngine(t, s, wardRegistry(), projector.Park, raw, old), raw, false)
	parked, err := s.Parked(ctx, old.Name())
	if err != nil || len(parked) != 1 || parked[0].Document != "" || parked[0].Collection != old.Collection() {
		t.Fatalf("%d records (%v), want patient-2's admission with no document, of %s", len(parked), err, old.Collection())
	}
	// The rebuild, router fixed, into its own collection.
	rebuilt := wards(projector.GlobalPosition(), &fixed).InCollection(old.Collection() + "_2")
	e := faultEngine(t, s, wardRegistry(), projector.Park, raw, rebuilt)
	deliver(e, raw, false)
	want := ward{Occupied: 3, Admissions: 3}
	res := e.Replay(ctx, parked[0])
	var after ward
	if _, _, err := projector.ReadDocument(ctx, s, rebuilt, "w1", &after); err != nil || after != want {
		t.Errorf("replay of %s's record into %s: %v %v, w1 = %+v (%v); want %+v", old.Collection(), rebuilt.Collection(), res.Outcome, res.Err, after, err, want)
	}
}

// Under Skip (and Park) an event whose state the store cannot keep is
// passed over and logged at Warn ("event skipped"), as an event whose
// handler fails is (TestSkip_a_skipped_event_is_logged_at_warn): not
// first at Error as "event failed", retryable=false, which pages the
// operator for an event the policy handled.
func TestEngine_an_unstorable_state_under_Skip_is_logged_once_at_warn(t *testing.T) {
	for _, pol := range []projector.FailurePolicy{projector.Skip, projector.Park} {
		t.Run(pol.String(), func(t *testing.T) {
			raw := ledgerLog(t)
			s := newStore(t)
			var mu sync.Mutex
			var logged bytes.Buffer
			e, err := projector.NewEngine(s, ledgerRegistry(), []projector.Definition{accounts()}, projector.WithRetry(patient()),
				projector.WithFailurePolicy(pol), projector.WithParker(s), projector.WithStreamReader(newStreams(raw...)),
				projector.WithLogger(slog.New(slog.NewJSONHandler(lockedbuf.Writer{Mu: &mu, W: &logged}, nil))))
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Prepare(context.Background()); err != nil {
				t.Fatal(err)
			}
			deliver(e, raw, false)
			mu.Lock()
			defer mu.Unlock()
			for line := range strings.SplitSeq(strings.TrimSpace(logged.String()), "\n") {
				var rec struct{ Level, Msg, Err string }
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("%v: %s", err, line)
				}
				if rec.Level == "ERROR" {
					t.Errorf("logged ERROR %q (%s) for an event the %v policy moved past", rec.Msg, rec.Err, pol)
				}
			}
		})
	}
}
