package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/projectortest/e2e"
	"github.com/revgate/projector/subscription"
)

// A small domain of the tests' own: tickets opened and noted.
type opened struct{ ID string }
type noted struct{ Text string }
type unregistered struct{}

type ticket struct {
	Notes int `bson:"notes"`
}

func registry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[opened](r, "ticket.opened")
	projector.Register[noted](r, "ticket.noted")
	return r
}

func tickets(name string) *projector.Projection[ticket] {
	p := projector.New[ticket](name, projector.StreamSuffix("ticket/"))
	projector.Create(p, func(opened) (ticket, error) { return ticket{}, nil })
	projector.On(p, func(t ticket, _ noted) (ticket, error) { t.Notes++; return t, nil })
	return p
}

func config(ps ...app.Projection) app.Config {
	return app.Config{Name: "tickets", Registry: registry(), Dial: kurrent.Dial, Projections: ps}
}

// deadEnd is a TCP listener that counts the connections made to it: a
// server no command may reach before it has checked its catalog.
func deadEnd(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return l.Addr().String(), accepted
}

func run(c app.Config, env map[string]string, args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code = c.Run(context.Background(), args, lookup, &o, &e)
	return code, o.String(), e.String()
}

func TestCatalog_a_bad_catalog_fails_before_any_IO_with_one_line_and_exit_2(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	good := app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")}
	noHandlers := projector.New[ticket]("empty", projector.StreamSuffix("ticket/"))
	strays := tickets("strays")
	projector.On(strays, func(t ticket, _ unregistered) (ticket, error) { return t, nil })
	cases := []struct {
		name    string
		config  app.Config
		args    []string
		want    string
		command string
	}{
		{"no registry", app.Config{Projections: []app.Projection{good}}, nil, "no event registry", ""},
		{"no projections", app.Config{Registry: registry()}, nil, "no projections", ""},
		{"no event store client", app.Config{Registry: registry(), Projections: []app.Projection{good}}, nil,
			"no event store client: set Config.Dial to kurrent.Dial", ""},
		{"status without a client", app.Config{Registry: registry(), Projections: []app.Projection{good}}, nil, "set Config.Dial", "status"},
		{"no definition", config(app.Projection{Reads: app.StreamPrefix("ticket/")}), nil, "has no Definition", ""},
		{"two with one name", config(good, app.Projection{Definition: tickets("tickets").InCollection("other"), Reads: good.Reads}), nil,
			`two projections named "tickets"`, ""},
		{"two with one collection", config(good, app.Projection{Definition: tickets("more").InCollection("tickets"), Reads: good.Reads}), nil,
			`projections "tickets" and "more" share collection "tickets"`, ""},
		{"no handlers", config(app.Projection{Definition: noHandlers, Reads: good.Reads}), nil, `projection "empty" has no handlers`, ""},
		{"a handler of an unregistered type", config(app.Projection{Definition: strays, Reads: good.Reads}), nil,
			`projection "strays" handles app_test.unregistered, not in the event registry`, ""},
		{"reads nothing", config(app.Projection{Definition: tickets("tickets")}), nil, `projection "tickets" reads nothing`, ""},
		{"an empty prefix", config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("")}), nil, "would read every stream", ""},
		{"an empty category", config(app.Projection{Definition: tickets("tickets"), Reads: app.Category("")}), nil, "would read every stream", ""},
		{"a category with its dash", config(app.Projection{Definition: tickets("tickets"), Reads: app.Category("ticket-")}), nil,
			`reads category "ticket-": a category is the stream name before its "-", without it: Category("ticket") reads ticket-1`, ""},
		{"an invalid regex", config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamRegex("^ticket/(")}), nil, "invalid stream regex", ""},
		{"a tied prefix it does not read", config(app.Projection{Definition: tickets("tickets").Idempotency(projector.RevisionMap()).TieStreams("note/"), Reads: app.StreamPrefix("ticket/")}), nil,
			`projection "tickets" ties streams "note/"* (TieStreams), but reads streams ["ticket/"]*: their events would never reach its documents`, ""},
		{"event types under the revision gate", config(app.Projection{Definition: tickets("tickets"), Reads: app.EventTypes("ticket.noted")}), nil,
			"leaves holes in its streams' revisions", ""},
		{"negative workers", config(app.Projection{Definition: tickets("tickets"), Reads: good.Reads, Workers: -1}), nil, "Workers and Batch must be >= 0", ""},
		{"global position with two workers", config(app.Projection{Definition: tickets("tickets").Idempotency(projector.GlobalPosition()), Reads: good.Reads, Workers: 2}), nil,
			"needs one worker", ""},
		{"rebuild with a setting that cannot work", config(good), []string{"tickets", "--batch-window", "-1s"}, "--batch-window -1s, --batch-mib 16: want a batch of at least 1 event and 1 MiB, and a window of at least 0", "rebuild"},
		{"a nil definition of a type", config(app.Projection{Definition: (*projector.Projection[ticket])(nil), Reads: good.Reads}), nil, "has no Definition", ""},
		{"an event type not in the registry", config(app.Projection{Definition: counter("notes", "ticket.noted"), Reads: app.EventTypes("ticket.noted", "ticket.nited")}), nil,
			`reads event type "ticket.nited", which is not in the event registry`, ""},
		{"a handled type the filter leaves out", config(app.Projection{Definition: counter("notes", "ticket.noted"), Reads: app.EventTypes("ticket.opened")}), nil,
			`handles event type "ticket.noted" but reads only event types ["ticket.opened"]`, ""},
		{"handled types the filter leaves out", func() app.Config {
			c := config(app.Projection{Definition: counter("notes", "ticket.noted"), Reads: app.EventTypes("ticket.opened")})
			c.Registry = projector.NewRegistry()
			projector.Register[opened](c.Registry, "ticket.opened")
			projector.Register[noted](c.Registry, "ticket.noted", projector.Renamed("ticket.note"))
			return c
		}(), nil, `handles event types ["ticket.note" "ticket.noted"] but reads only event types ["ticket.opened"]: their handlers`, ""},
		{"an added command named as a built-in", func() app.Config {
			c := config(good)
			c.Commands = []app.Command{{Name: "status", Run: func(context.Context, app.Invocation) error { return nil }}}
			return c
		}(), nil, `two commands named "status"`, ""},
		{"an unknown name in --projections", config(good), []string{"--projections", "tickets,nope"}, `unknown projection "nope"; known: tickets`, ""},
		{"a runner setting that cannot work", config(good), []string{"--checkpoint-every", "0"}, `--checkpoint-every 0, --checkpoint-interval 1s: want at least 1 event`, ""},
		{"negative --workers", config(good), []string{"--workers", "-1"}, `--workers -1: want at least 1`, ""},
		{"a database name MongoDB refuses", config(good), []string{"--database", "bad/db"}, `--database "bad/db": MongoDB takes a database name of 1 to 63 bytes`, ""},
		{"a database name MongoDB refuses, for status", config(good), []string{"--database", "a.b"}, `--database "a.b"`, "status"},
		{"a batch of 0", config(good), []string{"--batch", "0"}, `--batch 0, --batch-window 20ms, --batch-mib 16: want a batch of at least 1 event and 1 MiB`, ""},
		{"a batch of 0 MiB", config(good), []string{"--batch-mib", "0"}, `--batch-mib 0: want a batch of at least 1 event and 1 MiB`, ""},
		{"negative --trace-event-spans", config(good), []string{"--trace-event-spans", "-1"}, `--trace-event-spans -1: want 0 or more`, ""},
		{"rebuild with a batch of 0 MiB", config(good), []string{"tickets", "--batch-mib", "0"}, "--batch-mib 0: want a batch of at least 1 event and 1 MiB", "rebuild"},
		{"rebuild with negative --trace-event-spans", config(good), []string{"tickets", "--trace-event-spans", "-1"}, "--trace-event-spans -1: want 0 or more", "rebuild"},
		{"hold under a strategy without revisions", config(app.Projection{Definition: tickets("tickets").Idempotency(projector.HandledIDs(100)), Reads: good.Reads}),
			[]string{"--on-failure", "hold"}, `projection "tickets": the hold policy needs the StreamRevision or RevisionMap strategy`, ""},
		{"rebuild with hold under a strategy without revisions", config(app.Projection{Definition: tickets("tickets").Idempotency(projector.HandledIDs(100)), Reads: good.Reads}),
			[]string{"tickets", "--on-failure", "hold"}, `projection "tickets": the hold policy needs the StreamRevision or RevisionMap strategy`, "rebuild"},
		{"global position in a group", config(app.Projection{Definition: tickets("tickets").Idempotency(projector.GlobalPosition()), Reads: good.Reads}),
			[]string{"--group", "g"}, `--group g: projection "tickets" uses the global position strategy, which needs one consumer reading the log in order: a catch-up subscription, not a persistent subscription group`, ""},
		{"an --http that is no address", config(good), []string{"--http", ":abc"}, `--http ":abc": lookup tcp/abc: unknown port`, ""},
		{"an --http without a port", config(good), []string{"--http", "localhost"}, `--http "localhost": want host:port or :port`, ""},
		{"hold for every projection, one of which cannot", config(good, app.Projection{Definition: tickets("ids").InCollection("ids").Idempotency(projector.HandledIDs(100)), Reads: good.Reads}),
			[]string{"--on-failure", "hold"}, `name the others with --projections, or give the projections that can hold it as their own, with OnFailure(projector.Hold)`, ""},
		{"hold in a group", config(good), []string{"--group", "g", "--on-failure", "hold"},
			`--group g: projection "tickets" holds the documents of failed events (the hold policy), which needs one consumer reading the log in order`, ""},
		{"a projection's own hold in a group", config(app.Projection{Definition: tickets("tickets").OnFailure(projector.Hold), Reads: good.Reads}),
			[]string{"--group", "g"}, `--group g: projection "tickets" holds the documents of failed events`, ""},
		{"status of a bad catalog", config(app.Projection{Definition: noHandlers, Reads: good.Reads}), nil, "has no handlers", "status"},
		{"a projection's own hold under a strategy without revisions", config(app.Projection{Definition: tickets("tickets").Idempotency(projector.HandledIDs(100)).OnFailure(projector.Hold), Reads: good.Reads}),
			nil, `projection "tickets": the hold policy needs the StreamRevision or RevisionMap strategy`, ""},
		{"status of a projection whose own hold cannot work", config(app.Projection{Definition: tickets("tickets").Idempotency(projector.HandledIDs(100)).OnFailure(projector.Hold), Reads: good.Reads}),
			nil, `projection "tickets": the hold policy needs the StreamRevision or RevisionMap strategy`, "status"},
		{"rebuild of an unknown projection", config(good), []string{"nope"}, `unknown projection "nope"`, "rebuild"},
		{"replay-parked of an unknown projection", config(good), []string{"nope"}, `unknown projection "nope"`, "replay-parked"},
		{"replay-parked with a negative lease", config(good), []string{"tickets", "--lease", "-1s"}, `--lease -1s: want 0 (do not look) or at least 1s`, "replay-parked"},
		// Past what a process holds: before, it started and died out of memory.
		{"100,000,000 workers", config(good), []string{"--workers", "100000000"}, `runner: workers must be at most 1024, got 100000000`, ""},
		{"a batch of 10^11 events", config(good), []string{"--batch", "100000000000"}, `runner: a batch must be at most 100000 events`, ""},
		{"a batch of 2^44 MiB", config(good), []string{"--batch-mib", "17592186045440"}, `--batch-mib 17592186045440: want at most 1024`, ""},
		{"rebuild with a batch of 2^44 MiB", config(good), []string{"tickets", "--batch-mib", "17592186045440"}, `--batch-mib 17592186045440: want at most 1024`, "rebuild"},
		{"rebuild with no workers", config(good), []string{"tickets", "--workers", "0"}, `--workers 0: want at least 1`, "rebuild"},
		{"segments in a group", config(good), []string{"--segments", "2", "--group", "g", "--lease", "15s"}, `--segments 2 does not go with --group`, ""},
		// The flag's value was the next flag's name, and what followed it an unexpected argument.
		{"a group without its name", config(good), []string{"--group", "--http", ""}, `--group --http: --group wants a value before the next flag`, ""},
		{"a database without its name, before a NAME", config(good), []string{"--database", "--workers=2", "tickets"}, `--database --workers=2: --database wants a value`, "rebuild"},
		{"a group before --help", config(good), []string{"--group", "--help"}, `--group --help: --group wants a value`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr, accepted := deadEnd(t)
			command := c.command
			if command == "" {
				command = "run"
			}
			args := []string{command}
			if command == "run" {
				args = append(args, "--http", "") // before the case's own flags, which win
			}
			args = append(args, c.args...)
			if command != "replay-parked" {
				args = append(args, "--esdb", "esdb://"+addr+"?tls=false")
			}
			args = append(args, "--mongo", "mongodb://"+addr)
			code, _, stderr := run(c.config, nil, args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if code != 2 || len(lines) != 1 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line with %q", code, stderr, c.want)
			}
			time.Sleep(100 * time.Millisecond) // a client that dials in the background would have by now
			if n := accepted.Load(); n > 0 {
				t.Fatalf("%d connections to a server before the catalog was refused", n)
			}
		})
	}
}

