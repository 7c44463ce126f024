//go:build unix

package projector_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// The environment of the process TestReplay_a_process_killed_... starts:
// the server, the database, and which strategy the projection has.
const (
	envReplayChild    = "PROJECTOR_TEST_REPLAY_CHILD"
	envReplayURI      = "PROJECTOR_TEST_REPLAY_URI"
	envReplayDatabase = "PROJECTOR_TEST_REPLAY_DATABASE"
)

var replayStrategies = []projector.Strategy{projector.StreamRevision(), projector.RevisionMap()}

func init() {
	child = func() (int, bool) {
		if os.Getenv(envReplayChild) == "" {
			return 0, false
		}
		return replayChild(), true
	}
}

// replayChild is the process the test kills: it replays the one parked
// event of the trail projection (fixed), and once the replay has returned
// Applied, before the record is marked replayed, it kills itself with
// SIGKILL, as an operator's kill -9 or an OOM kill would. Its exit status
// otherwise says what went wrong.
func replayChild() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "replay child: "+format+"\n", args...)
		return 3
	}
	k, err := strconv.Atoi(os.Getenv(envReplayChild))
	if err != nil || k < 1 || k > len(replayStrategies) {
		return fail("bad %s %q", envReplayChild, os.Getenv(envReplayChild))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := mongostore.Connect(ctx, os.Getenv(envReplayURI), 30*time.Second)
	if err != nil {
		return fail("%v", err)
	}
	s := mongostore.New(client.Database(os.Getenv(envReplayDatabase)))
	var broken atomic.Bool // fixed
	p := trailProjection(&broken, func(p *projector.Projection[trail]) { p.OnFailure(projector.Park).Idempotency(replayStrategies[k-1]) })
	e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()), projector.WithParker(s))
	if err != nil {
		return fail("%v", err)
	}
	parked, err := s.Parked(ctx, "trail")
	if err != nil || len(parked) != 1 {
		return fail("parked %+v (%v)", parked, err)
	}
	if r := e.Replay(ctx, parked[0]); r.Outcome != projector.Applied {
		return fail("replay: %v %v", r.Outcome, r.Err)
	}
	// Killed between the replay and s.Replayed.
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Minute)
	return fail("not killed")
}

// A process killed (SIGKILL) between its replay of a parked event and
// marking the record replayed: the replay run again finds the event
// applied and applies nothing twice, and the document is the one a single
// replay gives. The same as the test above, with a real process killed
// instead of a replay left unmarked.
func TestReplay_a_process_killed_between_replay_and_marking_then_run_again_applies_the_event_once(t *testing.T) {
	for k, strategy := range replayStrategies {
		t.Run(strategy.String(), func(t *testing.T) {
			ctx := context.Background()
			s, p, _, id := parkPoison(t, strategy)
			before := readTrail(t, s, p, id)

			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envReplayChild+"="+strconv.Itoa(k+1), envReplayURI+"="+mongotest.URI(t),
				envReplayDatabase+"="+s.Database().Name())
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the replaying process ended with %v, want it killed:\n%s", err, out)
			}
			if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the replaying process ended with %v, want it killed by SIGKILL:\n%s", err, out)
			}

			once := readTrail(t, s, p, id)
			if once.Items["poison"] != 1 || reflect.DeepEqual(once, before) {
				t.Fatalf("after the killed replay: %+v (before %+v), want the poison event applied", once, before)
			}
			again, err := s.Parked(ctx, "trail")
			if err != nil || len(again) != 1 {
				t.Fatalf("parked after the kill: %+v (%v), want the record not marked", again, err)
			}
			e, err := projector.NewEngine(s, cart.Registry(), []projector.Definition{p}, projector.WithRetry(patient()), projector.WithParker(s))
			if err != nil {
				t.Fatal(err)
			}
			if r := e.Replay(ctx, again[0]); r.Outcome != projector.Duplicate {
				t.Fatalf("second replay: %v %v, want it found applied", r.Outcome, r.Err)
			}
			if got := readTrail(t, s, p, id); !reflect.DeepEqual(got, once) {
				t.Fatalf("after a second replay:\n got %+v\nwant %+v", got, once)
			}
			if err := s.Replayed(ctx, again[0], nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}
