package projectortest_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

func rvProve[S any](t *testing.T, reg *projector.Registry, p *projector.Projection[S], streams map[string][]any, d projectortest.Delivery) (projectortest.Report, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := projectortest.Prove(ctx, mongostore.New(mongotest.Database(t)), reg, p, streams, d)
	t.Logf("%s: %v in %v; err: %v", p.Name(), rep, time.Since(start).Round(time.Millisecond), err)
	return rep, err
}

func rvExpectPass(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("Prove failed a projection correct under its strategy: %v", err)
	}
}

// ---------- banking ----------

type rvDeposited struct {
	Account string  `json:"account"`
	Amount  float64 `json:"amount"`
	Cents   int64   `json:"cents"`
}

type rvBalance struct {
	Balance float64 `bson:"balance"`
	Cents   int64   `bson:"cents"`
	N       int     `bson:"n"`
}

// A clearing account under HandledIDs: a sum of float amounts (a step that
// commutes), netting to about zero, with amounts in the hundreds of
// thousands. The README: "a sum of amounts in another order is not taken
// for a dependence on it".
func TestProveProbe_float_clearing_account_nets_to_zero_HandledIDs(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[rvDeposited](reg, "Deposited")
	p := projector.New[rvBalance]("rv_clearing", func(e projector.Event) (string, bool) { return "clearing", true }).Idempotency(projector.HandledIDs(100))
	projector.On(p, func(s rvBalance, e rvDeposited) (rvBalance, error) {
		s.Balance += e.Amount
		s.Cents += e.Cents
		s.N++
		return s, nil
	})
	streams := map[string][]any{"transfer-1": {
		rvDeposited{"clearing", 100000.10, 10000010}, rvDeposited{"clearing", 200000.20, 20000020}, rvDeposited{"clearing", -300000.30, -30000030},
	}}
	_, err := rvProve(t, reg, p, streams, projectortest.Delivery{Workers: 1, MaxTimes: 1, Seed: 1})
	rvExpectPass(t, err)
}

// int64 money, above 2^53, under HandledIDs and shuffled.
func TestProveProbe_int64_money_HandledIDs(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[rvDeposited](reg, "Deposited")
	p := projector.New[rvBalance]("rv_int_money", func(e projector.Event) (string, bool) { return e.Payload.(rvDeposited).Account, true }).Idempotency(projector.HandledIDs(200))
	projector.On(p, func(s rvBalance, e rvDeposited) (rvBalance, error) { s.Cents += e.Cents; s.N++; return s, nil })
	streams := map[string][]any{}
	for i := range 6 {
		var evs []any
		for j := range 5 {
			evs = append(evs, rvDeposited{Account: fmt.Sprint("acc", i%2), Cents: math.MaxInt64/64 + int64(j*7+1)})
		}
		streams[fmt.Sprint("transfer-", i)] = evs
	}
	_, err := rvProve(t, reg, p, streams, projectortest.Delivery{Shuffle: true, Seed: 5})
	rvExpectPass(t, err)
}

// ---------- IoT ----------

type rvReading struct {
	Device string    `json:"device"`
	Site   string    `json:"site"`
	Temp   float64   `json:"temp"`
	At     time.Time `json:"at"`
	Online bool      `json:"online"`
}

type rvSiteStats struct {
	Max, Min   float64
	MaxAt      time.Time
	Devices    map[string]bool
	LastSeen   map[string]time.Time
	FirstEver  *time.Time
	Readings   int
	AvgPerRead float64
}

func rvReadings(sites, devices, per int, loc *time.Location) map[string][]any {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, loc)
	out := map[string][]any{}
	for d := range devices {
		var evs []any
		for j := range per {
			temp := float64((d*37+j*11)%50) - 10.5
			evs = append(evs, rvReading{Device: fmt.Sprint("dev", d), Site: fmt.Sprint("site", d%sites), Temp: temp, At: at.Add(time.Duration(d*per+j) * time.Minute)})
		}
		out[fmt.Sprint("device-", d)] = evs
	}
	return out
}

