package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/revgate/projector/projector"
)

// The files operators load: a Grafana dashboard and Prometheus alert rules.
const (
	dashboardFile = "../deploy/grafana/projector.json"
	alertsFile    = "../deploy/prometheus/alerts.yml"
)

// exportingView is a runner with every figure set, so that /metrics has
// every family the binary can export: a checkpoint, an event handled, a
// lag sampled, unknown types, a persistent group's parked count, and
// segments.
type exportingView struct{ view }

func (exportingView) Stats() projector.RunnerStats {
	return projector.RunnerStats{
		Applied: 3, Checkpoint: &projector.Checkpoint{Position: 10}, Latest: time.Now().Add(-time.Minute),
		UnknownTypes: map[string]uint64{"ticket.noted.v2": 1},
	}
}

func (exportingView) Parked() (uint64, bool) { return 1, true }

// Segments: the projection runs in 4 segments, of which this process holds
// 1 (its checkpoint stored) and 3.
func (exportingView) Segments() (int, map[int]*savedSegment) {
	return 4, map[int]*savedSegment{1: {position: 10, events: 7}, 3: nil}
}

// exported is what /metrics serves: each name a query may use (a
// histogram's _bucket, _sum and _count, a summary's _sum and _count), with
// the labels it has.
type exported map[string][]string

// targetLabels are the labels Prometheus adds to every series it scrapes.
var targetLabels = []string{"job", "instance"}

// exportedMetrics gathers the registry /metrics serves (newMetrics, as
// run's serve builds it) from a runner with every figure set.
func exportedMetrics(t *testing.T) exported {
	t.Helper()
	latency := storeLatency()
	latency.WithLabelValues("tickets", "write_many").Observe(0.01)
	head := &headSampler{head: 100, lags: map[string]int{"tickets": 3}}
	reg := newMetrics(latency, []runnerView{exportingView{view{name: "tickets"}}}, head, projector.NewRegistry())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := exported{"up": targetLabels} // Prometheus's own, per target
	for _, f := range families {
		labels := slices.Clone(targetLabels)
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		out[f.GetName()] = labels
		switch f.GetType().String() {
		case "HISTOGRAM", "GAUGE_HISTOGRAM":
			out[f.GetName()+"_bucket"] = append(slices.Clone(labels), "le")
			out[f.GetName()+"_sum"], out[f.GetName()+"_count"] = labels, labels
		case "SUMMARY":
			out[f.GetName()] = append(labels, "quantile")
			out[f.GetName()+"_sum"], out[f.GetName()+"_count"] = labels, labels
		}
	}
	return out
}

// query is one PromQL expression of the deploy files, and where it is.
type query struct{ where, expr string }

// A reference to a metric in a query: its name and the labels its
// selector matches on.
type metricRef struct {
	name   string
	labels []string
}