func TestRun_flags_come_from_PROJECTOR_variables_and_the_command_line_wins(t *testing.T) {
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	addr, accepted := deadEnd(t)
	mongo := "mongodb://" + addr
	code, _, stderr := run(c, map[string]string{"PROJECTOR_MONGO": mongo}, "run", "--http", "")
	if code != 2 || !strings.Contains(stderr, "--esdb (or PROJECTOR_ESDB) is required") {
		t.Fatalf("no --esdb: exit %d, %q", code, stderr)
	}
	code, _, stderr = run(c, map[string]string{"PROJECTOR_ESDB": "esdb://" + addr, "PROJECTOR_MONGO": mongo, "PROJECTOR_WORKERS": "many"}, "run")
	if code != 2 || !strings.Contains(stderr, `PROJECTOR_WORKERS="many"`) {
		t.Fatalf("a bad variable: exit %d, %q", code, stderr)
	}
	code, _, stderr = run(c, map[string]string{"PROJECTOR_ESDB": "esdb://" + addr, "PROJECTOR_MONGO": mongo, "PROJECTOR_WORKERS": "many"}, "run", "--workers", "2", "--on-failure", "drop")
	if code != 2 || !strings.Contains(stderr, `--on-failure "drop"`) {
		t.Fatalf("the flag given wins over the variable, then the next bad value: exit %d, %q", code, stderr)
	}
	code, _, stderr = run(c, nil, "run", "--esdb", "esdb://"+addr, "--mongo", mongo, "--wokrers", "2")
	if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "-wokrers") || !strings.Contains(stderr, "see tickets run --help") {
		t.Fatalf("a flag typo: exit %d, %q; want one line that points to --help", code, stderr)
	}
	time.Sleep(100 * time.Millisecond) // a client that dials in the background would have by now
	if accepted.Load() > 0 {
		t.Fatalf("bad command lines reached a server")
	}
}