func rvSiteProjection(name string, s projector.Strategy) *projector.Projection[rvSiteStats] {
	p := projector.New[rvSiteStats](name, func(e projector.Event) (string, bool) {
		r, ok := e.Payload.(rvReading)
		return r.Site, ok
	}).Idempotency(s)
	projector.On(p, func(s rvSiteStats, e rvReading) (rvSiteStats, error) {
		if s.Devices == nil {
			s.Devices, s.LastSeen = map[string]bool{}, map[string]time.Time{}
			s.Max, s.Min = e.Temp, e.Temp
			s.MaxAt = e.At
		}
		// max, ties broken by the earliest time: independent of order
		if e.Temp > s.Max || (e.Temp == s.Max && e.At.Before(s.MaxAt)) {
			s.Max, s.MaxAt = e.Temp, e.At
		}
		s.Min = min(s.Min, e.Temp)
		s.Devices[e.Device] = true
		if e.At.After(s.LastSeen[e.Device]) {
			s.LastSeen[e.Device] = e.At
		}
		if s.FirstEver == nil || e.At.Before(*s.FirstEver) {
			at := e.At
			s.FirstEver = &at
		}
		return s, nil
	})
	return p
}

// Max/min, a set, a map that grows, times from payloads in a non-UTC zone,
// a pointer to a time: order-independent and idempotent: None, HandledIDs,
// RevisionMap should all pass.
func TestProveProbe_iot_max_min_set_times_nonUTC(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[rvReading](reg, "Reading")
	loc := time.FixedZone("CEST", 2*3600)
	streams := rvReadings(2, 6, 4, loc)
	for i, s := range []projector.Strategy{projector.None(), projector.HandledIDs(200), projector.RevisionMap()} {
		p := rvSiteProjection(fmt.Sprint("rv_site_stats_", i), s)
		_, err := rvProve(t, reg, p, streams, projectortest.Delivery{Shuffle: true, Seed: uint64(i + 1)})
		rvExpectPass(t, err)
	}
}

type rvCalibrated struct{ Device string }

type rvFlaps struct {
	Online bool
	Flaps  int
	Seen   bool
}

type rvOnline struct{}
type rvOffline struct{}

func rvFlapProjection(name string) *projector.Projection[rvFlaps] {
	p := projector.New[rvFlaps](name, projector.StreamSuffix("device-")).Idempotency(projector.HandledIDs(100))
	set := func(s rvFlaps, online bool) rvFlaps {
		if s.Seen && s.Online != online {
			s.Flaps++
		}
		s.Seen, s.Online = true, online
		return s
	}
	projector.On(p, func(s rvFlaps, _ rvOnline) (rvFlaps, error) { return set(s, true), nil })
	projector.On(p, func(s rvFlaps, _ rvOffline) (rvFlaps, error) { return set(s, false), nil })
	return p
}

// A connectivity flap counter (and current status) under HandledIDs, which
// keeps no order: the engine can apply on,on,off,off (1 flap, status off)
// where the log has on,off,on,off (3 flaps, status off). Reversal and the two
// rotations of on,off,on,off all give 3 flaps and "off".
func TestProveProbe_flap_counter_HandledIDs_in_log_order(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[rvOnline](reg, "Online")
	projector.Register[rvOffline](reg, "Offline")
	streams := map[string][]any{"device-1": {rvOnline{}, rvOnline{}, rvOffline{}, rvOnline{}, rvOnline{}}}
	_, err := rvProve(t, reg, rvFlapProjection("rv_flaps"), streams, projectortest.Delivery{Workers: 1, MaxTimes: 1, Seed: 1})
	if err == nil {
		t.Errorf("Prove passed an order-dependent flap counter under HandledIDs (in log order, one worker)")
	}
	// The engine can leave it wrong: shuffled seeds.
	var failed, passed []uint64
	for seed := range uint64(6) {
		_, err := rvProve(t, reg, rvFlapProjection(fmt.Sprint("rv_flaps_s", seed)), streams, projectortest.Delivery{Workers: 1, MaxTimes: 1, Shuffle: true, Seed: seed})
		if err != nil {
			failed = append(failed, seed)
		} else {
			passed = append(passed, seed)
		}
	}
	if len(passed) > 0 {
		t.Errorf("shuffled: failed with seeds %v, passed with %v; want it found with every seed", failed, passed)
	}
}

