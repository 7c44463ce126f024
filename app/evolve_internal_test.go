package app

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/revgate/projector/projector"
)

// unknownView is a runner that met events of types nobody registered.
type unknownView struct{ view }

func (unknownView) Stats() projector.RunnerStats {
	return projector.RunnerStats{UnknownTypes: map[string]uint64{"ticket.noted.v2": 2, "ticket.closed": 1}}
}

// projector_unknown_events_total counts them by type, and says which
// registered type each is close to.
func TestMetrics_count_unknown_types_and_name_the_registered_type_they_are_close_to(t *testing.T) {
	r := projector.NewRegistry()
	projector.Register[struct{ Text string }](r, "ticket.noted")
	c := newRunnerCollector([]runnerView{unknownView{view{name: "tickets"}}}, &headSampler{}, r)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		if f.GetName() != "projector_unknown_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got = append(got, fmt.Sprintf("%s %s near=%q %v", labels["projection"], labels["type"], labels["near"], m.GetCounter().GetValue()))
		}
	}
	slices.Sort(got)
	want := []string{`tickets ticket.closed near="" 1`, `tickets ticket.noted.v2 near="ticket.noted" 2`}
	if !slices.Equal(got, want) {
		t.Fatalf("projector_unknown_events_total:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A standby (another process holds the projection's lease, or, segmented,
// it holds none of the segments) exports no checkpoint position and no
// lag: those of the runner it stopped are stale, and a dashboard's max by
// projection would show a healthy fleet behind. The one that runs it
// exports them.
func TestMetrics_a_standby_exports_no_position_and_no_lag(t *testing.T) {
	head := &headSampler{head: 100, lags: map[string]int{"tickets": 30}}
	for _, tc := range []struct {
		down string
		want bool
	}{{"", true}, {"standby: run host/1/a holds its lease until 2026-11-26T16:00:00Z", false}, {"standby: this process holds none of the 4 segments", false},
		{takingLease + ": server selection error", false}, {"retrying: an event failed", true}} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(newRunnerCollector([]runnerView{exportingView{view{name: "tickets", down: tc.down}}}, head, projector.NewRegistry()))
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"projector_checkpoint_position", "projector_lag_events", "projector_lag_seconds"} {
			found := slices.ContainsFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == name })
			if found != tc.want {
				t.Errorf("down %q: %s exported %v, want %v", tc.down, name, found, tc.want)
			}
		}
	}
}

// The events behind are counted every 5 s; once the checkpoint passes the
// head that was sampled, the count is stale and the gauge says 0, so that
// a runner that has just caught up does not show its whole catch-up
// behind while /readyz says ready.
func TestMetrics_lag_events_is_0_once_the_checkpoint_passes_the_sampled_head(t *testing.T) {
	for _, tc := range []struct {
		head uint64
		want float64
	}{{100, 30}, {10, 0}, {9, 0}} {
		head := &headSampler{head: tc.head, lags: map[string]int{"tickets": 30}}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(newRunnerCollector([]runnerView{exportingView{view{name: "tickets", caughtUp: true}}}, head, projector.NewRegistry()))
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == "projector_lag_events" })
		if i < 0 {
			t.Fatalf("head %d: no projector_lag_events", tc.head)
		}
		if got := families[i].GetMetric()[0].GetGauge().GetValue(); got != tc.want {
			t.Errorf("checkpoint at 10, 30 events counted behind it at a head of %d: projector_lag_events %v, want %v", tc.head, got, tc.want)
		}
	}
}

// projector_lag_seconds is the age of the newest event handled while events
// remain after the checkpoint, 0 when none remain: also for a runner that
// caught up and was then left behind by live appends (it said 0 for as long
// as it was caught up once, while thousands of events waited).
func TestMetrics_lag_seconds_of_a_runner_caught_up_and_left_behind(t *testing.T) {
	for _, tc := range []struct {
		head     uint64
		min, max float64
	}{{100, 55, 65}, {10, 0, 0}} {
		head := &headSampler{head: tc.head, lags: map[string]int{"tickets": 3000}}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(newRunnerCollector([]runnerView{exportingView{view{name: "tickets", caughtUp: true}}}, head, projector.NewRegistry()))
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == "projector_lag_seconds" })
		if i < 0 {
			t.Fatalf("head %d: no projector_lag_seconds", tc.head)
		}
		// exportingView handled its newest event a minute ago, checkpoint at 10.
		if got := families[i].GetMetric()[0].GetGauge().GetValue(); got < tc.min || got > tc.max {
			t.Errorf("caught up, checkpoint 10, 3000 events counted behind it at a head of %d: projector_lag_seconds %v, want %v to %v", tc.head, got, tc.min, tc.max)
		}
	}
}