func TestConfig_without_an_embedded_server_needs_mongo(t *testing.T) {
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	code, _, stderr := run(c, nil, "run", "--esdb", "esdb://127.0.0.1:1?tls=false", "--data-dir", "x")
	if code != 2 || !strings.Contains(stderr, "flag provided but not defined: -data-dir") {
		t.Fatalf("--data-dir without an embedded server: exit %d, %q", code, stderr)
	}
	code, _, stderr = run(c, nil, "status")
	if code != 2 || !strings.Contains(stderr, "--mongo (or PROJECTOR_MONGO) is required") {
		t.Fatalf("exit %d, %q", code, stderr)
	}
}

func TestConfig_added_commands_run_with_the_invocation_and_only_the_visible_ones_are_listed(t *testing.T) {
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	c.EnvPrefix = "TICKETS_"
	c.Commands = []app.Command{
		{Name: "hello", Summary: "say hello", Run: func(_ context.Context, inv app.Invocation) error {
			fs := inv.FlagSet("[--to NAME]")
			to := fs.String("to", "world", "whom to greet")
			if err := inv.Parse(fs); err != nil {
				return err
			}
			if *to == "" {
				fmt.Fprintln(inv.Stderr, "--to must not be empty")
				return app.ErrUsage
			}
			fmt.Fprintf(inv.Stdout, "%s %s: hello, %s\n", inv.Name, inv.Command, *to)
			return nil
		}},
		{Name: "secret", Hidden: true, Run: func(context.Context, app.Invocation) error { return errors.New("it broke") }},
	}
	code, _, stderr := run(c, nil)
	if code != 2 || !strings.Contains(stderr, "usage: tickets <command>") || !strings.Contains(stderr, "say hello") ||
		strings.Contains(stderr, "secret") || !strings.Contains(stderr, "TICKETS_<FLAG>") {
		t.Fatalf("exit %d, %q", code, stderr)
	}
	// Help asked for goes to stdout, for a pager; help after a mistake to stderr.
	if code, out, stderr := run(c, nil, "--help"); code != 0 || stderr != "" || !strings.Contains(out, "usage: tickets <command>") {
		t.Fatalf("--help: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if code, out, stderr := run(c, nil, "hello", "--help"); code != 0 || stderr != "" ||
		!strings.Contains(out, "usage: tickets hello [--to NAME]") || !strings.Contains(out, "whom to greet") {
		t.Fatalf("hello --help: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if code, out, _ := run(c, map[string]string{"TICKETS_TO": "env"}, "hello", "--to", "desk"); code != 0 || out != "tickets hello: hello, desk\n" {
		t.Fatalf("hello --to desk: exit %d, %q", code, out)
	}
	if code, out, _ := run(c, map[string]string{"TICKETS_TO": "env", "PROJECTOR_TO": "other"}, "hello"); code != 0 || out != "tickets hello: hello, env\n" {
		t.Fatalf("hello with TICKETS_TO: exit %d, %q", code, out)
	}
	if code, _, stderr := run(c, nil, "hello", "--to", ""); code != 2 || !strings.Contains(stderr, "--to must not be empty") {
		t.Fatalf("hello --to '': exit %d, %q", code, stderr)
	}
	if code, _, stderr := run(c, nil, "secret"); code != 1 || stderr != "tickets secret: it broke\n" {
		t.Fatalf("secret: exit %d, %q", code, stderr)
	}
	if code, _, stderr := run(c, map[string]string{"TICKETS_WORKERS": "zz"}, "run", "--esdb", "esdb://127.0.0.1:1", "--mongo", "mongodb://127.0.0.1:1"); code != 2 ||
		!strings.Contains(stderr, `TICKETS_WORKERS="zz": --workers wants int`) {
		t.Fatalf("a bad variable under the binary's prefix: exit %d, %q", code, stderr)
	}
}

// The projection's own settings win over the flags, which give the
// defaults: one projection asks for one worker while --workers says 3, the
// other takes the flag's, and one under the global-position strategy gets
// the one worker it needs without asking.
func TestRun_a_projections_own_workers_win_over_the_flag(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	for i := range 3 {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: "x"}, noted{Text: "a"}, noted{Text: "b"})
	}
	c := config(
		app.Projection{Definition: tickets("one"), Reads: app.StreamPrefix("ticket/"), Workers: 1},
		app.Projection{Definition: tickets("flag"), Reads: app.StreamPrefix("ticket/")},
		app.Projection{Definition: tickets("ordered").Idempotency(projector.GlobalPosition()), Reads: app.StreamPrefix("ticket/")},
	)
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "", "--workers", "3")
	for _, name := range []string{"one", "flag", "ordered"} {
		cmd.WaitCheckpoint(t, db, name, servers.Head())
	}
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, cmd.Stderr())
	}
	if strings.Contains(cmd.Stderr(), "none of the events delivered") {
		t.Errorf("a projection that routes its events was warned that it does not:\n%s", cmd.Stderr())
	}
	for name, workers := range map[string]int{"one": 1, "flag": 3, "ordered": 1} {
		if want := fmt.Sprintf("msg=\"runner starts\" runner=%s from=start workers=%d", name, workers); !strings.Contains(cmd.Stderr(), want) {
			t.Errorf("no %q in the log:\n%s", want, cmd.Stderr())
		}
	}
}

