package projector_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// decodes counts the payloads of type Reading decoded, in every test of
// this file (each test reads it before and after).
var decodes atomic.Int64

// Reading is a meter's reading; Elsewhere, when set, sends it to another
// meter's document under a router that reads the payload.
type Reading struct {
	KWh       int    `json:"kwh"`
	Elsewhere string `json:"elsewhere,omitempty"`
}

func (r *Reading) UnmarshalJSON(b []byte) error {
	decodes.Add(1)
	type plain Reading
	return json.Unmarshal(b, (*plain)(r))
}

// Meter is the total of a meter's readings.
type Meter struct {
	KWh int `bson:"kwh"`
}

func meterRegistry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[Reading](r, "Reading")
	return r
}

func meterProjection(route projector.IDFunc) *projector.Projection[Meter] {
	p := projector.New[Meter]("meters", route).RoutesByEnvelope()
	projector.On(p, func(m Meter, r Reading) (Meter, error) {
		m.KWh += r.KWh
		return m, nil
	})
	return p
}

// meterLog is readings of meters m0 to m7, 3 each, interleaved, as a
// source delivers them: undecoded.
func meterLog(t *testing.T, r *projector.Registry, elsewhere map[string]string) []projector.Event {
	log := projectortest.NewLog(r)
	var all []projector.Event
	for round := range 3 {
		for m := range 8 {
			id := "m" + string(rune('0'+m))
			ev := log.MustAppend(t, "meter-"+id, Reading{KWh: round + 1, Elsewhere: elsewhere[id]})[0]
			ev.Payload = nil
			all = append(all, ev)
		}
	}
	return all
}

// decodedRunning runs a runner named name of engine e over all, keeping
// the meters below m4 (half of them, as a segmented process does), until
// it caught up, and returns how many payloads it decoded, and its stats.
func decodedRunning(t *testing.T, s projector.CheckpointStore, e *projector.Engine, name string, all []projector.Event) (int64, projector.RunnerStats) {
	t.Helper()
	run, err := projector.NewRunner(name, e, &scripted{events: all}, halfStore{s, keptMeters})
	if err != nil {
		t.Fatal(err)
	}
	before := decodes.Load()
	if err := runUntil(t, run, func(st projector.RunnerStats) bool { return st.CaughtUp }); err != nil {
		t.Fatal(err)
	}
	return decodes.Load() - before, run.Stats()
}

// keptMeters are the meters a process that keeps half of them keeps.
func keptMeters(id string) bool { return id < "m4" }

// A process that keeps half of a projection's documents (a segmented run)
// and whose projection routes by the envelope decodes the payloads of its
// own documents' events only: the others are passed over undecoded. The
// documents it keeps still equal their folds.
func TestRoutesByEnvelope_events_of_documents_not_kept_are_passed_over_undecoded(t *testing.T) {
	r := meterRegistry()
	s := newStore(t)
	all := meterLog(t, r, nil)
	e, err := projector.NewEngine(s, r, []projector.Definition{meterProjection(projector.StreamSuffix("meter-"))}, projector.WithRetry(retry.Default()))
	if err != nil {
		t.Fatal(err)
	}
	decoded, st := decodedRunning(t, s, e, "half", all)
	if decoded != int64(len(all)/2) || st.Applied != uint64(len(all)/2) || st.Checkpoints != uint64(len(all)/2) {
		t.Errorf("%d payloads decoded, %d events applied, %d passed over; want %d each", decoded, st.Applied, st.Checkpoints, len(all)/2)
	}
	for m := range 8 {
		id := "m" + string(rune('0'+m))
		var got Meter
		_, found, err := s.Load(t.Context(), "meters", id, 0, &got)
		if err != nil || found != keptMeters(id) || (found && got.KWh != 6) {
			t.Errorf("meter %s: found %v, %d kWh (%v); want found %v with 6", id, found, got.KWh, err, keptMeters(id))
		}
	}
}

