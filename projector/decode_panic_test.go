package projector_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
)

// Qty is a warehouse count a scanner writes as "12 pcs". Its UnmarshalJSON
// takes the first word, and panics on an empty string, which one scanner
// sent once.
type Qty int

func (q *Qty) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.Fields(s)[0]) // panics on ""
	*q = Qty(n)
	return err
}

type BinCounted struct {
	Qty Qty `json:"qty"`
}

type bin struct {
	Qty    int `bson:"qty"`
	Counts int `bson:"counts"`
}

func bins() *projector.Projection[bin] {
	p := projector.New[bin]("bins", projector.StreamSuffix("bin-")).RoutesByEnvelope()
	projector.On(p, func(b bin, e BinCounted) (bin, error) {
		b.Qty, b.Counts = int(e.Qty), b.Counts+1
		return b, nil
	})
	return p
}

// stockLog has bin-2's second count malformed: its decoding panics.
func stockLog(typ string, field string) []projector.Event {
	var evs []projector.Event
	add := func(stream string, rev uint64, qty string) {
		pos := uint64(len(evs)+1) * 10
		evs = append(evs, projector.Event{ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", pos), StreamID: stream, StreamRevision: rev,
			Position: pos, Type: typ, Data: fmt.Appendf(nil, `{%q: %q}`, field, qty), Created: t0})
	}
	add("bin-1", 0, "12 pcs")
	add("bin-2", 0, "3 pcs")
	add("bin-2", 1, "") // the scanner's bad count
	add("bin-1", 1, "11 pcs")
	add("bin-2", 2, "4 pcs")
	return evs
}

// A payload whose decoding panics (in the type's own UnmarshalJSON, or in
// that of an upcaster's input) is an event that does not decode: parked
// under Park, per event and batched, and the process goes on.
func TestEngine_parks_an_event_whose_decoding_panics(t *testing.T) {
	plain := projector.NewRegistry()
	projector.Register[BinCounted](plain, "bin.counted")
	type binCountedV1 struct {
		Count Qty `json:"count"`
	}
	upcast := projector.NewRegistry()
	projector.Register[BinCounted](upcast, "bin.counted.v2", projector.Upcast("bin.counted", func(v binCountedV1) (BinCounted, error) {
		return BinCounted{Qty: v.Count}, nil
	}))
	for name, c := range map[string]struct {
		r     *projector.Registry
		field string
	}{"its type": {plain, "qty"}, "an upcaster's input": {upcast, "count"}} {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batched=%v", name, batched), func(t *testing.T) {
				raw := stockLog("bin.counted", c.field)
				s := newStore(t)
				p := bins()
				e := faultEngine(t, s, c.r, projector.Park, raw, p)
				for i, rs := range deliver(e, raw, batched) {
					want := projector.Applied
					if raw[i].StreamID == "bin-2" && raw[i].StreamRevision == 1 {
						want = projector.Parked
					}
					if len(rs) != 1 || rs[0].Outcome != want {
						t.Errorf("%s@%d: %+v, want %v", raw[i].StreamID, raw[i].StreamRevision, rs, want)
					} else if want == projector.Parked && (!errors.Is(rs[0].Err, projector.ErrUndecodable) || !strings.Contains(rs[0].Err.Error(), "panicked")) {
						t.Errorf("bin-2@1: %v, want ErrUndecodable saying it panicked", rs[0].Err)
					}
				}
				for id, want := range map[string]bin{"1": {Qty: 11, Counts: 2}, "2": {Qty: 4, Counts: 2}} {
					var got bin
					if _, found, err := s.Load(context.Background(), p.Collection(), id, 0, &got); err != nil || !found || got != want {
						t.Errorf("bin %s: %+v (found %v, err %v), want %+v", id, got, found, err, want)
					}
				}
			})
		}
	}
}

// A tournament table stores each team's points per game through a
// MarshalBSONValue that divides by the games played, and panics at 0: a
// team whose only result is a forfeit cannot be stored. Under Park the
// forfeit is parked, its team stays as it was, and the others are written.
type ppg struct {
	Points int `bson:"points"`
	Games  int `bson:"games"`
}

func (r ppg) MarshalBSON() ([]byte, error) {
	return bson.Marshal(struct {
		Points int `bson:"points"`
		Games  int `bson:"games"`
		Ratio  int `bson:"ratio"`
	}{r.Points, r.Games, r.Points / r.Games}) // integer divide by zero at 0 games
}

type team struct {
	Points int  `bson:"points"`
	PPG    *ppg `bson:"ppg,omitempty"`
}

type MatchPlayed struct {
	Points int `json:"points"`
}

type Forfeited struct{}

func TestEngine_parks_an_event_whose_state_panics_as_it_encodes(t *testing.T) {
	r := projector.NewRegistry()
	projector.Register[MatchPlayed](r, "match.played")
	projector.Register[Forfeited](r, "match.forfeited")
	p := projector.New[team]("teams", projector.StreamSuffix("team-")).RoutesByEnvelope()
	projector.On(p, func(s team, e MatchPlayed) (team, error) {
		s.Points += e.Points
		games := 1
		if s.PPG != nil {
			games += s.PPG.Games
		}
		s.PPG = &ppg{Points: s.Points, Games: games}
		return s, nil
	})
	projector.On(p, func(s team, e Forfeited) (team, error) {
		s.Points += 3 // a win, and no game played
		if s.PPG == nil {
			s.PPG = &ppg{}
		}
		s.PPG.Points = s.Points
		return s, nil
	})
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			raw := rawLog(t, r, func(add func(string, ...any)) {
				add("team-a", MatchPlayed{Points: 3})
				add("team-b", MatchPlayed{Points: 0}, Forfeited{})
				add("team-c", Forfeited{}) // no game yet: it cannot be stored
				add("team-c", MatchPlayed{Points: 1})
			})
			s := newStore(t)
			e := faultEngine(t, s, r, projector.Park, raw, p)
			for i, rs := range deliver(e, raw, batched) {
				want := projector.Applied
				if raw[i].StreamID == "team-c" && raw[i].StreamRevision == 0 && !batched {
					want = projector.Parked // a batch folds past it
				}
				if len(rs) != 1 || rs[0].Outcome != want {
					t.Errorf("%s@%d: %+v, want %v", raw[i].StreamID, raw[i].StreamRevision, rs, want)
				} else if want == projector.Parked && !errors.Is(rs[0].Err, driver.ErrUnencodable) {
					t.Errorf("team-c@0: %v, want driver.ErrUnencodable", rs[0].Err)
				}
			}
			wantC := 1 // the forfeit parked
			if batched {
				wantC = 4
			}
			for id, want := range map[string]int{"a": 3, "b": 3, "c": wantC} {
				var got team
				if _, found, err := s.Load(context.Background(), p.Collection(), id, 0, &got); err != nil || !found || got.Points != want {
					t.Errorf("team %s: %d points (found %v, err %v), want %d", id, got.Points, found, err, want)
				}
			}
		})
	}
}