// A projection that parks its own failed events (OnFailure(Park), not the
// flag) can have them replayed, and can be rebuilt past them.
func TestReplayParked_and_rebuild_of_a_projection_that_parks_by_itself(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	picky := projector.New[ticket]("picky", projector.StreamSuffix("ticket/")).OnFailure(projector.Park)
	projector.Create(picky, func(opened) (ticket, error) { return ticket{}, nil })
	projector.On(picky, func(t ticket, n noted) (ticket, error) {
		if n.Text == "bad" {
			return t, errors.New("no bad notes")
		}
		t.Notes++
		return t, nil
	})
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"}, noted{Text: "bad"}, noted{Text: "c"})
	c := config(app.Projection{Definition: picky, Reads: app.StreamPrefix("ticket/")})
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name()}
	cmd := e2e.StartCommand(t, c, append([]string{"run", "--esdb", servers.ESDBURI(), "--http", ""}, common...)...)
	cmd.WaitCheckpoint(t, db, "picky", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
	code, out, stderr := run(c, nil, append([]string{"replay-parked", "picky"}, common...)...)
	if code != 1 || !strings.Contains(out, "replayed 0 of 1 parked events of picky") || !strings.Contains(out, "no bad notes") {
		t.Fatalf("replay-parked: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(c, nil, append([]string{"rebuild", "picky", "--esdb", servers.ESDBURI()}, common...)...)
	if code != 0 || !strings.Contains(out, " 0 skipped, 1 parked, 0 held; 0 folds of a document from its streams' history); readers now use picky_r") {
		t.Fatalf("rebuild: exit %d\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "picky: 1 events parked in picky_r") || !strings.Contains(stderr, "replay-parked picky applies them") {
		t.Errorf("the rebuild's switch does not say what readers now see without:\n%s", stderr)
	}
}

// desks is a read model of one document per desk, fed by ticket streams: a
// ticket's opening names its desk, its notes do not (TieStreams ties them
// to it); a note "bad" fails unless fixed.
func desks(fixed bool) *projector.Projection[ticket] {
	p := projector.New[ticket]("desks", func(ev projector.Event) (string, bool) {
		if o, ok := ev.Payload.(opened); ok {
			return o.ID, true
		}
		return "", false
	}).Idempotency(projector.RevisionMap()).TieStreams("ticket/").OnFailure(projector.Park)
	projector.On(p, func(t ticket, _ opened) (ticket, error) { return t, nil })
	projector.On(p, func(t ticket, n noted) (ticket, error) {
		if n.Text == "bad" && !fixed {
			return t, errors.New("no bad notes")
		}
		t.Notes++
		return t, nil
	})
	return p
}

// The parked events of a projection that ties streams are replayed with
// the event store given (the engine reads their streams to route them); without
// it, replay-parked says what to give.
func TestReplayParked_of_a_projection_that_ties_streams_reads_them_from_the_event_store(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "d1"}, noted{Text: "a"}, noted{Text: "bad"}, noted{Text: "c"})
	servers.Append(t, registry(), "ticket/2", opened{ID: "d1"}, noted{Text: "a"})
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name()}
	broken := config(app.Projection{Definition: desks(false), Reads: app.StreamPrefix("ticket/")})
	cmd := e2e.StartCommand(t, broken, append([]string{"run", "--esdb", servers.ESDBURI(), "--http", ""}, common...)...)
	cmd.WaitCheckpoint(t, db, "desks", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
	fixed := config(app.Projection{Definition: desks(true), Reads: app.StreamPrefix("ticket/")})
	code, out, stderr := run(fixed, nil, append([]string{"replay-parked", "desks"}, common...)...)
	if code != 2 || !strings.Contains(stderr, "give --esdb") {
		t.Fatalf("replay-parked without --esdb: exit %d, want 2 (a usage error) and what to give\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(fixed, nil, append([]string{"replay-parked", "desks", "--esdb", servers.ESDBURI()}, common...)...)
	if code != 0 || !strings.Contains(out, "replayed 1 of 1 parked events of desks") {
		t.Fatalf("replay-parked: exit %d\n%s\n%s", code, out, stderr)
	}
	// Folded anew, in its stream's order: the operator is told how exact
	// that is, and when it is not.
	if !strings.Contains(out, "note: a document that had later events of a replayed event's stream was folded anew from its streams") || !strings.Contains(out, "rebuild desks") {
		t.Errorf("replay-parked does not say how the documents were folded:\n%s", out)
	}
	var d ticket
	if found, _, err := projector.ReadDocument(context.Background(), mongostore.New(db), desks(true), "d1", &d); err != nil || !found || d.Notes != 4 {
		t.Fatalf("desk d1: found %v, %d notes (%v); want its 4 notes", found, d.Notes, err)
	}
}

// counter is a projection of one document, "all", counting the events of
// the types named; any other event routed to it lands in a document "leak".
func counter(name string, types ...string) *projector.Projection[ticket] {
	p := projector.New[ticket](name, func(ev projector.Event) (string, bool) {
		if slices.Contains(types, ev.Type) {
			return "all", true
		}
		return "leak", true
	}).Idempotency(projector.HandledIDs(100))
	projector.On(p, func(t ticket, _ noted) (ticket, error) { t.Notes++; return t, nil })
	return p
}

// EventTypes asks the server for the types named, exactly: a type that only
// starts like one of them is not delivered.
func TestEventTypes_the_server_sends_exactly_the_types_named(t *testing.T) {
	type notedLater struct{ Text string }
	reg := registry()
	projector.Register[notedLater](reg, "ticket.noted-later")
	notes := counter("notes", "ticket.noted")
	c := app.Config{Name: "tickets", Registry: reg, Dial: kurrent.Dial, Projections: []app.Projection{{Definition: notes, Reads: app.EventTypes("ticket.noted")}}}

	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	var wanted []projector.Event
	for i := range 4 {
		evs := servers.Append(t, reg, fmt.Sprintf("ticket/%d", i), opened{ID: "x"}, noted{Text: "a"}, notedLater{Text: "b"}, noted{Text: "c"})
		wanted = append(wanted, evs[1], evs[3])
	}
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
	cmd.WaitCheckpoint(t, db, "notes", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, cmd.Stderr())
	}
	store := mongostore.New(db)
	if err := projectortest.CheckDocument(context.Background(), store, notes, "all", wanted); err != nil {
		t.Fatal(err)
	}
	if _, found, err := store.LoadGuarded(context.Background(), "notes", "leak", nil); err != nil || found {
		t.Fatalf("events of other types reached the projection (a document %q: %v, %v)", "leak", found, err)
	}
}

// What a binary built with the package links: no test double, no testing
// package, and no embedded server unless it imports embedmongo.
func TestApp_links_no_test_double_and_no_embedded_server(t *testing.T) {
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(out))
	}
	lean := deps("github.com/revgate/projector/app")
	for _, bad := range []string{"testing", "github.com/revgate/projector/esdbtest", "github.com/revgate/projector/projectortest",
		"github.com/FerretDB/FerretDB/ferretdb", "modernc.org/sqlite", "github.com/jackc/pgx/v5"} {
		if slices.Contains(lean, bad) {
			t.Errorf("package app links %s", bad)
		}
	}
	embedded := deps("github.com/revgate/projector/app/embedmongo")
	if !slices.Contains(embedded, "github.com/FerretDB/FerretDB/ferretdb") || slices.Contains(embedded, "testing") {
		t.Errorf("package embedmongo: FerretDB %v, testing %v; want FerretDB and no testing",
			slices.Contains(embedded, "github.com/FerretDB/FerretDB/ferretdb"), slices.Contains(embedded, "testing"))
	}
}

