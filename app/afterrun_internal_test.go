package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/revgate/projector/internal/pace"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/retry"
)

// A projection whose event may succeed later when the process is told to
// stop ends the run without an error, whether the signal came while it
// waited to run again or while the failing run ended (the exit status was 0
// or 1 by that timing); one that failed for good still ends it with its
// error.
func TestAfterRun_a_stop_during_a_retry_is_no_failure(t *testing.T) {
	s := &session{logger: slog.New(slog.DiscardHandler), c: &runConfig{}}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	mayPass := fmt.Errorf("projector: runner stops: %w", &projector.Error{Projection: "p", Err: errors.New("connection closed unexpectedly")})
	forGood := fmt.Errorf("projector: runner stops: %w", &projector.Error{Projection: "p", Err: retry.Permanent(errors.New("the door is closed already"))})
	for _, c := range []struct {
		name    string
		ctx     context.Context
		err     error
		again   bool
		wantErr bool
	}{
		{"may pass, stopping", stopped, mayPass, false, false},
		// The stop cut a call of the projection's start short (its
		// indexes, its version): no failure of its own.
		{"starting, stopping", stopped, fmt.Errorf("mongostore: record version 0 of %q: incomplete read of full message: %w", "p", context.Canceled), false, false},
		{"for good, stopping", stopped, forGood, false, true},
		{"may pass, running", context.Background(), mayPass, true, false},
		{"for good, running", context.Background(), forGood, false, true},
	} {
		sl := &slot{name: "p", projection: Projection{Definition: projector.New[struct{}]("p", projector.StreamSuffix("p-"))}}
		sl.blocks.Store(true)
		again, err := s.afterRun(c.ctx, sl, c.err, pace.New(restarts))
		if again != c.again || (err != nil) != c.wantErr {
			t.Errorf("%s: again %v, err %v; want again %v, an error %v", c.name, again, err, c.again, c.wantErr)
		}
		// A failure for good says how to go on past it, also when the
		// stop came as it ended.
		if hinted := err != nil && strings.Contains(err.Error(), "--on-failure block"); hinted != c.wantErr {
			t.Errorf("%s: err %v; want how to go on past it: %v", c.name, err, c.wantErr)
		}
	}
}

// A stop whose last checkpoint could not be stored (MongoDB did not
// answer) is no clean stop: the run says so, in one line naming the
// projection, and returns the error (exit status 1); a call the stop itself
// cut short is no failure.
func TestAfterRun_a_stop_that_could_not_store_its_checkpoint_says_so(t *testing.T) {
	var log bytes.Buffer
	s := &session{logger: slog.New(slog.NewTextHandler(&log, nil)), c: &runConfig{}}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	sl := &slot{name: "p", projection: Projection{Definition: projector.New[struct{}]("p", projector.StreamSuffix("p-"))}}
	notStored := fmt.Errorf("projector: runner %q: storing the checkpoint: %w", "p", context.DeadlineExceeded)
	again, err := s.afterRun(stopped, sl, notStored, pace.New(restarts))
	if again || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("again %v, err %v; want the store's error, and not to run again", again, err)
	}
	if want := `level=ERROR msg="projection stopped, but not cleanly: the next run resumes from its last stored checkpoint (and applies nothing twice)" projection=p err="projector: runner \"p\": storing the checkpoint: context deadline exceeded"`; !strings.Contains(log.String(), want) {
		t.Errorf("log:\n%s\nwant a line\n%s", log.String(), want)
	}
	cut := fmt.Errorf("projector: runner %q: storing the checkpoint: %w", "p", context.Canceled)
	if again, err := s.afterRun(stopped, sl, cut, pace.New(restarts)); again || err != nil {
		t.Errorf("a store the stop cut short: again %v, err %v; want neither", again, err)
	}
}
