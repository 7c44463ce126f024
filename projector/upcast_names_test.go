package projector_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/revgate/projector/projector"
)

// Under VersionField a type whose name now looks like a version
// ("CardMoved.v1", the first version, which producers store as type
// "CardMoved" with schemaVersion 1) decodes the events stored as
// "CardMoved" (formOf looks "CardMoved.v1" up), so HandledTypes (what a
// type filter must read, app's Filter.covers) must name "CardMoved" too:
// a filter of "CardMoved.v1" alone is accepted and reads none of them.
func TestRegistry_HandledTypes_names_every_stored_name_Decode_takes_under_VersionField(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[Moved](r, "CardMoved.v1")
	ev, err := r.Decode(projector.Event{Type: "CardMoved", Metadata: []byte(`{"schemaVersion": 1}`), Data: []byte(`{"column": {"name": "Done"}}`)})
	if err != nil || ev.Payload == nil {
		t.Fatalf("CardMoved, schemaVersion 1: %#v, %v; want it decoded", ev.Payload, err)
	}
	got := projector.HandledTypes(r, laneProjection(r))
	for _, want := range []string{"CardMoved", "CardMoved.v1"} {
		if !slices.Contains(got, want) {
			t.Errorf("HandledTypes = %q, lacks %q, a stored name its events decode from", got, want)
		}
	}
}

// ScoreV1 and ScoreV3 are a type whose names are all versions: "Score.v3"
// now, "Score.v1" before, stored as type "Score" with the version in the
// metadata.
type ScoreV1 struct {
	Pts int `json:"pts"`
}

type ScoreV3 struct {
	Points int `json:"points"`
}

// Under VersionField, type "Score" whose name now is "Score.v3" (no form
// is named "Score") is known (Has): an event of it without a version is
// read as "Score.v3", as an event of T is read as T when T is a name; one
// whose version is none, newer than 3, or older with no form of its own
// (2: a shape the registry has never seen), does not decode. None is
// passed over as a type nobody registered.
func TestRegistry_reads_a_type_whose_names_are_all_versions_as_its_newest_without_a_version(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[ScoreV3](r, "Score.v3", projector.Upcast("Score.v1", func(v ScoreV1) (ScoreV3, error) {
		return ScoreV3{Points: 10 * v.Pts}, nil
	}))
	if !r.Has("Score") {
		t.Fatal(`Has("Score") = false`)
	}
	if near, ok := r.Near("Score"); ok {
		t.Errorf(`Near("Score") = %q: a known type is near nothing`, near)
	}
	checkDecodes(t, r, "Score", []decodeCase{
		{"v1", `{"schemaVersion":1}`, `{"pts":2}`, ScoreV3{Points: 20}},
		{"v3", `{"schemaVersion":"v3"}`, `{"points":4}`, ScoreV3{Points: 4}},
		{"no version", `{}`, `{"points":5}`, ScoreV3{Points: 5}},
		{"no metadata", ``, `{"points":6}`, ScoreV3{Points: 6}},
	})
	_, err := r.Decode(projector.Event{ID: "e", Type: "Score", Metadata: []byte(`{"schemaVersion":2}`), Data: []byte(`{"points":7}`)})
	if want := `"schemaVersion" is 2, a version older than Score.v3, the newest this registry knows, and no form is registered for it: register Score.v2`; !errors.Is(err, projector.ErrUndecodable) || !strings.Contains(err.Error(), want) {
		t.Errorf("an older version no form has: %v, want ErrUndecodable saying %q", err, want)
	}
	_, err = r.Decode(projector.Event{ID: "e", Type: "Score", Metadata: []byte(`{"schemaVersion":"one"}`), Data: []byte(`{"points":4}`)})
	// Named as stored, and as the form it is read as.
	if want := `: Score (read as Score.v3) event e `; !errors.Is(err, projector.ErrUndecodable) || !strings.Contains(err.Error(), want) {
		t.Errorf(`a version that is none ("one"): %v, want ErrUndecodable saying %q`, err, want)
	}
	// A shape the registry has never seen: not read as v3's.
	_, err = r.Decode(projector.Event{ID: "e", Type: "Score", Metadata: []byte(`{"schemaVersion":4}`), Data: []byte(`{"points":7}`)})
	if want := `"schemaVersion" is 4, a version newer than Score.v3, the newest this registry knows`; !errors.Is(err, projector.ErrUndecodable) || !strings.Contains(err.Error(), want) {
		t.Errorf("a version newer than the current one: %v, want ErrUndecodable saying %q", err, want)
	}
}

