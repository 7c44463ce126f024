package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/retry"
)

// newFlagSet returns a flag set named name ("projector demo") that reports
// errors to stderr instead of exiting, and prints its help, asked for with
// -h or --help, to stdout: the usage line "usage: synopsis" and the flags.
func newFlagSet(name, synopsis string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: %s\n\n", synopsis)
		out := fs.Output()
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
	return fs
}

// ParseFlags parses a command's arguments, which must all be flags, without
// looking at the environment ([Invocation.Parse] does). It returns
// [flag.ErrHelp] for -h, or an error wrapping [ErrUsage] once it has printed
// what is wrong in one line and where to look.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if _, err := parseArgs(fs, args, false); err != nil {
		return err
	}
	return nil
}

// parseArgs parses args into fs, quietly: a bad flag is one line and a
// pointer to --help, not the whole usage. With named, a NAME may come before,
// between or after the flags; it is returned ("" when none).
func parseArgs(fs *flag.FlagSet, args []string, named bool) (string, error) {
	name := ""
	if named && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	out, usage := fs.Output(), fs.Usage
	var discard strings.Builder
	fs.SetOutput(&discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	if err == nil && named && name == "" && fs.NArg() > 1 && !strings.HasPrefix(fs.Arg(0), "-") {
		// The NAME between flags: the flag package stops at it.
		name = fs.Arg(0)
		err = fs.Parse(fs.Args()[1:])
	}
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return "", err
	case err != nil:
		fmt.Fprintf(out, "%s: %v (see %[1]s --help)\n", fs.Name(), err)
		return "", ErrUsage
	}
	if took := flagTaken(fs); took != "" {
		fmt.Fprintf(out, "%s: %s (see %[1]s --help)\n", fs.Name(), took)
		return "", ErrUsage
	}
	if named && name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(out, "%s: unexpected arguments %q (see %[1]s --help)\n", fs.Name(), fs.Args())
		return "", ErrUsage
	}
	return name, nil
}

// flagTaken says which flag given took another of fs's flags as its value
// ("--group --http :0": a flag given without its value), or "--", the end
// of the flags, "" when none did.
// Without it, the flag's value is the other flag's name, and what follows
// is reported as an unexpected argument, or taken as a NAME.
func flagTaken(fs *flag.FlagSet) string {
	took := ""
	fs.Visit(func(f *flag.Flag) {
		v := f.Value.String()
		if took != "" || !strings.HasPrefix(v, "-") {
			return
		}
		other, _, _ := strings.Cut(strings.TrimLeft(v, "-"), "=")
		// -h and -help ask for the help, which the flag set does not list.
		if v == "--" || fs.Lookup(other) != nil || other == "h" || other == "help" {
			took = fmt.Sprintf("--%s %s: --%s wants a value before the next flag", f.Name, v, f.Name)
		}
	})
	return took
}

// fromEnv sets every flag not given on the command line from the
// environment variable prefix+NAME (dashes as underscores, upper case), if
// lookup has it.
func fromEnv(fs *flag.FlagSet, prefix string, lookup func(string) (string, bool)) error {
	if lookup == nil {
		return nil
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		name := envName(prefix, f.Name)
		if v, ok := lookup(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				want, _ := flag.UnquoteUsage(f)
				if want == "" {
					want = "a value"
				}
				err = fmt.Errorf("%s=%q: --%s wants %s: %v", name, v, f.Name, want, e)
			}
		}
	})
	return err
}

// usageError is a bad command line, said by format and args: an error
// wrapping ErrUsage.
func usageError(format string, args ...any) error {
	return usage(fmt.Sprintf(format, args...))
}

// usage is a bad command line, said in one line: the command prints it
// after its name, as any error, and exits with status 2.
type usage string

func (u usage) Error() string { return string(u) }

func (u usage) Unwrap() error { return ErrUsage }

// maxBatchMiB is the largest --batch-mib: the runner takes at most 1 GiB a
// batch, and a larger count of MiB would overflow as bytes.
const maxBatchMiB = 1024

// checkBatch refuses catch-up settings the runner cannot take (run's and
// rebuild's), in their flags' names.
func checkBatch(workers, size int, window time.Duration, mib int) error {
	switch {
	case workers < 1:
		return usageError("--workers %d: want at least 1", workers)
	case size < 1 || window < 0 || mib < 1:
		return usageError("--batch %d, --batch-window %v, --batch-mib %d: want a batch of at least 1 event and 1 MiB, and a window of at least 0", size, window, mib)
	case mib > maxBatchMiB:
		return usageError("--batch-mib %d: want at most %d", mib, maxBatchMiB)
	}
	return nil
}

