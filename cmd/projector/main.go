// Command projector keeps MongoDB read models exactly right from an event
// stream.
//
//	projector run       project EventStoreDB events into MongoDB read models
//	projector status    where each projection stands
//	projector rebuild   replay a projection into a new collection, then switch to it
//	projector replay-parked  apply a projection's parked events again, after a fix
//	projector demo      the engine on embedded parts, with faults, checked
//	projector version   the version of this binary
//
// Run "projector <command> --help" for the flags of a command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"run", "project EventStoreDB events into MongoDB read models, until stopped", runRun},
	{"status", "per projection: stored checkpoint, head, events behind, parked events, last error", runStatus},
	{"replay-parked", "apply a projection's parked events again, after a fix", runReplayParked},
	{"rebuild", "replay a projection into a new collection, then switch readers to it", runRebuild},
	{"bench", "measure catch-up: the projector, the per-event approach, the bulk-write floor", runBench},
	{"demo", "run the engine on embedded parts with injected faults and check every document", runDemo},
	{"version", "print the version", runVersion},
}

// hidden commands are for the binary's own use (bench starts one).
var hidden = []command{{"bench-catch-up", "", runBenchCatchUp}}

// errUsage is returned for bad flags; the flag package has printed why.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range append(commands, hidden...) {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil || errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(stderr, "projector %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "projector: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: projector <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: projector %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return errUsage
	}
	return nil
}