// A projection whose IDFunc wants none of what its subscription reads is
// said so, once caught up, instead of looking healthy with nothing applied.
func TestRun_a_projection_that_routes_none_of_its_events_is_told_so(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	mismatched := projector.New[ticket]("tickets", projector.StreamSuffix("tkt/"))
	projector.Create(mismatched, func(opened) (ticket, error) { return ticket{}, nil })
	cmd := e2e.StartCommand(t, config(app.Projection{Definition: mismatched, Reads: app.StreamPrefix("ticket/")}),
		"run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
	cmd.WaitCheckpoint(t, db, "tickets", servers.Head())
	for deadline := time.Now().Add(time.Minute); !strings.Contains(cmd.Stderr(), `msg="none of the events delivered went to a document`); {
		if time.Now().After(deadline) {
			t.Fatalf("no warning about the IDFunc:\n%s", cmd.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, cmd.Stderr())
	}
}

// A document that a projection under the revision gate feeds from several
// streams stops that projection with one line naming both streams and the
// strategies that fit, instead of losing the second stream's updates as
// duplicates; what the first stream did stays.
// allTickets is the mistake a document fed by several streams is, under
// the revision gate: every ticket stream feeds document "all".
func allTickets() *projector.Projection[ticket] {
	one := projector.New[ticket]("all_tickets", func(ev projector.Event) (string, bool) {
		return "all", strings.HasPrefix(ev.StreamID, "ticket/")
	})
	projector.Create(one, func(opened) (ticket, error) { return ticket{}, nil })
	projector.On(one, func(t ticket, _ noted) (ticket, error) { t.Notes++; return t, nil })
	return one
}

// binaries are the programs this test binary becomes when run with
// APP_TEST_MAIN set: a user's binary built on app, run as a subprocess.
var binaries = map[string]func() app.Config{
	"all-tickets": func() app.Config {
		return config(app.Projection{Definition: allTickets(), Reads: app.StreamPrefix("ticket/")})
	},
	"stuck-tickets": func() app.Config {
		// A step that never returns once it meets a note "stuck" (a user's
		// loop that does not end), having said so in the file
		// APP_TEST_STUCK names.
		p := projector.New[ticket]("tickets", projector.StreamSuffix("ticket/"))
		projector.Create(p, func(opened) (ticket, error) { return ticket{}, nil })
		projector.On(p, func(t ticket, n noted) (ticket, error) {
			if n.Text == "stuck" {
				os.WriteFile(os.Getenv("APP_TEST_STUCK"), []byte("stuck"), 0o600)
				select {}
			}
			t.Notes++
			return t, nil
		})
		return config(app.Projection{Definition: p, Reads: app.StreamPrefix("ticket/")})
	},
	"no-dial": func() app.Config {
		c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
		c.Dial = nil
		return c
	},
}

// A binary whose Config names no event-store client (Config.Dial) stops as
// it starts, before it connects to anything: one line naming kurrent.Dial,
// exit status 2.
func TestMain_a_config_without_Dial_fails_at_start_with_one_line_naming_kurrent_Dial(t *testing.T) {
	addr, accepted := deadEnd(t)
	cmd, stderr := startBinary(t, "no-dial", "run", "--http", "", "--esdb", "esdb://"+addr+"?tls=false", "--mongo", "mongodb://"+addr)
	err := cmd.Wait()
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if code := cmd.ProcessState.ExitCode(); code != 2 || len(lines) != 1 || !strings.Contains(stderr.String(), "set Config.Dial to kurrent.Dial") {
		t.Fatalf("exit %d (%v), stderr %q; want exit 2 and one line naming kurrent.Dial", code, err, stderr)
	}
	if n := accepted.Load(); n > 0 {
		t.Fatalf("%d connections before the config was refused", n)
	}
}

func TestMain(m *testing.M) {
	if c, ok := binaries[os.Getenv("APP_TEST_MAIN")]; ok {
		app.Main(c()) // exits
	}
	os.Exit(mongotest.Main(m))
}

// startServers starts the test's servers as e2e.StartServers does, on the
// Mongo-wire server the package's tests share (internal/mongotest's: the
// run's FerretDB, or MONGO_URI's), where o names none, rather than on one
// embedded in the test process for each test; each test has a database of
// its own there (Servers.Database).
func startServers(t testing.TB, o e2e.Options) *e2e.Servers {
	t.Helper()
	if o.MongoURI == "" {
		o.MongoURI = mongotest.URI(t)
	}
	return e2e.StartServers(t, o)
}

// startBinary runs this test binary as the program binaries[name], with args.
func startBinary(t *testing.T, name string, args ...string) (cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	return startBinaryEnv(t, name, nil, args...)
}

// startBinaryEnv is startBinary with env (KEY=value) added to the
// program's environment.
func startBinaryEnv(t *testing.T, name string, env []string, args ...string) (cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	cmd = exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "APP_TEST_MAIN="+name), env...)
	stderr = new(bytes.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, stderr
}

// The binary stops a projection whose document is fed by two streams under
// the revision gate: exit status 1, one line naming both streams and the
// strategies that fit, and the document is the fold of the stream that fed
// it first (nothing of the other applied, nothing counted a duplicate).
func TestRun_a_document_fed_by_two_streams_under_the_revision_gate_stops_the_projection(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	streams := map[string][]projector.Event{
		"ticket/1": servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"}),
		"ticket/2": servers.Append(t, registry(), "ticket/2", opened{ID: "2"}, noted{Text: "b"}, noted{Text: "c"}),
	}

	cmd, stderr := startBinary(t, "all-tickets", "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("still running after 2 minutes:\n%s", stderr)
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr)
	}
	// Workers take the streams in any order: whichever came first feeds the
	// document, and the other is refused.
	m := regexp.MustCompile(`the document is fed by stream "(ticket/\d)", and this event is of stream "(ticket/\d)"; ` +
		`a document fed by several streams needs the RevisionMap, HandledIDs or Inbox strategy`).FindStringSubmatch(stderr.String())
	if m == nil || m[1] == m[2] {
		t.Fatalf("no error naming both streams and the strategies that fit:\n%s", stderr)
	}
	if err := projectortest.CheckDocument(context.Background(), mongostore.New(db), allTickets(), "all", streams[m[1]]); err != nil {
		t.Fatal(err)
	}
}