// WeightV1 and Weight are a type whose events were stored without a version
// while it was in pounds ("Weight", read through an upcaster), and are
// stored with version 2 in their metadata now that it is in grams (its name
// now "Weight.v2"). An event of version 3, from a writer deployed before
// the projector that knows it, is a shape the registry has never seen: it
// does not decode, rather than going through the pounds' upcaster as the
// unversioned "Weight" form (the registry knows the current version is 2).
type WeightV1 struct {
	Pounds float64 `json:"lb"`
}

type Weight struct {
	Grams int `json:"g"`
}

func TestRegistry_does_not_read_a_version_newer_than_the_current_one_as_the_unversioned_older_form(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[Weight](r, "Weight.v2", projector.Upcast("Weight", func(v WeightV1) (Weight, error) {
		return Weight{Grams: int(v.Pounds * 453.59237)}, nil
	}))
	checkDecodes(t, r, "Weight", []decodeCase{
		{"no version: pounds", ``, `{"lb":2}`, Weight{Grams: 907}},
		{"version 2: grams", `{"schemaVersion":2}`, `{"g":70500}`, Weight{Grams: 70500}},
	})
	ev, err := r.Decode(projector.Event{Type: "Weight", StreamID: "patient-7", Metadata: []byte(`{"schemaVersion":3}`), Data: []byte(`{"kg":70.5}`)})
	// (An event built by hand, with no id: none in the message.)
	want := `payload does not decode: Weight event (stream "patient-7", revision 0): its metadata's "schemaVersion" is 3, a version newer than Weight.v2, the newest this registry knows: deploy the projector that knows version 3 before the writers that write it`
	if !errors.Is(err, projector.ErrUndecodable) || err.Error() != want || ev.Payload != nil {
		t.Errorf("version 3: %#v, %v; want no payload and\n%s", ev.Payload, err, want)
	}
}

// PremiumV2 is a version of Premium whose form a team forgot when it
// registered version 3 with an upcaster from the unversioned first form
// (in euros): an event of version 2 does not decode, rather than go
// through version 1's upcaster, which dropped its cents without a word.
// Versions 0 and 1 are the unversioned form's, the one before the first
// versioned one.
type PremiumV1 struct {
	Euros float64 `json:"euros"`
}

type PremiumV2 struct {
	Cents int `json:"premiumCents"`
}

type PremiumV3 struct {
	Cents    int    `json:"cents"`
	Currency string `json:"currency"`
}

