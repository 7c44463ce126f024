package projector_test

// The edges of a replay that folds a gated document anew from its stream
// (refold.go, gate.go replayedState). Each test states what a fresh
// rebuild with the same (fixed) build gives for the document, or what the
// replay promises.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

type (
	RvOpened struct{ ID string }
	RvAdded  struct {
		ID string
		N  int
	}
	RvNoted   struct{ ID, Text string }
	RvDrafted struct{ ID string } // registered, handled by no projection here
)

type rvState struct {
	Opened    bool
	Total     int
	Notes     []string
	Positions []uint64
}

func rvRegistry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[RvOpened](r, "RvOpened")
	projector.Register[RvAdded](r, "RvAdded")
	projector.Register[RvNoted](r, "RvNoted")
	projector.Register[RvDrafted](r, "RvDrafted")
	return r
}

// rvFlags: broken fails every RvAdded; strict fails RvAdded with N == 1,
// fail2 with N == 2; positions has notes keep their events' positions.
type rvFlags struct{ broken, strict, fail2, positions atomic.Bool }

// rvProjection: one document per stream "rv-<id>"; a note with an empty ID
// is declined by the router (it names no document).
func rvProjection(f *rvFlags) *projector.Projection[rvState] {
	p := projector.New[rvState]("rv", func(e projector.Event) (string, bool) {
		if n, ok := e.Payload.(RvNoted); ok && n.ID == "" {
			return "", false
		}
		id, ok := strings.CutPrefix(e.StreamID, "rv-")
		return id, ok
	}).OnFailure(projector.Park)
	projector.Create(p, func(RvOpened) (rvState, error) { return rvState{Opened: true}, nil })
	projector.On(p, func(s rvState, e RvAdded) (rvState, error) {
		if f.broken.Load() || (f.strict.Load() && e.N == 1) || (f.fail2.Load() && e.N == 2) {
			return s, errors.New("adding is broken")
		}
		s.Total += e.N
		return s, nil
	})
	projector.OnEvent(p, func(s rvState, e RvNoted, ev projector.Event) (rvState, error) {
		s.Notes = append(s.Notes, e.Text)
		if f.positions.Load() {
			s.Positions = append(s.Positions, ev.Position)
		}
		return s, nil
	})
	return p
}

