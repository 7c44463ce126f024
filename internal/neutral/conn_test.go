package neutral

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// client stands for an official client: closing it under a call in flight
// is what Close must not do.
type client struct {
	calls  atomic.Int32
	closed atomic.Bool
}

func testConn(cl *client) *Conn[*client] {
	return NewConn(ConnConfig[*client]{
		Package: "test", Server: "server", URI: "uri",
		New: func() (*client, error) { return cl, nil },
		Close: func(c *client) error {
			if c.calls.Load() != 0 {
				return errors.New("closed under a call in flight")
			}
			c.closed.Store(true)
			return nil
		},
		ClosedForGood: func(error) bool { return false },
	})
}

func TestConn_Close_waits_for_a_call_abandoned_at_its_context_s_end(t *testing.T) {
	cl := &client{}
	c := testConn(cl)
	unblock, entered := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan error, 1)
	go func() {
		called <- c.Do(ctx, func(cl *client) error {
			cl.calls.Add(1)
			defer cl.calls.Add(-1)
			close(entered)
			<-unblock
			return nil
		})
	}()
	<-entered
	cancel()
	if err := <-called; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while the abandoned call was still running", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(unblock)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close = %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not return after the call did")
	}
	if !cl.closed.Load() {
		t.Fatal("the client was not closed")
	}
	if err := c.Do(context.Background(), func(*client) error { return nil }); err == nil || !strings.Contains(err.Error(), "client closed") {
		t.Fatalf("Do after Close = %v, want client closed", err)
	}
}

func TestConn_Close_leaves_open_a_client_whose_call_never_returns(t *testing.T) {
	cl := &client{}
	c := testConn(cl)
	c.cfg.HangLimit = 50 * time.Millisecond
	stuck := make(chan struct{})
	// The first call hangs in the client's first generation, which the
	// Conn drops; it does not count in the fake's calls, which stand for
	// the second generation's (the fake builds the same client again).
	err := c.Do(context.Background(), func(*client) error {
		<-stuck
		return nil
	})
	if !errors.Is(err, ErrHung) {
		t.Fatalf("Do = %v, want ErrHung", err)
	}
	// The hung client was dropped: a second call builds another (the same
	// one here) and hangs in turn; Close must not close it under the call.
	c.cfg.HangLimit, c.closeWait = time.Hour, 100*time.Millisecond
	second := make(chan error, 1)
	go func() {
		second <- c.Do(context.Background(), func(cl *client) error { cl.calls.Add(1); defer cl.calls.Add(-1); <-stuck; return nil })
	}()
	for cl.calls.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	err = c.Close()
	if err == nil || !strings.Contains(err.Error(), "left open") {
		t.Fatalf("Close = %v, want an error saying the client was left open", err)
	}
	if cl.closed.Load() {
		t.Fatal("the client was closed under a call in flight")
	}
	close(stuck)
	if err := <-second; err != nil {
		t.Fatalf("the second call, once it returned: %v", err)
	}
	// Its calls returned: the client left open is closed then.
	deadline := time.Now().Add(10 * time.Second)
	for !cl.closed.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the client was not closed once its calls returned")
		}
		time.Sleep(time.Millisecond)
	}
}