// ---------- logistics ----------

type rvRouteOpened struct {
	Route string `json:"route"`
}
type rvParcelAssigned struct {
	Route  string `json:"route"`
	Weight int64  `json:"weight"`
}
type rvParcelScanned struct {
	Depot string `json:"depot"`
}
type rvParcelDelivered struct {
	At time.Time `json:"at"`
}
type rvParcelNote struct{} // a type the projections do not handle

type rvRoute struct {
	Opened    bool
	Parcels   int
	Weight    int64
	Delivered int
	Scans     map[string][]string // per parcel stream, in its order
	Depots    map[string]bool
	LastDrop  *time.Time
}

func rvRouteProjection(name string, s projector.Strategy, create bool) *projector.Projection[rvRoute] {
	p := projector.New[rvRoute](name, func(e projector.Event) (string, bool) {
		switch x := e.Payload.(type) {
		case rvRouteOpened:
			return x.Route, true
		case rvParcelAssigned:
			return x.Route, true
		}
		return "", false
	}).Idempotency(s).TieStreams("parcel-")
	if create {
		projector.Create(p, func(e rvRouteOpened) (rvRoute, error) { return rvRoute{Opened: true}, nil })
	} else {
		projector.On(p, func(s rvRoute, e rvRouteOpened) (rvRoute, error) { s.Opened = true; return s, nil })
	}
	projector.On(p, func(s rvRoute, e rvParcelAssigned) (rvRoute, error) {
		s.Parcels++
		s.Weight += e.Weight
		return s, nil
	})
	projector.OnEvent(p, func(s rvRoute, e rvParcelScanned, ev projector.Event) (rvRoute, error) {
		if s.Scans == nil {
			s.Scans = map[string][]string{}
		}
		if s.Depots == nil {
			s.Depots = map[string]bool{}
		}
		s.Scans[ev.StreamID] = append(s.Scans[ev.StreamID], e.Depot)
		s.Depots[e.Depot] = true
		return s, nil
	})
	projector.On(p, func(s rvRoute, e rvParcelDelivered) (rvRoute, error) {
		s.Delivered++
		if s.LastDrop == nil || e.At.After(*s.LastDrop) {
			at := e.At.UTC().Truncate(time.Millisecond)
			s.LastDrop = &at
		}
		return s, nil
	})
	return p
}

func rvRoutes(routes, parcels int) map[string][]any {
	out := map[string][]any{}
	loc := time.FixedZone("EST", -5*3600)
	at := time.Date(2026, 5, 4, 8, 0, 0, 0, loc)
	for r := range routes {
		out[fmt.Sprint("route-", r)] = []any{rvRouteOpened{fmt.Sprint("r", r)}}
	}
	for i := range parcels {
		route := fmt.Sprint("r", i%routes)
		out[fmt.Sprint("parcel-", i)] = []any{
			rvParcelAssigned{route, int64(1000 + i)}, rvParcelScanned{fmt.Sprint("depot", i%3)}, rvParcelNote{},
			rvParcelScanned{fmt.Sprint("depot", (i+1)%3)}, rvParcelDelivered{at.Add(time.Duration(i) * time.Hour)},
		}
	}
	return out
}