// batchFlags registers the batching of catch-up.
func batchFlags(fs *flag.FlagSet, size *int, window *time.Duration, mib *int) {
	fs.IntVar(size, "batch", projector.DefaultBatch, "while catching up, events a worker folds and writes together, each document once (1: one event at a time; documents, not events, for a projection fed by many streams); a projection's own Batch wins")
	fs.DurationVar(window, "batch-window", projector.DefaultBatchWindow, "while catching up, how long a worker waits for its next event before it writes its batch")
	fs.IntVar(mib, "batch-mib", projector.DefaultBatchBytes>>20, "and at most this many MiB of the events' data and metadata in a batch")
}

// eventSpansFlag registers the bound of per-event spans in a batch
// ([projector.WithEventSpans]).
func eventSpansFlag(fs *flag.FlagSet, n *int) {
	fs.IntVar(n, "trace-event-spans", projector.DefaultEventSpans, "with tracing on (OTEL_*), the largest batch in which each traced event gets a span of its own; a larger batch (a catch-up) gives each document one span, linked to its events (0: always per document)")
}

// checkEventSpans refuses a negative --trace-event-spans.
func checkEventSpans(n int) error {
	if n < 0 {
		return usageError("--trace-event-spans %d: want 0 or more", n)
	}
	return nil
}

// checkLease refuses a --lease that is neither 0 (zero says what 0 means)
// nor at least 1s.
func checkLease(lease time.Duration, zero string) error {
	if lease < 0 || (lease > 0 && lease < time.Second) {
		return usageError("--lease %v: want 0 (%s) or at least 1s", lease, zero)
	}
	return nil
}

// retryFlags registers every setting of a retry policy as flags with prefix.
func retryFlags(fs *flag.FlagSet, p *retry.Policy, prefix, what string) {
	fs.DurationVar(&p.InitialDelay, prefix+"initial-delay", p.InitialDelay, what+": first wait")
	fs.Float64Var(&p.Multiplier, prefix+"multiplier", p.Multiplier, what+": growth of each wait")
	fs.Float64Var(&p.Jitter, prefix+"jitter", p.Jitter, what+": random share of each wait, in [0, 1)")
	fs.DurationVar(&p.MaxDelay, prefix+"max-delay", p.MaxDelay, what+": longest wait")
	fs.IntVar(&p.MaxRetries, prefix+"max-retries", p.MaxRetries, what+": retries after the first attempt (-1: bounded by max-elapsed only)")
	fs.DurationVar(&p.MaxElapsed, prefix+"max-elapsed", p.MaxElapsed, what+": bound on the whole wait (0: none)")
}

// newLogger returns a slog logger on w.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var logger *slog.Logger
	switch format {
	case "text":
		logger = slog.New(slog.NewTextHandler(w, opts))
	case "json":
		logger = slog.New(slog.NewJSONHandler(w, opts))
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	tracingLog.Store(logger) // the exporters' errors, in the command's format
	return logger, nil
}

// misspelledEnv returns a line for each variable of environ ("NAME=value"
// entries) that starts with prefix, stands in for no flag of fs, and is
// named like one whose own variable is not set and which was not given: a
// misspelling (PROJECTOR_MONGO_URI for PROJECTOR_MONGO) that would
// otherwise leave the flag at its default without a word. A variable like
// no flag of fs is left alone: it may be another command's, or the user's.
func misspelledEnv(fs *flag.FlagSet, prefix string, environ []string) []string {
	set := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var lines []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, prefix) || name == prefix {
			continue
		}
		asFlag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, prefix), "_", "-"))
		if fs.Lookup(asFlag) != nil && envName(prefix, asFlag) == name {
			continue
		}
		best, bestDist := "", 3
		fs.VisitAll(func(f *flag.Flag) {
			if given[f.Name] || set[envName(prefix, f.Name)] {
				return
			}
			if d := nameDistance(asFlag, f.Name); d < bestDist {
				best, bestDist = f.Name, d
			}
		})
		if best != "" {
			lines = append(lines, fmt.Sprintf("%s is set, but no flag reads it: ignored (did you mean %s, for --%s?)", name, envName(prefix, best), best))
		}
	}
	return lines
}

// envName is the variable that stands in for the flag named flagName.
func envName(prefix, flagName string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// nameDistance tells how far a variable's flag name a is from a flag's
// name b: 1 where one is the other and more words (mongo-uri, mongo), else
// their edit distance, or 3 (too far) for a name of 4 letters or fewer
// that is more than one edit away.
func nameDistance(a, b string) int {
	if strings.HasPrefix(a, b+"-") || strings.HasPrefix(b, a+"-") {
		return 1
	}
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	if d := prev[len(b)]; d <= 1 || (d == 2 && min(len(a), len(b)) > 4) {
		return d
	}
	return 3
}
