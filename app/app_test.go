package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
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
	return app.Config{Name: "tickets", Registry: registry(), Projections: ps}
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
		{"an invalid regex", config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamRegex("^ticket/(")}), nil, "invalid stream regex", ""},
		{"event types under the revision gate", config(app.Projection{Definition: tickets("tickets"), Reads: app.EventTypes("ticket.noted")}), nil,
			"leaves holes in its streams' revisions", ""},
		{"negative workers", config(app.Projection{Definition: tickets("tickets"), Reads: good.Reads, Workers: -1}), nil, "Workers and Batch must be >= 0", ""},
		{"global position with two workers", config(app.Projection{Definition: tickets("tickets").Idempotency(projector.GlobalPosition()), Reads: good.Reads, Workers: 2}), nil,
			"needs one worker", ""},
		{"an unknown name in --projections", config(good), []string{"--projections", "tickets,nope"}, `unknown projection "nope"; known: tickets`, ""},
		{"status of a bad catalog", config(app.Projection{Definition: noHandlers, Reads: good.Reads}), nil, "has no handlers", "status"},
		{"rebuild of an unknown projection", config(good), []string{"nope"}, `unknown projection "nope"`, "rebuild"},
		{"replay-parked of an unknown projection", config(good), []string{"nope"}, `unknown projection "nope"`, "replay-parked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr, accepted := deadEnd(t)
			command := c.command
			if command == "" {
				command = "run"
			}
			args := append([]string{command}, c.args...)
			if command != "replay-parked" {
				args = append(args, "--esdb", "esdb://"+addr+"?tls=false")
			}
			args = append(args, "--mongo", "mongodb://"+addr)
			if command == "run" {
				args = append(args, "--http", "")
			}
			code, _, stderr := run(c.config, nil, args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if code != 2 || len(lines) != 1 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line with %q", code, stderr, c.want)
			}
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

func TestConfig_usage_lists_the_added_commands_and_not_the_hidden_ones(t *testing.T) {
	c := config(app.Projection{Definition: tickets("tickets"), Reads: app.StreamPrefix("ticket/")})
	c.Commands = []app.Command{
		{Name: "hello", Summary: "say hello", Run: func(_ context.Context, args []string, stdout, stderr io.Writer) error {
			fs := app.NewFlagSet("tickets hello", "tickets hello [--to NAME]", stderr)
			to := fs.String("to", "world", "whom to greet")
			if err := app.ParseFlags(fs, args); err != nil {
				return err
			}
			if *to == "" {
				fmt.Fprintln(stderr, "--to must not be empty")
				return app.ErrUsage
			}
			fmt.Fprintf(stdout, "hello, %s\n", *to)
			return nil
		}},
		{Name: "secret", Hidden: true, Run: func(context.Context, []string, io.Writer, io.Writer) error { return errors.New("it broke") }},
	}
	code, _, stderr := run(c, nil)
	if code != 2 || !strings.Contains(stderr, "usage: tickets <command>") || !strings.Contains(stderr, "say hello") || strings.Contains(stderr, "secret") {
		t.Fatalf("exit %d, %q", code, stderr)
	}
	if code, out, _ := run(c, nil, "hello", "--to", "desk"); code != 0 || out != "hello, desk\n" {
		t.Fatalf("hello: exit %d, %q", code, out)
	}
	if code, _, stderr := run(c, nil, "hello", "--to", ""); code != 2 || !strings.Contains(stderr, "--to must not be empty") {
		t.Fatalf("hello --to '': exit %d, %q", code, stderr)
	}
	if code, _, stderr := run(c, nil, "secret"); code != 1 || stderr != "tickets secret: it broke\n" {
		t.Fatalf("secret: exit %d, %q", code, stderr)
	}
}

// The projection's own settings win over the flags: a projection under the
// global-position strategy runs with its one worker although --workers
// says 4 (the runner refuses that strategy with more than one).
func TestRun_a_projections_own_workers_win_over_the_flag(t *testing.T) {
	servers := projectortest.StartServers(t, projectortest.ServersOptions{})
	db := servers.Database(t)
	for i := range 3 {
		servers.Append(t, registry(), fmt.Sprintf("ticket/%d", i), opened{ID: "x"}, noted{Text: "a"}, noted{Text: "b"})
	}
	counted := tickets("tickets").Idempotency(projector.GlobalPosition())
	args := []string{"run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "", "--workers", "4"}

	refused := config(app.Projection{Definition: counted, Reads: app.StreamPrefix("ticket/")})
	if code, _, stderr := run(refused, nil, args...); code != 2 || !strings.Contains(stderr, "one worker") {
		t.Fatalf("4 workers under the global position: exit %d, %q", code, stderr)
	}
	cmd := projectortest.StartCommand(t, config(app.Projection{Definition: counted, Reads: app.StreamPrefix("ticket/"), Workers: 1}), args...)
	cmd.WaitCheckpoint(t, db, "tickets", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, cmd.Stderr())
	}
	if !strings.Contains(cmd.Stderr(), "workers=1") {
		t.Fatalf("the runner did not start with one worker:\n%s", cmd.Stderr())
	}
}

// EventTypes asks the server for the types named, exactly: a type that only
// starts like one of them is not delivered.
func TestEventTypes_the_server_sends_exactly_the_types_named(t *testing.T) {
	type notedLater struct{ Text string }
	reg := registry()
	projector.Register[notedLater](reg, "ticket.noted-later")
	counter := projector.New[ticket]("notes", func(projector.Event) (string, bool) { return "all", true }).Idempotency(projector.HandledIDs(100))
	projector.On(counter, func(t ticket, _ noted) (ticket, error) { t.Notes++; return t, nil })
	projector.On(counter, func(t ticket, _ notedLater) (ticket, error) { t.Notes += 1000; return t, nil })
	c := app.Config{Name: "tickets", Registry: reg, Projections: []app.Projection{{Definition: counter, Reads: app.EventTypes("ticket.noted")}}}

	servers := projectortest.StartServers(t, projectortest.ServersOptions{})
	db := servers.Database(t)
	var wanted []projector.Event
	for i := range 4 {
		evs := servers.Append(t, reg, fmt.Sprintf("ticket/%d", i), opened{ID: "x"}, noted{Text: "a"}, notedLater{Text: "b"}, noted{Text: "c"})
		wanted = append(wanted, evs[1], evs[3])
	}
	cmd := projectortest.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
	cmd.WaitCheckpoint(t, db, "notes", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, cmd.Stderr())
	}
	if err := projectortest.CheckState(context.Background(), mongostore.New(db), counter, "all", wanted); err != nil {
		t.Fatal(err)
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