func rvLogisticsRegistry() *projector.Registry {
	reg := projector.NewRegistry()
	projector.Register[rvRouteOpened](reg, "RouteOpened")
	projector.Register[rvParcelAssigned](reg, "ParcelAssigned")
	projector.Register[rvParcelScanned](reg, "ParcelScanned")
	projector.Register[rvParcelDelivered](reg, "ParcelDelivered")
	projector.Register[rvParcelNote](reg, "ParcelNote")
	return reg
}

// A route fed by its own stream and its parcels' streams (tied), with an
// unhandled type in every parcel stream, a per-stream slice, a set and a
// pointer time: correct under RevisionMap and (the per-stream slices apart)
// HandledIDs? Under HandledIDs the slices are order-dependent, so only
// RevisionMap is expected to pass with them.
func TestProveProbe_logistics_ties_RevisionMap(t *testing.T) {
	reg := rvLogisticsRegistry()
	rep, err := rvProve(t, reg, rvRouteProjection("rv_routes_rm", projector.RevisionMap(), false), rvRoutes(3, 9), projectortest.Delivery{Shuffle: true, Seed: 11})
	rvExpectPass(t, err)
	if rep.Documents != 3 {
		t.Errorf("documents %d", rep.Documents)
	}
}

type rvRouteCount struct {
	Parcels, Delivered int
	Weight             int64
	Depots             map[string]bool
}

func TestProveProbe_logistics_ties_HandledIDs(t *testing.T) {
	reg := rvLogisticsRegistry()
	p := projector.New[rvRouteCount]("rv_routes_h", func(e projector.Event) (string, bool) {
		if x, ok := e.Payload.(rvParcelAssigned); ok {
			return x.Route, true
		}
		return "", false
	}).Idempotency(projector.HandledIDs(500)).TieStreams("parcel-")
	projector.On(p, func(s rvRouteCount, e rvParcelAssigned) (rvRouteCount, error) {
		s.Parcels++
		s.Weight += e.Weight
		return s, nil
	})
	projector.On(p, func(s rvRouteCount, e rvParcelScanned) (rvRouteCount, error) {
		if s.Depots == nil {
			s.Depots = map[string]bool{}
		}
		s.Depots[e.Depot] = true
		return s, nil
	})
	projector.On(p, func(s rvRouteCount, e rvParcelDelivered) (rvRouteCount, error) { s.Delivered++; return s, nil })
	streams := rvRoutes(3, 9)
	for k := range streams {
		if strings.HasPrefix(k, "route-") {
			delete(streams, k)
		}
	}
	_, err := rvProve(t, reg, p, streams, projectortest.Delivery{Shuffle: true, Seed: 12})
	rvExpectPass(t, err)
}

// Create in a multi-stream document under RevisionMap (the route's opening
// starts the document; parcels may come first): the engine's Create
// replaces the parcels' changes, so Prove should fail it (true positive).
func TestProveProbe_logistics_create_in_multistream_RevisionMap(t *testing.T) {
	reg := rvLogisticsRegistry()
	_, err := rvProve(t, reg, rvRouteProjection("rv_routes_create", projector.RevisionMap(), true), rvRoutes(2, 4), projectortest.Delivery{Shuffle: true, Seed: 13})
	if err == nil {
		t.Errorf("Create in a multi-stream document passed")
	}
}

// Create on the first event of a document fed by one stream only, under
// RevisionMap and HandledIDs: should pass.
type rvHire struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
}
type rvRaise struct {
	Cents int64 `json:"cents"`
}
type rvTerminate struct{}
type rvEmployee struct {
	Name     string
	Salary   int64
	Raises   []int64
	Active   bool
	Hired    time.Time
	Terminal *bool
}

func rvHRRegistry() *projector.Registry {
	reg := projector.NewRegistry()
	projector.Register[rvHire](reg, "Hired")
	projector.Register[rvRaise](reg, "Raised")
	projector.Register[rvTerminate](reg, "Terminated")
	return reg
}