func TestRegistry_does_not_read_a_forgotten_version_between_as_the_unversioned_older_form(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[PremiumV3](r, "Premium.v3", projector.Upcast("Premium", func(v PremiumV1) (PremiumV3, error) {
		return PremiumV3{Cents: int(v.Euros * 100), Currency: "EUR"}, nil
	}))
	checkDecodes(t, r, "Premium", []decodeCase{
		{"no version", ``, `{"euros":2}`, PremiumV3{Cents: 200, Currency: "EUR"}},
		{"version 1", `{"schemaVersion":1}`, `{"euros":3}`, PremiumV3{Cents: 300, Currency: "EUR"}},
		{"version 0", `{"schemaVersion":0}`, `{"euros":4}`, PremiumV3{Cents: 400, Currency: "EUR"}},
		{"version 3", `{"schemaVersion":3}`, `{"cents":500,"currency":"USD"}`, PremiumV3{Cents: 500, Currency: "USD"}},
	})
	ev, err := r.Decode(projector.Event{ID: "e", Type: "Premium", StreamID: "policy-9", Metadata: []byte(`{"schemaVersion":2}`), Data: []byte(`{"premiumCents":81862}`)})
	want := `payload does not decode: Premium event e (stream "policy-9", revision 0): its metadata's "schemaVersion" is 2, a version older than Premium.v3, ` +
		`the newest this registry knows, and no form is registered for it: register Premium.v2 (the shape of version 2) with its upcaster, or as a name of the current shape (Renamed) where it has that shape`
	if !errors.Is(err, projector.ErrUndecodable) || err.Error() != want || ev.Payload != nil {
		t.Errorf("version 2: %#v, %v; want no payload and\n%s", ev.Payload, err, want)
	}
	// Registered (each upcaster gives the next form's shape), it is read
	// as itself.
	r2 := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[PremiumV3](r2, "Premium.v3",
		projector.Upcast("Premium", func(v PremiumV1) (PremiumV2, error) { return PremiumV2{Cents: int(v.Euros * 100)}, nil }),
		projector.Upcast("Premium.v2", func(v PremiumV2) (PremiumV3, error) { return PremiumV3{Cents: v.Cents, Currency: "EUR"}, nil }))
	checkDecodes(t, r2, "Premium", []decodeCase{
		{"version 2, its form registered", `{"schemaVersion":2}`, `{"premiumCents":81862}`, PremiumV3{Cents: 81862, Currency: "EUR"}},
		{"no version, through both", ``, `{"euros":2}`, PremiumV3{Cents: 200, Currency: "EUR"}},
	})
}

// Points was "Score" with version 3 in the metadata, renamed: events of
// "Score" without a version are read as its newest versioned form, the
// older name "Score.v3", as for a type whose name now is a version.
type Points struct {
	Points int `json:"points"`
}

func TestRegistry_reads_a_type_renamed_from_a_version_as_that_version_without_one(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[Points](r, "Points", projector.Renamed("Score.v3"))
	if !r.Has("Score") {
		t.Fatal(`Has("Score") = false`)
	}
	ev, err := r.Decode(projector.Event{ID: "e", Type: "Score", Data: []byte(`{"points":5}`)})
	if err != nil || ev.Payload != (Points{Points: 5}) {
		t.Errorf("Score without a version: %#v, %v; want Points{5}", ev.Payload, err)
	}
	// Version 1 has no form, and the registry holds no older form of
	// Score: its versions only added fields, and it is read as the current
	// shape, as an event without a version is.
	checkDecodes(t, r, "Score", []decodeCase{
		{"version 3", `{"schemaVersion":3}`, `{"points":6}`, Points{Points: 6}},
		{"version 1, no older form registered", `{"schemaVersion":1}`, `{"points":7}`, Points{Points: 7}},
	})
	_, err = r.Decode(projector.Event{ID: "e", Type: "Score", Metadata: []byte(`{"schemaVersion":4}`), Data: []byte(`{"points":8}`)})
	if !errors.Is(err, projector.ErrUndecodable) {
		t.Errorf("version 4, newer than the known current one: %v, want ErrUndecodable", err)
	}
}

// A repair from the name now given twice says so, not that it must come last.
func TestRegister_a_repair_given_twice_says_so(t *testing.T) {
	mend := func(in json.RawMessage) (json.RawMessage, error) { return in, nil }
	defer func() {
		if msg := fmt.Sprint(recover()); !strings.Contains(msg, "given twice") {
			t.Errorf("panic %q, want it to say the form is given twice", msg)
		}
	}()
	projector.Register[Points](projector.NewRegistry(), "Points", projector.Upcast("Points", mend), projector.Upcast("Points", mend))
}