func rvEngine(t *testing.T, s projector.Parker, store *mongostore.Store, raw []projector.Event, p projector.Definition, opts ...projector.Option) *projector.Engine {
	t.Helper()
	opts = append([]projector.Option{projector.WithRetry(retry.Default()), projector.WithParker(s),
		projector.WithStreamReader(newStreams(raw...))}, opts...)
	e, err := projector.NewEngine(store, rvRegistry(), []projector.Definition{p}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func rvHandle(t *testing.T, e *projector.Engine, evs []projector.Event) {
	t.Helper()
	for _, ev := range evs {
		if _, err := e.Handle(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
}

// rvReplayAll replays the parked events of projection name in the order
// they were parked, as replay-parked does, marking the applied ones
// replayed, and returns their results by stream revision.
func rvReplayAll(t *testing.T, e *projector.Engine, s *mongostore.Store, name string) map[uint64]projector.Result {
	t.Helper()
	ctx := context.Background()
	parked, err := s.Parked(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]projector.Result{}
	for _, pe := range parked {
		r := e.Replay(ctx, pe)
		out[pe.StreamRevision] = r
		if r.Outcome == projector.Applied {
			if err := s.Replayed(ctx, pe, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

func rvRead(t *testing.T, s *mongostore.Store, p projector.Definition, id string) rvState {
	t.Helper()
	var got rvState
	if found, _, err := projector.ReadDocument(context.Background(), s, p, id, &got); err != nil || !found {
		t.Fatalf("read %s: found %v, %v", id, found, err)
	}
	return got
}

// Two parked events of one stream, the second the stream's last: replayed
// in the order they were parked (as replay-parked does), the first one's
// fold anew applies the second too (it no longer fails); the second's
// replay, at the document's revision, folds anew as well, and does not
// apply it once more on top. A fresh rebuild gives Total 1+2 = 3.
func TestReplay_of_two_parked_events_applies_the_last_one_once(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var f rvFlags
	f.broken.Store(true)
	p := rvProjection(&f)
	evs := projectortest.NewLog(rvRegistry()).MustAppend(t, "rv-1",
		RvOpened{ID: "1"},
		RvAdded{ID: "1", N: 1}, // parked
		RvAdded{ID: "1", N: 2}) // parked, the stream's last
	e := rvEngine(t, s, s, evs, p)
	rvHandle(t, e, evs)
	f.broken.Store(false)
	rs := rvReplayAll(t, e, s, "rv")
	for rev, r := range rs {
		if r.Outcome != projector.Applied && r.Outcome != projector.Duplicate {
			t.Errorf("replay of revision %d: %v %v", rev, r.Outcome, r.Err)
		}
	}
	if got := rvRead(t, s, p, "1"); got.Total != 3 {
		t.Fatalf("after replay-parked: Total %d, want 3 (each addition once, as a rebuild folds them): "+
			"the first replay's fold anew applied revision 2 already, and its own replay applied it again", got.Total)
	}
	if err := projectortest.CheckDocument(ctx, s, p, "1", evs); err != nil {
		t.Fatal(err)
	}
}

// The stream's first event is of a type the projection has no handler
// for; its creation comes at revision 1. Delivered live, the creation
// applies (the document holds nothing yet, see holdsNothing); folded anew
// too, not taken for a second creation. A rebuild gives Opened and Total 5.
func TestReplay_folding_anew_applies_a_creation_after_an_event_passed_over(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var f rvFlags
	f.broken.Store(true)
	p := rvProjection(&f)
	evs := projectortest.NewLog(rvRegistry()).MustAppend(t, "rv-2",
		RvDrafted{ID: "2"},     // no handler: passed over
		RvOpened{ID: "2"},      // Create, at revision 1
		RvAdded{ID: "2", N: 5}, // parked
		RvNoted{ID: "2", Text: "later"})
	e := rvEngine(t, s, s, evs, p)
	rvHandle(t, e, evs)
	if got := rvRead(t, s, p, "2"); !got.Opened {
		t.Fatalf("live: %+v, want it opened", got)
	}
	f.broken.Store(false)
	rs := rvReplayAll(t, e, s, "rv")
	if r := rs[2]; r.Outcome != projector.Applied {
		t.Fatalf("replay: %v %v", r.Outcome, r.Err)
	}
	got := rvRead(t, s, p, "2")
	left, _ := s.Parked(ctx, "rv")
	if !got.Opened || got.Total != 5 || len(left) != 0 {
		t.Fatalf("after the replay: %+v, still parked %d (first: %+v); want it opened with Total 5 and nothing parked, as a rebuild folds it",
			got, len(left), first(left))
	}
}

func first(ps []projector.ParkedEvent) string {
	if len(ps) == 0 {
		return "none"
	}
	return ps[0].Type + ": " + ps[0].Error
}

// An event the router declines, in a stream that feeds a document, is
// parked against that document when the document moves past it (parkHole:
// "so that a replay applies it there"). Folded anew, the replayed event
// itself applies to the document whatever its router says, as its record
// names the document.
func TestReplay_folding_anew_applies_the_replayed_event_its_router_declines(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var f rvFlags
	p := rvProjection(&f)
	evs := projectortest.NewLog(rvRegistry()).MustAppend(t, "rv-3",
		RvOpened{ID: "3"},
		RvNoted{ID: "", Text: "declined"}, // declined: parked, then against document 3
		RvAdded{ID: "3", N: 5})
	e := rvEngine(t, s, s, evs, p)
	rvHandle(t, e, evs)
	parked, err := s.Parked(ctx, "rv")
	if err != nil || len(parked) != 1 || parked[0].Document != "3" {
		t.Fatalf("parked: %+v (%v); want the declined note, against document 3", parked, err)
	}
	r := e.Replay(ctx, parked[0])
	got := rvRead(t, s, p, "3")
	if r.Outcome == projector.Applied && len(got.Notes) == 0 {
		t.Fatalf("replay said %v, yet the document has no note: %+v (the event's effect is lost, and its record would be marked replayed)", r.Outcome, got)
	}
}

// failingParker fails Park for events of one type once armed.
type failingParker struct {
	*mongostore.Store
	armed atomic.Bool
	typ   string
}

func (f *failingParker) Park(ctx context.Context, pe projector.ParkedEvent) (bool, error) {
	if f.armed.Load() && pe.Type == f.typ {
		return false, errors.New("mongo: connection reset")
	}
	return f.Store.Park(ctx, pe)
}

// An event applied when it came that fails under the fixed build is left
// out of the fold anew and parked; when that Park fails, the replay fails
// and writes nothing: a document never moves past an event without its
// record.
func TestReplay_folding_anew_writes_nothing_when_parking_a_left_out_event_fails(t *testing.T) {
	t.Parallel() // long, and on a database and servers of its own
	ctx := context.Background()
	s := newStore(t)
	fp := &failingParker{Store: s, typ: "RvAdded"}
	var f rvFlags
	p := rvProjection(&f)
	log := projectortest.NewLog(rvRegistry())
	evs := log.MustAppend(t, "rv-4", RvOpened{ID: "4"}, RvAdded{ID: "4", N: 1}) // applied
	f.broken.Store(true)
	evs = append(evs, log.MustAppend(t, "rv-4", RvAdded{ID: "4", N: 2})...) // parked
	evs = append(evs, log.MustAppend(t, "rv-4", RvNoted{ID: "4", Text: "x"})...)
	e := rvEngine(t, fp, s, evs, p)
	f.broken.Store(false)
	rvHandle(t, e, evs[:2])
	f.broken.Store(true)
	rvHandle(t, e, evs[2:])
	f.broken.Store(false)
	f.strict.Store(true) // the new build refuses N == 1 (revision 1, applied when it came)
	parked, _ := s.Parked(ctx, "rv")
	if len(parked) != 1 {
		t.Fatalf("parked: %+v", parked)
	}
	fp.armed.Store(true)
	r := e.Replay(ctx, parked[0])
	got := rvRead(t, s, p, "4")
	left, _ := s.Parked(ctx, "rv")
	hasRecord := false
	for _, pe := range left {
		hasRecord = hasRecord || pe.StreamRevision == 1
	}
	if r.Outcome == projector.Applied && got.Total == 2 && !hasRecord {
		t.Fatalf("replay %v: document %+v moved past revision 1 without its effect, and no record of it (Park failed, and the failure was ignored)", r.Outcome, got)
	}
}

// An event parked, then replayed and marked replayed, fails in a later
// fold anew (the build changed): parking it again records nothing
// (mongostore keeps a replayed record), so the replay fails, saying so,
// rather than take its effect away with no record to show it.
func TestReplay_folding_anew_fails_when_an_event_replayed_before_fails_now(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var f rvFlags
	f.broken.Store(true)
	p := rvProjection(&f)
	evs := projectortest.NewLog(rvRegistry()).MustAppend(t, "rv-5",
		RvOpened{ID: "5"},
		RvAdded{ID: "5", N: 1}, // parked
		RvAdded{ID: "5", N: 2}, // parked
		RvNoted{ID: "5", Text: "x"})
	e := rvEngine(t, s, s, evs, p)
	rvHandle(t, e, evs)
	// Build A: revision 1 fixed, revision 2 still fails.
	f.broken.Store(false)
	f.fail2.Store(true)
	rs := rvReplayAll(t, e, s, "rv")
	if rs[1].Outcome != projector.Applied || rs[2].Outcome != projector.Failed {
		t.Fatalf("build A: %+v", rs)
	}
	if got := rvRead(t, s, p, "5"); got.Total != 1 {
		t.Fatalf("build A: %+v", got)
	}
	// Build B: revision 2 fixed, but revision 1 fails again.
	f.fail2.Store(false)
	f.strict.Store(true)
	rs = rvReplayAll(t, e, s, "rv")
	got := rvRead(t, s, p, "5")
	left, _ := s.Parked(ctx, "rv")
	hasRecord := false
	for _, pe := range left {
		hasRecord = hasRecord || pe.StreamRevision == 1
	}
	if got.Total == 2 && !hasRecord {
		t.Fatalf("build B, replay of revision 2 %v: document %+v lost revision 1's effect (it had it), and no parked record says so", rs[2].Outcome, got)
	}
	if r := rs[2]; r.Outcome != projector.Failed || !strings.Contains(fmt.Sprint(r.Err), "replayed before, fails with this build") || got.Total != 1 {
		t.Fatalf("build B, replay of revision 2: %v %v, document %+v; want it failed, saying revision 1 fails now, and the document as it was", r.Outcome, r.Err, got)
	}
}

// An engine told not to fold from streams (WithoutStreamFolds, which
// OnEvent's doc names as what keeps positions) does not fold anew on a
// replay either: a stream's read gives no positions, and the notes keep
// the log's.
func TestReplay_without_stream_folds_keeps_the_positions(t *testing.T) {
	s := newStore(t)
	var f rvFlags
	f.broken.Store(true)
	f.positions.Store(true)
	p := rvProjection(&f)
	evs := projectortest.NewLog(rvRegistry()).MustAppend(t, "rv-6",
		RvOpened{ID: "6"},
		RvNoted{ID: "6", Text: "a"},
		RvAdded{ID: "6", N: 5}, // parked
		RvNoted{ID: "6", Text: "b"})
	e := rvEngine(t, s, s, evs, p, projector.WithoutStreamFolds())
	rvHandle(t, e, evs)
	before := rvRead(t, s, p, "6").Positions
	f.broken.Store(false)
	if r := rvReplayAll(t, e, s, "rv")[2]; r.Outcome != projector.Applied {
		t.Fatalf("replay: %v %v", r.Outcome, r.Err)
	}
	if got := rvRead(t, s, p, "6"); !reflect.DeepEqual(got.Positions, before) {
		t.Fatalf("positions after the replay %v, before %v (the log's, %d and %d)", got.Positions, before, evs[1].Position, evs[3].Position)
	}
}
