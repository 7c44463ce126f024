package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// Config is a projector binary: the projections it runs, the registry of the
// events they read, and what else its command line offers. The zero value of
// every optional field is a sensible default.
type Config struct {
	// Name is the binary's name in usage lines and messages (default
	// "projector").
	Name string
	// Registry decodes the events the projections handle. Required.
	Registry *projector.Registry
	// Dial returns a client of the event store at a connection string,
	// through an official client: kurrent.Dial (KurrentDB-Client-Go, for
	// esdb:// and kurrentdb:// alike) or esdbv4.Dial (EventStore-Client-Go
	// v4, esdb:// only). Required. The binary links the client it names and
	// no other: this package imports neither adapter.
	Dial func(uri string, logger *slog.Logger) (*subscription.Client, error)
	// Projections the binary runs. Required: at least one.
	Projections []Projection
	// Embedded starts an in-process MongoDB wire-protocol server for
	// commands run without --mongo (package embedmongo has one, FerretDB on
	// SQLite under --data-dir). Nil leaves it out of the binary, and --mongo
	// is then required.
	Embedded EmbeddedMongo
	// Commands are more subcommands, listed after the built-in ones
	// (cmd/projector-lab adds demo and bench).
	Commands []Command
	// Version is what the version command prints (default: the main
	// module's version from the build information).
	Version string
	// EnvPrefix starts the environment variables that stand in for flags
	// not given (default "PROJECTOR_": PROJECTOR_ESDB for --esdb).
	EnvPrefix string
}

// Projection is one projection of a binary: the definition (its state,
// handlers, idempotency strategy and failure policy, set with
// projector.New, Create, On, Idempotency and OnFailure), what its
// subscription reads, and the runner settings it wants. Zero settings take
// the command line's flags (--workers, --batch), which are defaults: a value
// set here wins.
type Projection struct {
	Definition projector.Definition
	// Reads says which events the projection's subscription asks the
	// server for: [StreamPrefix], [Category], [StreamRegex] or [EventTypes].
	// Required.
	Reads Filter
	// Workers handle events at once, a stream's events in order (0:
	// --workers). A strategy that needs the log in order, such as
	// GlobalPosition, takes one: 0 gives it one, whatever --workers says,
	// and more is refused.
	Workers int
	// Batch is how many queued events a worker folds and writes together
	// while catching up (0: --batch; 1 turns batching off).
	Batch int
	// Version is the version of the projection's fold (default 0): raise it
	// when a change of its code makes the documents it built wrong (a new
	// field, a fixed handler). Each collection records the version that
	// builds it; run refuses to write one that another version built, and
	// says to rebuild: rebuild fills a new collection with this version while
	// readers stay on the old one, then switches them (a run of the old
	// version that follows the switch then stops that projection).
	Version int
}

// Command is a subcommand added to the command line. Run parses its own
// flags from the invocation ([Invocation.Parse]) and returns nil for exit
// status 0, an error wrapping [ErrUsage] for 2 (after printing why), or any
// other error for 1 (printed as "NAME COMMAND: error").
type Command struct {
	Name, Summary string
	// Hidden commands are left out of the usage (a command the binary
	// starts itself).
	Hidden bool
	Run    func(ctx context.Context, inv Invocation) error
}

// Invocation is one run of a command: its arguments, where it writes, and
// where the values of flags not given come from.
type Invocation struct {
	// Name is the binary's name; Command the command's.
	Name, Command string
	// Args are the command's arguments, after its name.
	Args []string
	// Env looks up the environment variables that stand in for flags not
	// given (never nil), named EnvPrefix + the flag's name in upper case with
	// dashes as underscores.
	Env       func(string) (string, bool)
	EnvPrefix string
	Stdout    io.Writer
	Stderr    io.Writer

	environ []string // the environment's NAME=value entries, when Main runs it
}

// FlagSet returns a flag set for the command, with the usage line
// "usage: NAME COMMAND synopsis".
func (inv Invocation) FlagSet(synopsis string) *flag.FlagSet {
	return newFlagSet(inv.Name+" "+inv.Command, inv.Name+" "+inv.Command+" "+synopsis, inv.Stdout, inv.Stderr)
}