func rvEmployeeProjection(name string, s projector.Strategy) *projector.Projection[rvEmployee] {
	p := projector.New[rvEmployee](name, projector.StreamSuffix("employee-")).Idempotency(s)
	projector.Create(p, func(e rvHire) (rvEmployee, error) {
		return rvEmployee{Name: e.Name, Active: true, Hired: e.At}, nil
	})
	projector.On(p, func(s rvEmployee, e rvRaise) (rvEmployee, error) {
		if !s.Active {
			return s, fmt.Errorf("raise for %q, who is not active", s.Name)
		}
		s.Salary += e.Cents
		s.Raises = append(s.Raises, e.Cents)
		return s, nil
	})
	projector.On(p, func(s rvEmployee, e rvTerminate) (rvEmployee, error) {
		if !s.Active {
			return s, fmt.Errorf("%q terminated twice or before hire", s.Name)
		}
		s.Active = false
		yes := true
		s.Terminal = &yes
		return s, nil
	})
	return p
}

func rvEmployees(n int) map[string][]any {
	loc, _ := time.LoadLocation("Asia/Kolkata")
	if loc == nil {
		loc = time.FixedZone("IST", 5*3600+1800)
	}
	out := map[string][]any{}
	for i := range n {
		out[fmt.Sprint("employee-", i)] = []any{rvHire{fmt.Sprint("e", i), time.Date(2025, 1, i+1, 9, 30, 0, 0, loc)}, rvRaise{int64(100 * i)}, rvRaise{50}, rvTerminate{}}
	}
	return out
}

// Documents fed by one stream only, a Create, a slice appended, handlers
// that fail on impossible sequences (only reachable out of stream order),
// times in Asia/Kolkata: under StreamRevision and RevisionMap, should pass.
func TestProveProbe_hr_single_stream_documents(t *testing.T) {
	reg := rvHRRegistry()
	for i, s := range []projector.Strategy{projector.StreamRevision(), projector.RevisionMap()} {
		_, err := rvProve(t, reg, rvEmployeeProjection(fmt.Sprint("rv_employees_", i), s), rvEmployees(5), projectortest.Delivery{Shuffle: true, Seed: uint64(20 + i)})
		rvExpectPass(t, err)
	}
}

// The same under HandledIDs keeps no order: the failing handlers are
// reachable; Prove should say so (true positive).
func TestProveProbe_hr_handler_errors_HandledIDs(t *testing.T) {
	reg := rvHRRegistry()
	_, err := rvProve(t, reg, rvEmployeeProjection("rv_employees_h", projector.HandledIDs(100)), rvEmployees(3), projectortest.Delivery{Workers: 1, MaxTimes: 1, Seed: 2})
	if err == nil {
		t.Errorf("handler errors reachable out of order passed under HandledIDs")
	}
}

// ---------- upcasters that drop, unhandled types at the end ----------

// A route's parcel stream whose last event is dropped by its upcaster or
// of an unhandled type, under StreamRevision (one doc per parcel) and
// RevisionMap (routed by stream to the route via a prefix in the name).
type rvParcelStatus struct {
	Scans     int
	Delivered bool
}

func rvDropRegistry() *projector.Registry {
	reg := projector.NewRegistry()
	projector.Register[rvParcelScanned](reg, "ParcelScanned.v2", projector.Upcast("ParcelScanned", func(old struct {
		Depot string `json:"depot"`
	}) (rvParcelScanned, error) {
		if old.Depot == "" {
			return rvParcelScanned{}, projector.DropEvent
		}
		return rvParcelScanned{Depot: old.Depot}, nil
	}))
	projector.Register[rvParcelDelivered](reg, "ParcelDelivered")
	projector.Register[rvParcelNote](reg, "ParcelNote")
	return reg
}

func rvOldScan(depot string) projector.Event {
	return projector.Event{Type: "ParcelScanned", Data: fmt.Appendf(nil, `{"depot": %q}`, depot)}
}