var (
	promString   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promSelector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^{}]*)\}`)
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*""`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promToken    = regexp.MustCompile(`[0-9][0-9a-zA-Z_.]*|\$\{?[a-zA-Z0-9_:]+\}?|[a-zA-Z_:][a-zA-Z0-9_:]*`)
	labelValues  = regexp.MustCompile(`^\s*label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)
	promKeywords = []string{"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "inf", "nan"}
)

// metricRefs returns the metrics expr names, with the labels each selector
// matches on: a name followed by "(" is a function or an aggregation, and
// the strings, ranges and grouping clauses are not metrics.
func metricRefs(expr string) ([]metricRef, error) {
	var refs []metricRef
	s := promString.ReplaceAllString(expr, `""`)
	for _, m := range promSelector.FindAllStringSubmatch(s, -1) {
		if m[1] == "" || slices.Contains(promKeywords, m[1]) {
			return nil, fmt.Errorf("a selector without a metric name: %s", m[0])
		}
		ref := metricRef{name: m[1]}
		for _, l := range promMatcher.FindAllStringSubmatch(m[2], -1) {
			ref.labels = append(ref.labels, l[1])
		}
		refs = append(refs, ref)
	}
	s = promSelector.ReplaceAllString(s, " ")
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	for _, loc := range promToken.FindAllStringIndex(s, -1) {
		tok := s[loc[0]:loc[1]]
		if strings.ContainsAny(tok[:1], "0123456789$") || slices.Contains(promKeywords, strings.ToLower(tok)) {
			continue
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		refs = append(refs, metricRef{name: tok})
	}
	if strings.ContainsAny(s, "{}[]") {
		return nil, fmt.Errorf("unbalanced braces or brackets in %q", expr)
	}
	return refs, nil
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title, UID, Description string
	Templating              struct {
		List []struct {
			Name, Type string
			Query      any
			Definition string
		}
	}
	Panels []panel
}

type panel struct {
	ID         int
	Type       string
	Title      string
	Datasource *struct{ Type, UID string }
	Targets    []struct {
		Expr       string
		Datasource *struct{ Type, UID string }
	}
	Panels []panel // a collapsed row's
}

// dashboardQueries checks the dashboard's shape (a Prometheus datasource
// variable used by every panel, a projection variable) and returns its
// queries: panels' and variables'.
func dashboardQueries(t *testing.T, exp exported) []query {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: not JSON a dashboard: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" || !strings.Contains(d.Description, "Segments") {
		t.Errorf("%s: want a uid, a title, and a description that says where segments stand", dashboardFile)
	}
	var queries []query
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "datasource" {
			if v.Query != "prometheus" {
				t.Errorf("%s: variable %s: query %v, want prometheus", dashboardFile, v.Name, v.Query)
			}
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if q, ok := v.Query.(string); ok && q != v.Definition {
			t.Errorf("%s: variable %s: query %q, definition %q: want the same", dashboardFile, v.Name, q, v.Definition)
		}
		if m == nil {
			t.Errorf("%s: variable %s: %q, want label_values(metric, label)", dashboardFile, v.Name, v.Definition)
			continue
		}
		queries = append(queries, query{"variable " + v.Name, m[1]})
		if refs, err := metricRefs(m[1]); err == nil && len(refs) > 0 && !slices.Contains(exp[refs[0].name], m[2]) {
			t.Errorf("%s: variable %s reads label %s, which %s does not have", dashboardFile, v.Name, m[2], refs[0].name)
		}
	}
	if vars["datasource"] != "datasource" || vars["projection"] != "query" {
		t.Errorf("%s: variables %v, want datasource (a Prometheus datasource) and projection (a query)", dashboardFile, vars)
	}
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if ids[p.ID] {
				t.Errorf("%s: %s: its id is another panel's", dashboardFile, where)
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("%s: %s: want the ${datasource} variable and at least one query", dashboardFile, where)
			}
			for _, q := range p.Targets {
				if q.Expr == "" || q.Datasource == nil || q.Datasource.UID != "${datasource}" {
					t.Errorf("%s: %s: a query without an expression or the ${datasource} variable", dashboardFile, where)
				}
				queries = append(queries, query{where, q.Expr})
			}
		}
	}
	walk(d.Panels)
	return queries
}

// ruleFile is Prometheus's rules format, strictly: a field it does not
// know is an error.
type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// alertQueries checks the rules' shape (each alert with a for: duration, a
// severity, and annotations that say what to do) and returns their
// expressions.
func alertQueries(t *testing.T) []query {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f ruleFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: not Prometheus rules: %v", alertsFile, err)
	}
	var queries []query
	seen := map[string]bool{}
	todo := []string{"projector status", "replay-parked", "rebuild", "docs/"}
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("%s: a group without a name or rules", alertsFile)
		}
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			d, err := time.ParseDuration(r.For)
			switch {
			case r.Alert == "" || seen[r.Alert]:
				t.Errorf("%s: an alert without a name, or two of one name %q", alertsFile, r.Alert)
			case err != nil || d <= 0:
				t.Errorf("%s: %s: for: %q, want a duration", alertsFile, where, r.For)
			case !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]):
				t.Errorf("%s: %s: severity %q, want critical, warning or info", alertsFile, where, r.Labels["severity"])
			case r.Annotations["summary"] == "" || !slices.ContainsFunc(todo, func(s string) bool { return strings.Contains(r.Annotations["description"], s) }):
				t.Errorf("%s: %s: want a summary, and a description that says what to do (one of %q)", alertsFile, where, todo)
			}
			seen[r.Alert] = true
			queries = append(queries, query{where, r.Expr})
		}
	}
	return queries
}

// The Grafana dashboard and the alert rules of deploy/ name only metrics
// the binary exports, and only labels those metrics have.
func TestDeploy_names_only_metrics_the_binary_exports(t *testing.T) {
	exp := exportedMetrics(t)
	queries := append(dashboardQueries(t, exp), alertQueries(t)...)
	if len(queries) < 30 {
		t.Fatalf("%d queries in the deploy files, want the dashboard's and the alerts' (30 or more)", len(queries))
	}
	used := map[string]bool{}
	for _, q := range queries {
		refs, err := metricRefs(q.expr)
		if err != nil || len(refs) == 0 {
			t.Errorf("%s: %q: no metric found (%v)", q.where, q.expr, err)
		}
		for _, r := range refs {
			labels, ok := exp[r.name]
			if !ok {
				t.Errorf("%s: %s is not a metric the binary exports", q.where, r.name)
				continue
			}
			used[r.name] = true
			for _, l := range r.labels {
				if !slices.Contains(labels, l) {
					t.Errorf("%s: %s has no label %s (it has %v)", q.where, r.name, l, labels)
				}
			}
		}
	}
	var unused []string
	for name := range exp {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b := strings.TrimSuffix(name, suffix); b != name && exp[b] != nil {
				base = b
			}
		}
		if strings.HasPrefix(name, "projector_") && base == name &&
			!slices.ContainsFunc([]string{"", "_bucket", "_sum", "_count"}, func(s string) bool { return used[name+s] }) {
			unused = append(unused, name)
		}
	}
	slices.Sort(unused)
	t.Logf("%d queries; projector metrics they leave out: %v", len(queries), unused)
}

// metricRefs finds the metrics of a query, and not its functions,
// keywords, strings, label names, durations or Grafana variables.
func TestMetricRefs_finds_metrics_and_nothing_else(t *testing.T) {
	cases := map[string]string{
		`sum by (projection, outcome) (rate(projector_events_total{job=~"$job", outcome=~"a|b"}[$__rate_interval]))`: "projector_events_total[job outcome]",
		`histogram_quantile(0.99, sum by (le) (rate(x_bucket{c="{}"}[5m]))) > 1`:                                     "x_bucket[c]",
		`up{job="projector"} == 1 unless on (job, instance) projector_head_position`:                                 "up[job] projector_head_position[]",
		`scalar(max(a)) - max by (p) (b offset 5m) / 2^30 and bool c`:                                                "a[] b[] c[]",
		`max by (job, projection) (changes(projector_checkpoint_position[15m])) == 0`:                                "projector_checkpoint_position[]",
		`sum without (instance) (a) * on (job) group_left (x) b`:                                                     "a[] b[]",
	}
	for expr, want := range cases {
		refs, err := metricRefs(expr)
		var got []string
		for _, r := range refs {
			got = append(got, fmt.Sprintf("%s%v", r.name, r.labels))
		}
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("%s:\ngot  %s (%v)\nwant %s", expr, strings.Join(got, " "), err, want)
		}
	}
	if _, err := metricRefs(`{__name__="x"}`); err == nil {
		t.Error("a selector without a metric name: no error")
	}
}

// Every page of docs/ that the dashboard and the alert rules send an
// operator to exists, and so does the section they name in it ("page.md,
// Section").
func TestDeploy_the_pages_and_sections_operators_are_sent_to_exist(t *testing.T) {
	ref := regexp.MustCompile(`docs/([a-z]+\.md)(?:, ([A-Z][^.;()"]*(?:\([a-z]+\))?))?`)
	found := 0
	for _, file := range []string{dashboardFile, alertsFile} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := regexp.MustCompile(`\s+`).ReplaceAllString(string(data), " ")
		for _, m := range ref.FindAllStringSubmatch(text, -1) {
			found++
			page, err := os.ReadFile("../docs/" + m[1])
			if err != nil {
				t.Errorf("%s names docs/%s: %v", file, m[1], err)
				continue
			}
			if m[2] != "" && !regexp.MustCompile(`(?m)^#+ `+regexp.QuoteMeta(strings.TrimSpace(m[2]))+`$`).Match(page) {
				t.Errorf("%s names the section %q of docs/%s, which has no such heading", file, m[2], m[1])
			}
		}
	}
	if found < 5 {
		t.Fatalf("%d references to docs/ in %s and %s, want the alerts' and the dashboard's", found, dashboardFile, alertsFile)
	}
}
