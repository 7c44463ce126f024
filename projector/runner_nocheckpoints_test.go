package projector_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/retry"
)

// A catch-up source resumes from the position its runner gives it: a runner
// without a checkpoint store reads the log from its beginning at each
// start, which NewRunner says. A source that keeps its own position (a
// persistent subscription group) needs none, and is not warned of.
func TestNewRunner_warns_of_a_catch_up_source_without_a_checkpoint_store(t *testing.T) {
	const warning = "the runner has no checkpoint store"
	for _, c := range []struct {
		name string
		src  projector.Source
		cps  projector.CheckpointStore
		warn bool
	}{
		{"ordered, no store", &scripted{}, nil, true},
		{"ordered, a store", &scripted{}, newStore(t), false},
		{"a group's, no store", &live{}, nil, false},
	} {
		var logged bytes.Buffer
		e, err := projector.NewEngine(newStore(t), cart.Registry(), []projector.Definition{cart.NewDetailsProjection()},
			projector.WithRetry(retry.Default()), projector.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := projector.NewRunner("r", e, c.src, c.cps, projector.WithWorkers(1)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := strings.Contains(logged.String(), warning); got != c.warn {
			t.Errorf("%s: warned %v, want %v; log:\n%s", c.name, got, c.warn, logged.String())
		}
	}
}