func TestProveProbe_dropped_and_unhandled_last_events(t *testing.T) {
	reg := rvDropRegistry()
	streams := map[string][]any{}
	for i := range 6 {
		evs := []any{rvOldScan("d1"), rvOldScan(""), rvParcelScanned{"d2"}, rvParcelDelivered{}}
		if i%2 == 0 {
			evs = append(evs, rvOldScan("")) // dropped, last
		} else {
			evs = append(evs, rvParcelNote{}) // unhandled, last
		}
		streams[fmt.Sprintf("parcel-r%d-%d", i%2, i)] = evs
	}
	build := func(name string, s projector.Strategy, route func(projector.Event) (string, bool)) *projector.Projection[rvParcelStatus] {
		p := projector.New[rvParcelStatus](name, route).Idempotency(s)
		projector.On(p, func(s rvParcelStatus, _ rvParcelScanned) (rvParcelStatus, error) { s.Scans++; return s, nil })
		projector.On(p, func(s rvParcelStatus, _ rvParcelDelivered) (rvParcelStatus, error) { s.Delivered = true; return s, nil })
		return p
	}
	byRoute := func(e projector.Event) (string, bool) {
		rest, ok := strings.CutPrefix(e.StreamID, "parcel-")
		if !ok {
			return "", false
		}
		return rest[:2], true
	}
	_, err := rvProve(t, reg, build("rv_parcel_sr", projector.StreamRevision(), projector.StreamSuffix("parcel-")), streams, projectortest.Delivery{Shuffle: true, Seed: 31})
	rvExpectPass(t, err)
	type routeSum struct{ Scans, Delivered int }
	q := projector.New[routeSum]("rv_parcel_rm", byRoute).Idempotency(projector.RevisionMap())
	projector.On(q, func(s routeSum, _ rvParcelScanned) (routeSum, error) { s.Scans++; return s, nil })
	projector.On(q, func(s routeSum, _ rvParcelDelivered) (routeSum, error) { s.Delivered++; return s, nil })
	_, err = rvProve(t, reg, q, streams, projectortest.Delivery{Shuffle: true, Seed: 32})
	rvExpectPass(t, err)
	h := projector.New[routeSum]("rv_parcel_h", byRoute).Idempotency(projector.HandledIDs(100))
	projector.On(h, func(s routeSum, _ rvParcelScanned) (routeSum, error) { s.Scans++; return s, nil })
	projector.On(h, func(s routeSum, _ rvParcelDelivered) (routeSum, error) { s.Delivered++; return s, nil })
	_, err = rvProve(t, reg, h, streams, projectortest.Delivery{Shuffle: true, Seed: 33})
	rvExpectPass(t, err)
}

// ---------- GlobalPosition, None, Inbox ----------

// Last reading wins (order-dependent) under GlobalPosition, one worker, log
// order, late copies: should pass.
func TestProveProbe_global_position_one_worker(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[rvReading](reg, "Reading")
	p := projector.New[rvReading]("rv_last_gp", func(e projector.Event) (string, bool) {
		r, ok := e.Payload.(rvReading)
		return r.Site, ok
	}).Idempotency(projector.GlobalPosition())
	projector.On(p, func(_ rvReading, e rvReading) (rvReading, error) {
		e.At = e.At.UTC().Truncate(time.Millisecond)
		return e, nil
	})
	_, err := rvProve(t, reg, p, rvReadings(2, 5, 4, time.UTC), projectortest.Delivery{Workers: 1, MaxTimes: 3, Seed: 41})
	rvExpectPass(t, err)
	// Delivery's defaults deliver to it as its runner does: one worker.
	rep, err := rvProve(t, reg, p, rvReadings(2, 5, 4, time.UTC), projectortest.Delivery{Seed: 42})
	rvExpectPass(t, err)
	if rep.Duplicates == 0 {
		t.Errorf("Delivery{} under GlobalPosition: %v; want its late copies taken for duplicates", rep)
	}
	// What would deliver out of the log's order is refused before any
	// delivery, naming it, rather than reported as the projection's fault.
	for _, d := range []projectortest.Delivery{{Workers: 4}, {Shuffle: true}} {
		rep, err := rvProve(t, reg, p, rvReadings(2, 5, 4, time.UTC), d)
		if err == nil || errors.Is(err, projectortest.ErrNotExactlyOnce) || rep.Deliveries != 0 ||
			!strings.Contains(err.Error(), "global position strategy") || !strings.Contains(err.Error(), "one worker") {
			t.Errorf("Delivery%+v under GlobalPosition: %v, %v; want refused before any delivery, saying it takes one worker", d, rep, err)
		}
	}
}