// status counts, behind a projection's checkpoint, only the events its
// filter reads: a quiet projection among busy streams is not shown behind
// by the others' events.
func TestStatus_counts_behind_only_the_events_the_projection_reads(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"}, noted{Text: "b"})
	for i := range 20 {
		servers.Append(t, registry(), fmt.Sprintf("other/%d", i), noted{Text: "x"})
	}
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")},
		app.Projection{Definition: tickets("everything"), Reads: app.StreamRegex(".*")})
	code, out, stderr := run(c, nil, "status", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--json")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	// Nothing ran against this database: a mistyped --database looks so.
	if want := fmt.Sprintf("(no projection has a checkpoint in database %q", db.Name()); !strings.Contains(stderr, want) {
		t.Errorf("status before any run: no %q in\n%s", want, stderr)
	}
	var lines []struct {
		Projection string
		Behind     *int
	}
	if err := json.Unmarshal([]byte(out), &lines); err != nil || len(lines) != 2 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	want := map[string]int{"tickets": 3, "everything": 23}
	for _, l := range lines {
		if l.Behind == nil || *l.Behind != want[l.Projection] {
			t.Errorf("%s behind %v, want %d", l.Projection, l.Behind, want[l.Projection])
		}
	}
}

// A projection whose filter reads none of the traffic after its own events
// (a quiet one among busy streams) stores the head as its checkpoint while
// it runs, within the bound of WaitCheckpoint: status does not show it
// behind, and a restart does not read the others' events again.
func TestRun_a_quiet_filtered_projection_s_checkpoint_follows_the_head(t *testing.T) {
	t.Parallel() // mostly waiting, on servers and a database of its own
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	events := servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(),
		"--http", "", "--checkpoint-interval", "100ms")
	cmd.WaitCheckpoint(t, db, "tickets", servers.Head())
	for i := range 300 {
		servers.Append(t, registry(), fmt.Sprintf("other/%d", i), noted{Text: "x"})
	}
	head := servers.Head()
	cmd.WaitCheckpoint(t, db, "tickets", head)
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
	cps, err := mongostore.New(db).Checkpoints(context.Background())
	if cp := cps["tickets"].Checkpoint; err != nil || cp == nil || cp.Position < head {
		t.Fatalf("after the stop, checkpoint %v (%v), want at the head %d", cp, err, head)
	}
	if err := projectortest.CheckDocument(context.Background(), mongostore.New(db), tickets("tickets"), "1", events); err != nil {
		t.Fatal(err)
	}
}

