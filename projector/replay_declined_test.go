package projector_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/projector"
)

// A shelter's summary, fed by the streams of its animals, routed by the
// shelter each event names.
type (
	animalAdmitted   struct{ Shelter, Animal string }
	animalVaccinated struct{ Shelter, Vaccine string }
	vaccinatedV1     struct{ Where, Vaccine string }
	shelterSummary   struct{ Animals, Vaccinations int }
)

// The upcaster of vaccinatedV1 as deployed: broken (it fails), wrong (it
// drops the shelter, which the router reads), or right.
const (
	upcastBroken int32 = iota
	upcastDropsShelter
	upcastRight
)

func shelterRegistry(mode *atomic.Int32) *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[animalAdmitted](r, "AnimalAdmitted")
	projector.Register[animalVaccinated](r, "AnimalVaccinated", projector.Upcast("AnimalVaccinatedV1", func(v vaccinatedV1) (animalVaccinated, error) {
		switch mode.Load() {
		case upcastBroken:
			return animalVaccinated{}, errors.New("upcaster bug")
		case upcastDropsShelter:
			return animalVaccinated{Vaccine: v.Vaccine}, nil
		}
		return animalVaccinated{Shelter: v.Where, Vaccine: v.Vaccine}, nil
	}))
	return r
}

func shelterSummaries() *projector.Projection[shelterSummary] {
	p := projector.New[shelterSummary]("shelters", func(ev projector.Event) (string, bool) {
		switch pl := ev.Payload.(type) {
		case animalAdmitted:
			return pl.Shelter, pl.Shelter != ""
		case animalVaccinated:
			return pl.Shelter, pl.Shelter != ""
		}
		return "", false
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(s shelterSummary, _ animalAdmitted) (shelterSummary, error) { s.Animals++; return s, nil })
	projector.On(p, func(s shelterSummary, _ animalVaccinated) (shelterSummary, error) { s.Vaccinations++; return s, nil })
	return p
}

// An event parked because its payload did not decode is recorded against
// its stream's document once a later event of the stream reaches it. A
// replay with a fix under which the router declines it (an upcaster that
// drops what the router reads) leaves it parked, saying why, as a rebuild
// with that build refuses it: applied to the recorded document, it would
// hide the upcaster's bug. With the right upcaster the replay applies it.
func TestReplay_an_event_its_router_now_declines_stays_parked_as_a_rebuild_refuses_it(t *testing.T) {
	ctx := context.Background()
	var mode atomic.Int32
	r := shelterRegistry(&mode)
	raw := rawLog(t, r, func(add func(string, ...any)) {
		add("animal-1", animalAdmitted{Shelter: "s2", Animal: "a1"},
			projector.Event{Type: "AnimalVaccinatedV1", Data: []byte(`{"Where": "s2", "Vaccine": "rabies"}`)},
			animalVaccinated{Shelter: "s2", Vaccine: "flu"})
	})
	p := shelterSummaries()
	s := newStore(t)
	var log lockedbuf.Buffer
	soon := patient()
	soon.MaxElapsed = 2 * time.Second
	e, err := projector.NewEngine(s, r, []projector.Definition{p}, projector.WithRetry(soon), projector.WithFailurePolicy(projector.Park),
		projector.WithParker(s), projector.WithStreamReader(newStreams(raw...)), projector.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for i, rs := range deliver(e, raw, false) {
		t.Logf("event %d: %+v", i, rs)
	}
	// The document moved past an event parked because it could not be
	// routed: no routing to fix, or strategy to change, for it.
	if !strings.Contains(log.String(), "could not be routed when they came (parked then)") || strings.Contains(log.String(), "routed elsewhere") {
		t.Errorf("the log of the move past the parked event:\n%s", log.String())
	}
	parked, _, _ := parkedRecords(t, s, "shelters")
	if len(parked) != 1 || parked[0].Document != "s2" {
		t.Fatalf("parked %+v: want the undecodable event recorded against s2", parked)
	}
	read := func() shelterSummary {
		t.Helper()
		var got shelterSummary
		if _, _, err := projector.ReadDocument(ctx, s, p, "s2", &got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	mode.Store(upcastDropsShelter)
	res := e.Replay(ctx, parked[0])
	if res.Outcome != projector.Failed || !errors.Is(res.Err, projector.ErrUnroutable) || !strings.Contains(res.Err.Error(), "as a rebuild would not apply it") ||
		!strings.Contains(res.Err.Error(), `feeds document "s2"`) {
		t.Fatalf("replay under an upcaster that drops the shelter: %+v; want it failed, its router declining it", res)
	}
	if got := read(); got.Vaccinations != 1 {
		t.Fatalf("s2 after the refused replay: %+v; want 1 vaccination, the event not applied", got)
	}
	// A rebuild with that build stops at the same event, for the same
	// reason.
	fresh := faultEngine(t, newStore(t), r, projector.Block, raw, p)
	rebuilt := deliver(fresh, raw, true)
	if rs := rebuilt[1]; len(rs) != 1 || !errors.Is(rs[0].Err, projector.ErrUnroutable) {
		t.Fatalf("a rebuild under that upcaster, the event: %+v; want it failed as unroutable", rs)
	}

	mode.Store(upcastRight)
	if res := e.Replay(ctx, parked[0]); res.Outcome != projector.Applied {
		t.Fatalf("replay under the right upcaster: %+v; want it applied", res)
	}
	if got := read(); got != (shelterSummary{Animals: 1, Vaccinations: 2}) {
		t.Fatalf("s2 after the replay: %+v; want 1 animal and 2 vaccinations", got)
	}
}

// Where a rebuild leaves a declined event alone (no earlier event of its
// stream feeds a document), its replay does not claim otherwise: the
// document its record names gets it, as before.
func TestReplay_an_event_its_router_now_declines_alone_in_its_stream_applies_to_its_record(t *testing.T) {
	ctx := context.Background()
	var mode atomic.Int32
	mode.Store(upcastRight)
	r := shelterRegistry(&mode)
	raw := rawLog(t, r, func(add func(string, ...any)) {
		add("animal-9", projector.Event{Type: "AnimalVaccinatedV1", Data: []byte(`{"Where": "s3", "Vaccine": "bad"}`)})
	})
	s := newStore(t)
	bad := faultEngine(t, s, r, projector.Park, raw, badVaccines())
	deliver(bad, raw, false)
	parked, _, _ := parkedRecords(t, s, "shelters")
	if len(parked) != 1 || parked[0].Document != "s3" {
		t.Fatalf("parked %+v: want the event recorded against s3", parked)
	}
	mode.Store(upcastDropsShelter)
	fixed := faultEngine(t, s, r, projector.Park, raw, shelterSummaries())
	if res := fixed.Replay(ctx, parked[0]); res.Outcome != projector.Applied {
		t.Fatalf("replay: %+v; want it applied to s3, which a rebuild does not refuse", res)
	}
}

// badVaccines is shelterSummaries with a vaccination handler that fails on
// the vaccine "bad".
func badVaccines() *projector.Projection[shelterSummary] {
	p := projector.New[shelterSummary]("shelters", func(ev projector.Event) (string, bool) {
		if pl, ok := ev.Payload.(animalVaccinated); ok {
			return pl.Shelter, pl.Shelter != ""
		}
		return "", false
	}).Idempotency(projector.RevisionMap())
	projector.On(p, func(s shelterSummary, e animalVaccinated) (shelterSummary, error) {
		if e.Vaccine == "bad" {
			return s, errors.New("a bad vaccine")
		}
		s.Vaccinations++
		return s, nil
	})
	return p
}