type rvTags struct {
	Tags   map[string]bool
	Sorted []string
}
type rvTagged struct{ Tag string }

// None with add-to-set (a map, and a sorted slice): should pass with
// duplicates and shuffling.
func TestProveProbe_none_add_to_set(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[rvTagged](reg, "Tagged")
	p := projector.New[rvTags]("rv_tags", func(projector.Event) (string, bool) { return "all", true }).Idempotency(projector.None())
	projector.On(p, func(s rvTags, e rvTagged) (rvTags, error) {
		if s.Tags == nil {
			s.Tags = map[string]bool{}
		}
		s.Tags[e.Tag] = true
		if i, found := slices.BinarySearch(s.Sorted, e.Tag); !found {
			s.Sorted = slices.Insert(slices.Clone(s.Sorted), i, e.Tag)
		}
		return s, nil
	})
	streams := map[string][]any{}
	for i := range 5 {
		streams[fmt.Sprint("asset-", i)] = []any{rvTagged{fmt.Sprint("t", i%3)}, rvTagged{fmt.Sprint("t", i)}, rvTagged{"common"}}
	}
	_, err := rvProve(t, reg, p, streams, projectortest.Delivery{Shuffle: true, Seed: 51})
	rvExpectPass(t, err)
}

func TestProveProbe_inbox_on_embedded_is_refused(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[rvTagged](reg, "Tagged")
	p := projector.New[rvTags]("rv_inbox", func(projector.Event) (string, bool) { return "all", true }).Idempotency(projector.Inbox(time.Hour))
	projector.On(p, func(s rvTags, e rvTagged) (rvTags, error) { return s, nil })
	rep, err := rvProve(t, reg, p, map[string][]any{"asset-1": {rvTagged{"a"}}}, projectortest.Delivery{Seed: 1})
	if err == nil || rep.Deliveries != 0 {
		t.Errorf("Inbox on the embedded server: %v, %v; want refused before any delivery", rep, err)
	}
}

// HandledIDs sized as the README says for production (above what can be
// replayed at once: a checkpoint interval of 100 plus events in flight,
// 256), a document of 600 events: Prove's late copies go further back than
// a subscription's redelivery, and the proof fails saying so.
func TestProveProbe_handled_ids_window_below_events_per_document(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[rvDeposited](reg, "Deposited")
	p := projector.New[rvBalance]("rv_window", func(projector.Event) (string, bool) { return "bank", true }).Idempotency(projector.HandledIDs(256))
	projector.On(p, func(s rvBalance, e rvDeposited) (rvBalance, error) { s.Cents += e.Cents; s.N++; return s, nil })
	streams := map[string][]any{}
	for i := range 60 {
		var evs []any
		for j := range 10 {
			evs = append(evs, rvDeposited{Cents: int64(i*10 + j)})
		}
		streams[fmt.Sprint("account-", i)] = evs
	}
	_, err := rvProve(t, reg, p, streams, projectortest.Delivery{Seed: 61, MaxTimes: 2, Workers: 1})
	if !errors.Is(err, projector.ErrOutsideWindow) || !strings.Contains(err.Error(), "Prove delivers a late copy anywhere after the event") {
		t.Errorf("a window below the events a document gets in the proof: %v; want the window's error, saying why", err)
	}
}

