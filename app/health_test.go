package app

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/revgate/projector/projector"
)

// view is a runner as /readyz sees it.
type view struct {
	name                string
	caughtUp, connected bool
	down                string
}

func (v view) Name() string                 { return v.name }
func (v view) Stats() projector.RunnerStats { return projector.RunnerStats{} }
func (v view) CaughtUp() bool               { return v.caughtUp }
func (v view) Current() bool                { return v.caughtUp }
func (v view) Connected() bool              { return v.connected }
func (v view) Down() string                 { return v.down }
func (v view) Leader() bool                 { return true }
func (v view) Reads() Filter                { return StreamPrefix("t/") }

// /readyz says, per projection, why it is not ready: down, not connected to
// the event store (an outage is not "catching up"), or catching up; and
// ready when every projection is caught up (for a group, connected, with
// the server feeding the group live).
func TestReadyz_says_why_each_projection_is_not_ready(t *testing.T) {
	cases := []struct {
		name   string
		views  []runnerView
		status int
		lines  []string
	}{
		{"all caught up", []runnerView{view{name: "a", caughtUp: true, connected: true}}, 200, []string{"ready"}},
		{"an outage", []runnerView{view{name: "a", caughtUp: true, connected: false}, view{name: "b", caughtUp: true, connected: true}}, 503,
			[]string{"not connected (the event store does not answer, or the subscription is opening): a"}},
		{"one behind, one down, one not connected", []runnerView{view{name: "a", connected: true}, view{name: "b", down: "blocked: x"}, view{name: "c"}}, 503,
			[]string{"down: b blocked: x", "not connected (the event store does not answer, or the subscription is opening): c", "catching up: a"}},
		{"a group's consumers, connected, the group live", []runnerView{view{name: "a", connected: true, caughtUp: true}}, 200, []string{"ready"}},
		{"a group's consumers, connected, the group behind", []runnerView{view{name: "a", connected: true}}, 503, []string{"catching up: a"}},
		{"a group's consumer not connected", []runnerView{view{name: "a"}}, 503,
			[]string{"not connected (the event store does not answer, or the subscription is opening): a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			healthHandler(c.views).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			got := strings.Split(strings.TrimSpace(rec.Body.String()), "\n")
			if rec.Code != c.status || strings.Join(got, "|") != strings.Join(c.lines, "|") {
				t.Fatalf("%d %q, want %d %q", rec.Code, got, c.status, c.lines)
			}
		})
	}
}

// A recorded error of several lines (a panic's, with its stack) shows as its
// first line, saying where the rest is; in a log record the rest is an
// attribute of its own.
func TestFirstLine_and_errAttrs_keep_an_error_on_one_line(t *testing.T) {
	panicked := "projection \"p\": panic: boom\ngoroutine 7 [running]:\nmain.f()\n"
	if got, want := firstLine(panicked, "--json"), `projection "p": panic: boom [and 2 more lines, in --json]`; got != want {
		t.Errorf("firstLine: %q, want %q", got, want)
	}
	if got := firstLine("one line\n", "--json"); got != "one line" {
		t.Errorf("firstLine of one line: %q", got)
	}
	if got := errText(projectionStatus{LastError: panicked}); strings.Contains(got, "\n") || !strings.Contains(got, "panic: boom [and 2 more lines") {
		t.Errorf("status's LAST ERROR: %q", got)
	}
	attrs := errAttrs(errors.New(panicked), "projection", "p")
	if len(attrs) != 6 || attrs[3] != `projection "p": panic: boom` || attrs[4] != "detail" {
		t.Errorf("errAttrs of a rest that is not a stack: %q", attrs)
	}
	if attrs := errAttrs(errors.New("plain"), "projection", "p"); len(attrs) != 4 {
		t.Errorf("errAttrs of one line: %q", attrs)
	}
}

// A panic's stack is logged as its frames, one attribute each, from the
// function that panicked: a log line reads them one by one.
func TestErrAttrs_log_a_panic_stack_as_its_frames(t *testing.T) {
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		(&panicker{}).handle()
	}()
	var out bytes.Buffer
	slog.New(slog.NewTextHandler(&out, nil)).Error("projection stopped", errAttrs(err, "projection", "p")...)
	line := out.String()
	if strings.Count(line, "\n") != 1 || !strings.Contains(line, `err="panic: boom"`) {
		t.Fatalf("want one record with the panic's first line:\n%s", line)
	}
	first := regexp.MustCompile(`stack\.0="([^"]+)"`).FindStringSubmatch(line)
	if first == nil || !strings.HasPrefix(first[1], "github.com/revgate/projector/app.(*panicker).handle ") || !strings.Contains(first[1], "health_test.go:") {
		t.Errorf("stack.0 is not the function that panicked, with its file and line:\n%s", line)
	}
	if !strings.Contains(line, "stack.1=") || strings.Contains(line, "runtime/debug.Stack") || strings.Contains(line, "+0x") {
		t.Errorf("want the frames below it, without the recovery's and offsets:\n%s", line)
	}
}

type panicker struct{}

func (*panicker) handle() { panic("boom") }
