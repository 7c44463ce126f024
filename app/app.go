package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/revgate/projector/projector"
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
	// Projections the binary runs. Required: at least one.
	Projections []Projection
	// Embedded starts an in-process MongoDB wire-protocol server for
	// commands run without --mongo (package embedmongo has one, FerretDB on
	// SQLite under --data-dir). Nil leaves it out of the binary, and --mongo
	// is then required.
	Embedded EmbeddedMongo
	// Commands are more subcommands, listed after the built-in ones
	// (cmd/projector adds demo and bench).
	Commands []Command
	// Version is what the version command prints (default: the main
	// module's version from the build information).
	Version string
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
	// Workers handle events at once, a stream's events in order (0: --workers).
	Workers int
	// Batch is how many queued events a worker folds and writes together
	// while catching up (0: --batch; 1 turns batching off).
	Batch int
}

// Command is a subcommand added to the command line. Run parses its own
// flags (see [NewFlagSet] and [ParseFlags]) and returns nil for exit status
// 0, an error wrapping [ErrUsage] for 2 (after printing why), or any other
// error for 1 (printed as "NAME COMMAND: error").
type Command struct {
	Name, Summary string
	// Hidden commands are left out of the usage (a command the binary
	// starts itself).
	Hidden bool
	Run    func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// ErrUsage is returned by a command for a bad command line; the command has
// printed why. The exit status is 2.
var ErrUsage = errors.New("usage")

// Main runs the command line of c with the process's arguments, environment
// and signals, and exits with its status. It is the one function of the
// package meant for a main function: the first SIGINT or SIGTERM stops the
// command gracefully (events being handled finish, checkpoints are stored),
// a second one ends the process at once.
func Main(c Config) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	code := c.Run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run runs one command line (args without the binary's name) and returns
// its exit status: 0 done, 1 failed while running, 2 a bad command line or a
// bad catalog. env looks up the PROJECTOR_<FLAG> variables that stand in for
// flags not given (nil: none); Run reads no environment itself and never
// exits. Cancelling ctx stops a running command gracefully.
func (c Config) Run(ctx context.Context, args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	name := c.name()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		c.usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := c.command(args[0], env)
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n", name, args[0])
		c.usage(stderr)
		return 2
	}
	err := cmd.Run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	}
	fmt.Fprintf(stderr, "%s %s: %v\n", name, cmd.Name, err)
	return 1
}

func (c Config) name() string {
	if c.Name == "" {
		return "projector"
	}
	return c.Name
}

// command returns the command called name: a built-in one, which checks the
// catalog first, or one of c.Commands.
func (c Config) command(name string, env func(string) (string, bool)) (Command, bool) {
	for _, cmd := range c.builtins(env) {
		if cmd.Name == name {
			return cmd, true
		}
	}
	for _, cmd := range c.Commands {
		if cmd.Name == name {
			return cmd, true
		}
	}
	return Command{}, false
}

// cli is what a built-in command works with: the binary's configuration,
// its checked catalog, and where PROJECTOR_<FLAG> values come from.
type cli struct {
	Config
	cat    *catalog
	lookup func(string) (string, bool)
}

// builtins are the commands every binary has.
func (c Config) builtins(env func(string) (string, bool)) []Command {
	x := &cli{Config: c, lookup: env}
	// checked checks the catalog, without I/O, before the command runs.
	checked := func(run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) func(context.Context, []string, io.Writer, io.Writer) error {
		return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			cat, err := newCatalog(c)
			if err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", c.name(), err)
				return ErrUsage
			}
			x.cat = cat
			return run(ctx, args, stdout, stderr)
		}
	}
	return []Command{
		{Name: "run", Summary: "project EventStoreDB events into MongoDB read models, until stopped", Run: checked(x.runRun)},
		{Name: "status", Summary: "per projection: stored checkpoint, head, events behind, parked events, last error", Run: checked(x.runStatus)},
		{Name: "replay-parked", Summary: "apply a projection's parked events again, after a fix", Run: checked(x.runReplayParked)},
		{Name: "rebuild", Summary: "replay a projection into a new collection, then switch readers to it", Run: checked(x.runRebuild)},
		{Name: "version", Summary: "print the version", Run: x.runVersion},
	}
}

func (c Config) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", c.name())
	for _, cmd := range append(c.builtins(nil), c.Commands...) {
		if !cmd.Hidden {
			fmt.Fprintf(w, "  %-13s %s\n", cmd.Name, cmd.Summary)
		}
	}
	fmt.Fprintf(w, "\nRun \"%s <command> --help\" for the flags of a command.\n", c.name())
}