// ---------- NaN kept by a codec (FerretDB refuses a NaN double) ----------

// rvRatioV is a float that the store keeps, NaN as null (FerretDB closes the
// connection on a NaN double).
type rvRatioV float64

func (r rvRatioV) MarshalBSONValue() (byte, []byte, error) {
	if math.IsNaN(float64(r)) {
		return 0x0A, nil, nil
	}
	b := make([]byte, 8)
	bits := math.Float64bits(float64(r))
	for i := range 8 {
		b[i] = byte(bits >> (8 * i))
	}
	return 0x01, b, nil
}

func (r *rvRatioV) UnmarshalBSONValue(t byte, data []byte) error {
	if t == 0x0A {
		*r = rvRatioV(math.NaN())
		return nil
	}
	var bits uint64
	for i := range 8 {
		bits |= uint64(data[i]) << (8 * i)
	}
	*r = rvRatioV(math.Float64frombits(bits))
	return nil
}

type rvUptime struct {
	Online, Total int
	Uptime        rvRatioV
}

// An uptime ratio, NaN (0/0) until a reading counts, kept as null: a pure,
// single-stream projection, exactly-once under the revision gate.
func TestProveProbe_nan_ratio_kept_as_null(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[rvCalibrated](reg, "Calibrated")
	projector.Register[rvReading](reg, "Reading")
	p := projector.New[rvUptime]("rv_uptime_null", projector.StreamSuffix("device-"))
	projector.On(p, func(s rvUptime, _ rvCalibrated) (rvUptime, error) {
		s.Uptime = rvRatioV(float64(s.Online) / float64(s.Total))
		return s, nil
	})
	projector.On(p, func(s rvUptime, e rvReading) (rvUptime, error) {
		s.Total++
		if e.Online {
			s.Online++
		}
		s.Uptime = rvRatioV(float64(s.Online) / float64(s.Total))
		return s, nil
	})
	streams := map[string][]any{"device-a": {rvCalibrated{"a"}}, "device-b": {rvCalibrated{"b"}, rvReading{Device: "b", Online: true}}}
	_, err := rvProve(t, reg, p, streams, projectortest.Delivery{Seed: 1, MaxTimes: 1, Workers: 1})
	rvExpectPass(t, err)
}

// ---------- RevisionMap: single-event streams ----------

type rvPalletStored struct {
	Bin  string `json:"bin"`
	Zone string `json:"zone"`
}
type rvBin struct{ Zone string }

// A bin fed by pallets, a stream each with one event, under RevisionMap;
// the bin's zone is the last stored pallet's (order-dependent between
// streams). With single-event streams, "one after another" and "in turns"
// are the same order, so Prove tries the log's order and its reverse only:
// when the first and last pallets agree, it passes.
func TestProveProbe_last_writer_single_event_streams_RevisionMap(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[rvPalletStored](reg, "PalletStored")
	streams := map[string][]any{"pallet-a": {rvPalletStored{"bin1", "cold"}}, "pallet-b": {rvPalletStored{"bin1", "dry"}}, "pallet-c": {rvPalletStored{"bin1", "cold"}}}
	var passed []uint64
	for seed := range uint64(9) {
		p := projector.New[rvBin](fmt.Sprint("rv_bins_", seed), func(e projector.Event) (string, bool) {
			x, ok := e.Payload.(rvPalletStored)
			return x.Bin, ok
		}).Idempotency(projector.RevisionMap())
		projector.On(p, func(s rvBin, e rvPalletStored) (rvBin, error) { s.Zone = e.Zone; return s, nil })
		if _, err := rvProve(t, reg, p, streams, projectortest.Delivery{Workers: 1, MaxTimes: 1, Seed: seed}); err == nil {
			passed = append(passed, seed)
		}
	}
	if len(passed) > 0 {
		t.Errorf("a last-writer-wins bin zone under RevisionMap passed with seeds %v of 0..8", passed)
	}
}