// A projection that says it routes by the envelope while its router reads
// the payload (in a way the zero payload does not show) is found out at the
// first event the process keeps that its router sends elsewhere with its
// payload: an error in the log, and its events are decoded before they
// are routed from then on.
func TestRoutesByEnvelope_a_router_that_reads_the_payload_is_found_out_and_decoded_from_then_on(t *testing.T) {
	r := meterRegistry()
	s := newStore(t)
	// Meter m1's readings go to m5's document, which this process does not
	// keep: without their payloads, they look like m1's.
	all := meterLog(t, r, map[string]string{"m1": "m5"})
	reads := func(ev projector.Event) (string, bool) {
		if rd, ok := ev.Payload.(Reading); ok && rd.Elsewhere != "" {
			return rd.Elsewhere, true
		}
		return projector.StreamSuffix("meter-")(ev)
	}
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedbuf.Writer{Mu: &mu, W: &logs}, nil))
	def := meterProjection(reads)
	e, err := projector.NewEngine(s, r, []projector.Definition{def}, projector.WithRetry(retry.Default()), projector.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	decoded, _ := decodedRunning(t, s, e, "half", all)
	mu.Lock()
	logged := logs.String()
	mu.Unlock()
	if strings.Count(logged, "level=ERROR") != 1 || !strings.Contains(logged, "RoutesByEnvelope") || !strings.Contains(logged, "projection=meters") {
		t.Errorf("log:\n%s\nwant one error naming the projection and RoutesByEnvelope", logged)
	}
	// The first event of m1 (the second in the log) finds the router out:
	// the one before it (m0's) was decoded as a kept event, and every event
	// from m1's on is decoded to be routed, m5's and the others' too.
	if want := int64(len(all)); decoded != want {
		t.Errorf("%d payloads decoded, want %d", decoded, want)
	}
	// Off for the projection in this process, not for the engine only: a
	// runner of another engine of it (a segment run after a rebalance)
	// decodes every event too.
	e2, err := projector.NewEngine(s, r, []projector.Definition{def}, projector.WithRetry(retry.Default()), projector.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if decoded, _ := decodedRunning(t, s, e2, "again", all); decoded != int64(len(all)) {
		t.Errorf("another engine of the projection decoded %d payloads, want all %d", decoded, len(all))
	}
}

// A router that reads a field of the payload, said to route by the
// envelope, fails without it: the engine does not trust its answer, decodes
// every event, and passes over none that it needs.
func TestRoutesByEnvelope_a_router_that_fails_without_the_payload_is_not_trusted(t *testing.T) {
	r := meterRegistry()
	s := newStore(t)
	all := meterLog(t, r, map[string]string{"m1": "x1", "m6": "a6"})
	reads := func(ev projector.Event) (string, bool) {
		rd := ev.Payload.(Reading) // panics without a payload
		if rd.Elsewhere != "" {
			return rd.Elsewhere, true
		}
		return projector.StreamSuffix("meter-")(ev)
	}
	e, err := projector.NewEngine(s, r, []projector.Definition{meterProjection(reads)}, projector.WithRetry(retry.Default()))
	if err != nil {
		t.Fatal(err)
	}
	if decoded, _ := decodedRunning(t, s, e, "half", all); decoded != int64(len(all)) {
		t.Errorf("%d payloads decoded, want all %d", decoded, len(all))
	}
	// m6's readings feed a6, which this process keeps; m1's feed x1, which
	// it does not.
	for id, want := range map[string]int{"m0": 6, "m1": 0, "m2": 6, "m3": 6, "a6": 6, "x1": 0} {
		var got Meter
		_, found, err := s.Load(t.Context(), "meters", id, 0, &got)
		if err != nil || found != (want > 0) || got.KWh != want {
			t.Errorf("meter %s: found %v, %d kWh (%v); want %d", id, found, got.KWh, err, want)
		}
	}
}