// A parked event that the fixed build no longer takes (its router, which
// panicked on it, now declines it) is marked replayed with nothing
// applied, and the replay's count says so apart from the events it
// applied.
func TestReplayParked_counts_the_events_with_nothing_to_apply_apart(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	build := func(fixed bool) *projector.Projection[ticket] {
		route := projector.StreamSuffix("ticket/")
		p := projector.New[ticket]("choosy", func(ev projector.Event) (string, bool) {
			if n, ok := ev.Payload.(noted); ok && n.Text == "bad" {
				if fixed {
					return "", false // the fix: bad notes are not this read model's
				}
				panic("no bad notes")
			}
			return route(ev)
		}).Idempotency(projector.HandledIDs(100)).OnFailure(projector.Park)
		projector.Create(p, func(opened) (ticket, error) { return ticket{}, nil })
		projector.On(p, func(t ticket, n noted) (ticket, error) { t.Notes++; return t, nil })
		return p
	}
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"}, noted{Text: "bad"}, noted{Text: "c"})
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name()}
	broken := config(app.Projection{Definition: build(false), Reads: app.StreamPrefix("ticket/")})
	cmd := e2e.StartCommand(t, broken, append([]string{"run", "--esdb", servers.ESDBURI(), "--http", ""}, common...)...)
	cmd.WaitCheckpoint(t, db, "choosy", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
	fixed := config(app.Projection{Definition: build(true), Reads: app.StreamPrefix("ticket/")})
	code, out, stderr := run(fixed, nil, append([]string{"replay-parked", "choosy", "--esdb", servers.ESDBURI()}, common...)...)
	if code != 0 || !strings.Contains(out, "replayed 1 of 1 parked events of choosy into choosy (1 of them with nothing to apply") {
		t.Fatalf("replay-parked: exit %d; want 0, and the event with nothing to apply counted apart\n%s\n%s", code, out, stderr)
	}
	if strings.Contains(out, "note: a parked event") {
		t.Errorf("replay-parked says how applied events stand, with none applied:\n%s", out)
	}
	var d ticket
	if found, _, err := projector.ReadDocument(context.Background(), mongostore.New(db), build(true), "1", &d); err != nil || !found || d.Notes != 2 {
		t.Fatalf("ticket 1: found %v, %d notes (%v); want 2", found, d.Notes, err)
	}
}