// Parse parses the arguments, which must all be flags, into fs, then sets the
// flags not given from the environment. A bad flag or value is one line on
// Stderr that points to --help, and an error wrapping [ErrUsage].
func (inv Invocation) Parse(fs *flag.FlagSet) error {
	_, err := inv.parse(fs, false)
	return err
}

// ParseNamed is [Invocation.Parse] for a command that takes one NAME before
// or after its flags; it returns it ("" when none was given).
func (inv Invocation) ParseNamed(fs *flag.FlagSet) (string, error) {
	return inv.parse(fs, true)
}

func (inv Invocation) parse(fs *flag.FlagSet, named bool) (string, error) {
	name, err := parseArgs(fs, inv.Args, named)
	if err != nil {
		return "", err
	}
	if err := fromEnv(fs, inv.EnvPrefix, inv.Env); err != nil {
		fmt.Fprintln(fs.Output(), err)
		return "", ErrUsage
	}
	for _, line := range misspelledEnv(fs, inv.EnvPrefix, inv.environ) {
		fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), line)
	}
	return name, nil
}

// exitCoder is an error that sets the command's exit status.
type exitCoder interface{ ExitCode() int }

// exitError is err with the exit status code.
type exitError struct {
	err  error
	code int
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

// ErrUsage is returned by a command for a bad command line, once it has
// printed why (the commands of the package return an error that wraps it
// and says why, printed after the command's name as any error). The exit
// status is 2.
var ErrUsage = errors.New("usage")

// Main runs the command line of c with the process's arguments, environment
// and signals, and exits with its status. It is the one function of the
// package meant for a main function: the first SIGINT or SIGTERM stops the
// command gracefully (events being handled finish, checkpoints are stored),
// a second one ends the process at once. A variable of the prefix that no
// flag reads but one is named like (PROJECTOR_MONGO_URI for PROJECTOR_MONGO)
// is named in a line on stderr, with the one meant.
func Main(c Config) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	code := c.run(ctx, os.Args[1:], os.LookupEnv, os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run runs one command line (args without the binary's name) and returns
// its exit status: 0 done, 1 failed while running, 2 a bad command line or a
// bad catalog. env looks up the variables that stand in for flags not given
// (nil: none), and the OTEL_* variables that turn tracing on (off unless
// they do; see the package documentation); Run never exits, and reads no
// environment itself but, once tracing is on, the OpenTelemetry SDK's
// settings. Cancelling ctx stops a running command gracefully. Its writes
// to stdout and stderr are made one at a time, so that these need not be
// safe for concurrent use (a bytes.Buffer read once Run returns).
func (c Config) Run(ctx context.Context, args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	return c.run(ctx, args, env, nil, stdout, stderr)
}

// run is Run, told the environment's "NAME=value" entries (environ, from
// Main) so that a variable of the prefix that no flag reads but one is
// named like (a misspelling) can be pointed out.
func (c Config) run(ctx context.Context, args []string, env func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	stdout, stderr = serialized(stdout, stderr)
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	name := c.name()
	if len(args) == 0 {
		c.usage(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		c.usage(stdout) // asked for: to stdout, for a pager
		return 0
	}
	cmds := c.commands()
	if err := checkCommands(cmds); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	var cmd *Command
	for i := range cmds {
		if cmds[i].Name == args[0] {
			cmd = &cmds[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "%s: unknown command %q\n", name, args[0])
		c.usage(stderr)
		return 2
	}
	inv := Invocation{Name: name, Command: cmd.Name, Args: args[1:], Env: env, EnvPrefix: c.envPrefix(), Stdout: stdout, Stderr: stderr, environ: environ}
	return withTracing(ctx, env, name, stderr, func() int {
		err := cmd.Run(ctx, inv)
		switch {
		case err == nil || errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, ErrUsage):
			var u usage
			if errors.As(err, &u) {
				fmt.Fprintf(stderr, "%s %s: %s\n", name, cmd.Name, u)
			}
			return 2
		case ctx.Err() != nil && errors.Is(err, errStoppedStarting):
			// Stopped as asked (a signal) before it could finish
			// starting: what it had begun ends there, and it is no
			// failure.
			return 0
		}
		for _, line := range exitLines(err) {
			fmt.Fprintf(stderr, "%s %s: %s\n", name, cmd.Name, line)
		}
		var coded exitCoder
		if errors.As(err, &coded) {
			return coded.ExitCode()
		}
		return 1
	})
}

// exitLines is err for the command's last lines, each with its name: a
// line for each of the errors it joins (a failed projection each), each
// without what follows its first line (a panic's stack, which the log has).
func exitLines(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var lines []string
		for _, e := range j.Unwrap() {
			lines = append(lines, exitLines(e)...)
		}
		return lines
	}
	return []string{firstLine(err.Error(), "the log")}
}

func (c Config) name() string {
	if c.Name == "" {
		return "projector"
	}
	return c.Name
}

func (c Config) envPrefix() string {
	if c.EnvPrefix == "" {
		return "PROJECTOR_"
	}
	return c.EnvPrefix
}

// commands are the built-in commands, then c.Commands.
func (c Config) commands() []Command {
	// checked checks the catalog, without I/O, before a built-in command
	// runs.
	checked := func(run func(x *cli, ctx context.Context, inv Invocation) error) func(context.Context, Invocation) error {
		return func(ctx context.Context, inv Invocation) error {
			cat, err := newCatalog(c)
			if err != nil {
				fmt.Fprintf(inv.Stderr, "%s: %s\n", c.name(), strings.TrimPrefix(err.Error(), "projector: "))
				return ErrUsage
			}
			return run(&cli{Config: c, cat: cat}, ctx, inv)
		}
	}
	builtin := []Command{
		{Name: "run", Summary: "project EventStoreDB events into MongoDB read models, until stopped", Run: checked((*cli).runRun)},
		{Name: "status", Summary: "per projection: stored checkpoint, head, events behind, parked events, last error", Run: checked((*cli).runStatus)},
		{Name: "replay-parked", Summary: "apply a projection's parked events again, after a fix", Run: checked((*cli).runReplayParked)},
		{Name: "rebuild", Summary: "replay a projection into a new collection, then switch readers to it", Run: checked((*cli).runRebuild)},
		{Name: "version", Summary: "print the version", Run: c.runVersion},
	}
	return append(builtin, c.Commands...)
}

// checkCommands refuses two commands with one name (an added command that
// would shadow a built-in one, or another added one) and commands without a
// name or a Run.
func checkCommands(cmds []Command) error {
	seen := map[string]bool{}
	for _, cmd := range cmds {
		switch {
		case cmd.Name == "" || strings.HasPrefix(cmd.Name, "-") || strings.ContainsAny(cmd.Name, " \t"):
			return fmt.Errorf("a command of Config.Commands has no usable name (%q)", cmd.Name)
		case cmd.Run == nil:
			return fmt.Errorf("command %q has no Run", cmd.Name)
		case seen[cmd.Name]:
			return fmt.Errorf("two commands named %q (an added command cannot replace a built-in one)", cmd.Name)
		}
		seen[cmd.Name] = true
	}
	return nil
}

// cli is what a built-in command works with: the binary's configuration and
// its checked catalog.
type cli struct {
	Config
	cat *catalog
}

func (c Config) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", c.name())
	for _, cmd := range c.commands() {
		if !cmd.Hidden {
			fmt.Fprintf(w, "  %-13s %s\n", cmd.Name, cmd.Summary)
		}
	}
	fmt.Fprintf(w, "\nRun \"%s <command> --help\" for the flags of a command; every flag can also be set as %s<FLAG>.\n", c.name(), c.envPrefix())
}

// serialized returns stdout and stderr writing under one lock: a command
// writes from more than one goroutine (a rebuild's progress beside the
// engine's log lines), and the writers a caller of Run hands in (a
// bytes.Buffer, the same one for both, or two that write to one) need not
// be safe for that.
func serialized(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	mu := new(sync.Mutex)
	return lockedbuf.Writer{Mu: mu, W: stdout}, lockedbuf.Writer{Mu: mu, W: stderr}
}