// ScoreV1Pts is the first shape of an event now registered as Points under
// another name: "Score" was Renamed (its events stored as "Score" hold
// today's shape) and "Score.v1" is upcast. Writers keep writing "Score"
// with version 2, today's: the current version is not known to the
// registry (no form names it), and those events decode as the current
// shape, not as a version newer than "Score.v1".
type ScoreV1Pts struct {
	Pts int `json:"pts"`
}

func TestRegistry_a_renamed_current_shape_with_a_versioned_older_form_reads_the_current_version(t *testing.T) {
	r := projector.NewRegistry().VersionField("schemaVersion")
	projector.Register[Points](r, "billing.Points", projector.Renamed("Score"),
		projector.Upcast("Score.v1", func(v ScoreV1Pts) (Points, error) { return Points{Points: 10 * v.Pts}, nil }))
	checkDecodes(t, r, "Score", []decodeCase{
		{"no version", ``, `{"points":5}`, Points{Points: 5}},
		{"version 2, today's", `{"schemaVersion":2}`, `{"points":5}`, Points{Points: 5}},
		{"version 1", `{"schemaVersion":1}`, `{"pts":5}`, Points{Points: 50}},
	})
}

// decodeCase is an event as stored, by its metadata and data, and the
// payload it must decode to.
type decodeCase struct {
	name, meta, data string
	want             any
}

// checkDecodes decodes an event of type typ for each case, and fails t for
// each that does not give its payload.
func checkDecodes(t *testing.T, r *projector.Registry, typ string, cases []decodeCase) {
	t.Helper()
	for _, c := range cases {
		ev, err := r.Decode(projector.Event{ID: "e", Type: typ, Metadata: []byte(c.meta), Data: []byte(c.data)})
		if err != nil || ev.Payload != c.want {
			t.Errorf("%s, %s: %#v, %v; want %#v", typ, c.name, ev.Payload, err, c.want)
		}
	}
}

// WeightKg is a shape of Weight in kilograms. A form whose name writes its
// version otherwise than formOf spells it ("Weight.v02", "Weight.V2") is
// still that version: an event with version 2 in its metadata goes through
// its upcaster, not read as another form (a wrong document, no error).
type WeightKg struct {
	Kg float64 `json:"kg"`
}

func TestRegistry_a_version_form_written_with_a_leading_zero_or_a_capital_V_is_that_version(t *testing.T) {
	kg := func(v WeightKg) (Weight, error) { return Weight{Grams: int(v.Kg * 1000)}, nil }
	for _, c := range []struct {
		name, current, form string
		metas               []string
	}{
		{"leading zero", "Weight.v3", "Weight.v02", []string{`{"schemaVersion":2}`, `{"schemaVersion":"02"}`, `{"schemaVersion":"v02"}`}},
		{"capital V", "Weight", "Weight.V2", []string{`{"schemaVersion":"V2"}`, `{"schemaVersion":2}`}},
	} {
		r := projector.NewRegistry().VersionField("schemaVersion")
		projector.Register[Weight](r, c.current, projector.Upcast(c.form, kg))
		for _, meta := range c.metas {
			ev, err := r.Decode(projector.Event{ID: "e", Type: "Weight", Metadata: []byte(meta), Data: []byte(`{"kg":70.5,"g":1}`)})
			if err != nil || ev.Payload != (Weight{Grams: 70500}) {
				t.Errorf("%s, metadata %s: %#v, %v; want Weight{70500} through the upcaster from %s", c.name, meta, ev.Payload, err, c.form)
			}
		}
		p := projector.New[int]("weights", projector.StreamSuffix("patient-"))
		projector.On(p, func(n int, _ Weight) (int, error) { return n + 1, nil })
		if got := projector.HandledTypes(r, p); !slices.Contains(got, "Weight") || !slices.Contains(got, c.form) {
			t.Errorf("%s: HandledTypes %q lacks Weight or %s, names its events are stored under", c.name, got, c.form)
		}
	}
}