// An event skipped when it came (--on-failure skip) that still fails with
// the fixed build, met as a replay folds its document anew from its
// stream, is left out of the fold and parked: the replay says so, names
// it, and exits 1, rather than report every event replayed.
func TestReplayParked_says_which_events_folding_anew_left_out_and_parked(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	build := func(fixed bool) app.Config {
		p := projector.New[ticket]("strict", projector.StreamSuffix("ticket/"))
		projector.Create(p, func(opened) (ticket, error) { return ticket{}, nil })
		projector.On(p, func(t ticket, n noted) (ticket, error) {
			switch {
			case n.Text == "rude":
				return t, errors.New("no rude notes") // fails with every build
			case n.Text == "bad" && !fixed:
				return t, errors.New("no bad notes")
			}
			t.Notes++
			return t, nil
		})
		return config(app.Projection{Definition: p, Reads: app.StreamPrefix("ticket/")})
	}
	common := []string{"--mongo", servers.MongoURI(), "--database", db.Name()}
	runUntilHead := func(policy string) {
		t.Helper()
		cmd := e2e.StartCommand(t, build(false), append([]string{"run", "--esdb", servers.ESDBURI(), "--http", "", "--on-failure", policy}, common...)...)
		cmd.WaitCheckpoint(t, db, "strict", servers.Head())
		if code := cmd.Stop(t); code != 0 {
			t.Fatalf("run --on-failure %s: exit %d\n%s", policy, code, cmd.Stderr())
		}
	}
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "rude"}, noted{Text: "a"})
	runUntilHead("skip")
	servers.Append(t, registry(), "ticket/1", noted{Text: "bad"}, noted{Text: "c"})
	runUntilHead("park")
	code, out, stderr := run(build(true), nil, append([]string{"replay-parked", "strict", "--esdb", servers.ESDBURI()}, common...)...)
	if code != 1 || !strings.Contains(out, "replayed 1 of 1 parked events of strict") ||
		!strings.Contains(out, "left out, now parked: ticket/1@1") || !strings.Contains(out, "no rude notes") ||
		!strings.Contains(stderr, "1 event of the documents folded anew fails with this build") {
		t.Fatalf("replay-parked: exit %d, want 1, naming the skipped event it parked\n%s\n%s", code, out, stderr)
	}
	var d ticket
	if found, _, err := projector.ReadDocument(context.Background(), mongostore.New(db), build(true).Projections[0].Definition.(*projector.Projection[ticket]), "1", &d); err != nil || !found || d.Notes != 3 {
		t.Fatalf("ticket 1: found %v, %d notes (%v); want 3 (a, bad, c)", found, d.Notes, err)
	}
}

// status run against a database with no checkpoint (a mistyped
// --database) names the databases of the server in which a projector
// stored checkpoints.
func TestStatus_in_a_database_without_checkpoints_names_those_with_some(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "ticket/1", opened{ID: "1"}, noted{Text: "a"})
	c := config(app.Projection{Definition: desks(true), Reads: app.StreamPrefix("ticket/")})
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--http", "", "--mongo", servers.MongoURI(), "--database", db.Name())
	cmd.WaitCheckpoint(t, db, "desks", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, cmd.Stderr())
	}
	typo := db.Name() + "x"
	code, out, stderr := run(c, nil, "status", "--mongo", servers.MongoURI(), "--database", typo)
	if code != 0 || !strings.Contains(stderr, "databases with projector checkpoints on this server: ") || !strings.Contains(stderr, `"`+db.Name()+`"`) {
		t.Fatalf("status --database %s: exit %d; want 0, naming %s\n%s\n%s", typo, code, db.Name(), out, stderr)
	}
}

// A Dial that returns no client and no error is said in one line, as a
// Dial that fails: no command panics on it.
func TestDial_that_returns_no_client_is_one_line(t *testing.T) {
	servers := startServers(t, e2e.Options{})
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	c.Dial = func(string, *slog.Logger) (*subscription.Client, error) { return nil, nil }
	for _, cmd := range [][]string{
		{"status", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI()},
		{"run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--http", ""},
	} {
		code, _, stderr := run(c, nil, cmd...)
		if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "Config.Dial returned no client") {
			t.Errorf("%s with a Dial that returns nothing: exit %d, stderr %q; want one line", cmd[0], code, stderr)
		}
	}
}
