package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// Running is a command line of a projector binary ([app.Config]) running in
// the test's process, as its main would run it, minus the process: no
// environment variables are read, and [Running.Stop] stands in for SIGTERM.
type Running struct {
	cancel         context.CancelFunc
	done           chan struct{}
	code           int
	stdout, stderr lockedbuf.Buffer
}

// StartCommand runs c's command line args ("run", "--esdb", ...) in the
// background; it is stopped when tb ends if the test has not stopped it.
func StartCommand(tb testing.TB, c app.Config, args ...string) *Running {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := &Running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(cmd.done)
		cmd.code = c.Run(ctx, args, nil, &cmd.stdout, &cmd.stderr)
	}()
	tb.Cleanup(func() {
		cancel()
		<-cmd.done
	})
	return cmd
}

// Stop stops the command as SIGTERM would (events being handled finish,
// checkpoints are stored) and returns its exit status. It fails tb if the
// command has not ended a minute later.
func (c *Running) Stop(tb testing.TB) int {
	tb.Helper()
	c.cancel()
	return c.Wait(tb, time.Minute)
}

// Wait waits for the command to end by itself and returns its exit status;
// it fails tb after timeout.
func (c *Running) Wait(tb testing.TB, timeout time.Duration) int {
	tb.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(timeout):
		tb.Fatalf("e2e: the command has not ended after %v\nstderr:\n%s", timeout, c.Stderr())
		return -1
	}
}

// Done is closed when the command has ended.
func (c *Running) Done() <-chan struct{} { return c.done }

// Stdout is what the command has printed so far.
func (c *Running) Stdout() string { return c.stdout.String() }

// Stderr is what the command has logged so far.
func (c *Running) Stderr() string { return c.stderr.String() }

// WaitCheckpoint waits until the checkpoint of name in db has reached
// position (name is the projection's collection: its name, unless the
// projection sets a collection of its own), failing tb if the command ends
// first: see [WaitCheckpoint].
func (c *Running) WaitCheckpoint(tb testing.TB, db *mongo.Database, name string, position uint64) {
	tb.Helper()
	if err := WaitCheckpoint(db, name, position, c.done); err != nil {
		tb.Fatalf("e2e: %v (%s)\nstderr:\n%s", err, c.state(), c.Stderr())
	}
}

// state says whether the command is still running, or its exit status.
func (c *Running) state() string {
	select {
	case <-c.done:
		return fmt.Sprintf("exit %d", c.code)
	default:
		return "the command is still running"
	}
}

// WaitCheckpoint waits until the checkpoint of name in db has reached
// position (name is the projection's collection: its name, unless the
// projection sets a collection of its own; after a rebuild, the checkpoint
// of the collection readers were switched to, where name is the
// projection's name): every event up to it is applied.
// It gives up when done is closed (the projector ended; nil: never), when
// the projection's record has held an error for 10 seconds while the
// checkpoint stays where it is short of position (the projection stopped: at
// an event that failed for good, say), or after two minutes. For a
// projection split into segments (run --segments), it waits for every
// segment's checkpoint, and an error any of them holds counts.
//
// For a projection that is caught up, position is the head of $all
// ([Servers.Head]): the test double sends a filtered subscription a
// checkpoint when it reaches the head. A real node sends them every
// checkpoint interval of events scanned, so against one, wait for the
// position of the last event the projection reads.
func WaitCheckpoint(db *mongo.Database, name string, position uint64, done <-chan struct{}) error {
	store := mongostore.New(db)
	deadline := time.Now().Add(2 * time.Minute)
	var erred time.Time // since when the record has held its error, the checkpoint not moving
	var last *projector.Checkpoint
	for {
		// One read a round: the checkpoint and the error recorded beside it.
		st, err := progress(db, store, name)
		cp := st.Checkpoint
		if err == nil && cp != nil && cp.Position >= position {
			return nil
		}
		if cp != nil && (last == nil || cp.Position > last.Position) {
			erred, last = time.Time{}, cp // it moves: an old error is being recovered from
		}
		if err == nil && st.LastError != "" {
			if erred.IsZero() {
				erred = time.Now()
			} else if time.Since(erred) >= stoppedGrace {
				return fmt.Errorf("%s stopped short of position %d: %s", name, position, describe(st))
			}
		} else {
			erred = time.Time{}
		}
		select {
		case <-done:
			// Read again: the projector stores its checkpoint and its
			// error as it ends.
			st, err := progress(db, store, name)
			if err != nil {
				return fmt.Errorf("the projector ended before the checkpoint of %s reached %d; reading it: %w", name, position, err)
			}
			if st.Checkpoint != nil && st.Checkpoint.Position >= position {
				return nil
			}
			return fmt.Errorf("the projector ended before the checkpoint of %s reached %d: %s", name, position, describe(st))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the checkpoint of %s has not reached %d after two minutes; reading it: %w", name, position, err)
			}
			return fmt.Errorf("the checkpoint of %s has not reached %d after two minutes: %s", name, position, describe(st))
		}
	}
}

// progress is the record of the checkpoint of name, or of the collection
// a rebuild of the projection name switched readers to: its own, or for a
// projection split into segments the lowest of its segments' checkpoints
// (segment.Lowest), with the first error one of them holds.
func progress(db *mongo.Database, store *mongostore.Store, name string) (mongostore.CheckpointStatus, error) {
	ctx := context.Background()
	name, err := store.ActiveCollection(ctx, name, name)
	if err != nil {
		return mongostore.CheckpointStatus{}, err
	}
	all, err := store.Checkpoints(ctx)
	if err != nil {
		return mongostore.CheckpointStatus{}, err
	}
	own := all[name]
	n, err := segment.Count(ctx, db, name)
	if err != nil || n <= 1 {
		return own, err
	}
	st := own
	st.Checkpoint = segment.Lowest(name, n, own.Checkpoint, func(seg string) *projector.Checkpoint {
		if rec := all[seg]; rec.LastError != "" && st.LastError == "" {
			st.LastError, st.LastErrorAt = rec.LastError, rec.LastErrorAt
		}
		return all[seg].Checkpoint
	})
	return st, nil
}

// describe says where a projection's checkpoint is and the error its
// record holds, for an error of WaitCheckpoint.
func describe(st mongostore.CheckpointStatus) string {
	where := "no checkpoint stored yet"
	if st.Checkpoint != nil {
		where = fmt.Sprintf("its checkpoint is %v", st.Checkpoint)
	}
	if st.LastError != "" {
		return where + "; its last error: " + st.LastError
	}
	return where
}

// stoppedGrace is how long [WaitCheckpoint] lets a projection's recorded
// error stand while its checkpoint does not move before it takes the
// projection as stopped: a runner recovering from an earlier error moves its
// checkpoint (stored every second or so while it moves) and clears the
// error once it has caught up.
const stoppedGrace = 10 * time.Second
