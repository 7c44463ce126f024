package neutral

import (
	"github.com/revgate/projector/retry"

	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultHangLimit bounds one call into an official client unless
// [ConnConfig.HangLimit] says otherwise.
const DefaultHangLimit = 30 * time.Second

// ConnConfig says how a [Conn] builds, recognises and closes the clients of
// one kind (C: a driver's [Session]).
type ConnConfig[C comparable] struct {
	// Package and Server name the source package and the server in errors
	// ("subscription", "EventStoreDB").
	Package, Server string
	// URI is the connection string, without its password, for messages.
	URI string
	// New builds a client; it does not connect.
	New func() (C, error)
	// Close closes a client.
	Close func(C) error
	// ClosedForGood reports whether an error a call returned says that the
	// client has closed itself (its discovery gave up).
	ClosedForGood func(error) bool
	// Denied reports whether an error says that the server refused the
	// call's user by its ACLs (access denied). A failed authentication is
	// not one: a node answers so while it starts or elects a leader too.
	Denied func(error) bool
	// HangLimit bounds one call (0: [DefaultHangLimit]).
	HangLimit time.Duration
}

// Conn is a connection through an official client that outlives an outage.
// Both clients (their connection state machine is the same code) close
// themselves for good once discovery fails its attempts, about a second of
// an unreachable server with the defaults: every later call returns a
// connection-closed error. Conn then builds a new client on the next call,
// so a projector that loses its server picks up again when it is back.
//
// The same state machine, once stopped, leaves a call that was already
// queued for it blocked for ever: [Call] abandons a call after the hang
// limit, replaces the client, and returns an error the caller can retry.
type Conn[C comparable] struct {
	cfg ConnConfig[C]

	mu      sync.Mutex
	client  C               // zero: none yet, or the last one was dropped
	calls   *sync.WaitGroup // calls into client not yet returned
	closed  bool
	rebuilt int

	closeWait time.Duration // how long Close waits for calls (closeWait)
}

// closeWait bounds how long [Conn.Close] waits for calls into the client
// still running (one abandoned at its context's end finishes soon after).
const closeWait = 5 * time.Second

// NewConn returns a connection that builds its clients with cfg.
func NewConn[C comparable](cfg ConnConfig[C]) *Conn[C] {
	if cfg.HangLimit <= 0 {
		cfg.HangLimit = DefaultHangLimit
	}
	return &Conn[C]{cfg: cfg, closeWait: closeWait}
}

// Rebuilt returns how many times the client was replaced after it closed
// itself or stopped answering.
func (c *Conn[C]) Rebuilt() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rebuilt
}

// acquire returns the current client, building one if there is none or the
// last one closed itself, and counts a call into it: release must follow.
func (c *Conn[C]) acquire() (cl C, release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero C
	if c.closed {
		return zero, nil, fmt.Errorf("%s: client closed", c.cfg.Package)
	}
	if c.client == zero {
		cl, err := c.cfg.New()
		if err != nil {
			return zero, nil, fmt.Errorf("%s: %s client for %s: %w", c.cfg.Package, c.cfg.Server, c.cfg.URI, err)
		}
		c.client, c.calls = cl, new(sync.WaitGroup)
	}
	calls := c.calls
	calls.Add(1)
	return c.client, calls.Done, nil
}

// check looks at an error of a call made with cl: when it says the client
// has closed itself, the next call builds a new one.
func (c *Conn[C]) check(cl C, err error) error {
	if err != nil && c.cfg.ClosedForGood(err) {
		// Not closed: a call may still be queued on its channel, and closing
		// it would make that call panic. It has closed its connection.
		c.drop(cl)
	}
	if err != nil && c.cfg.Denied != nil && c.cfg.Denied(err) {
		// Credentials do not change while the projector runs: trying again
		// would only wait out the retry policy.
		return retry.Permanent(fmt.Errorf("%w: %w", ErrAccessDenied, err))
	}
	return err
}

// ErrAccessDenied: the server refused the connection string's user. A
// secure node lets only $admins read $all (and $admins or $ops manage
// persistent subscription groups): give such a user's credentials in the
// connection string (scheme://user:password@host:port, over TLS).
var ErrAccessDenied = errors.New("access denied: the server refused the connection string's user " +
	"(none given, or not allowed: reading $all takes a member of $admins, managing persistent subscription groups one of $admins or $ops; " +
	"give one as scheme://user:password@host:port, over TLS)")

// drop forgets cl so that the next call builds a new client.
func (c *Conn[C]) drop(cl C) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == cl {
		var zero C
		c.client = zero
		c.rebuilt++
	}
}

// Close closes the current client; later calls fail. It first waits, for
// a few seconds at most, for calls into the client that have not returned,
// abandoned ones too: both clients check that they are open and then send
// on a channel that their close closes, so closing under a call in flight
// would make it panic. A client whose calls do not return in that time is
// left open (its state machine has stopped, or the process is ending).
func (c *Conn[C]) Close() error {
	c.mu.Lock()
	c.closed = true
	cl, calls := c.client, c.calls
	var zero C
	c.client, c.calls = zero, nil
	c.mu.Unlock()
	if cl == zero {
		return nil
	}
	returned := make(chan struct{})
	go func() { calls.Wait(); close(returned) }()
	timer := time.NewTimer(c.closeWait)
	defer timer.Stop()
	select {
	case <-returned:
		return c.cfg.Close(cl)
	case <-timer.C:
		// Closed once its calls return, if they ever do.
		go func() {
			<-returned
			_ = c.cfg.Close(cl)
		}()
		return fmt.Errorf("%s: %s client at %s left open until its calls return: one did not return within %v", c.cfg.Package, c.cfg.Server, c.cfg.URI, c.closeWait)
	}
}

// Do runs fn with the current client, bounded by ctx and by the hang limit.
func (c *Conn[C]) Do(ctx context.Context, fn func(C) error) error {
	_, err := Call(ctx, c, func(cl C) (struct{}, error) { return struct{}{}, fn(cl) })
	return err
}

// ErrHung: a call into the official client did not return within the hang
// limit; the client was replaced, and the call may be tried again.
var ErrHung = errors.New("the client did not answer; replaced it")

// Call runs fn with the current client of c, bounded by ctx and the hang
// limit. A call abandoned on either is left to finish in the background; a
// value it then returns that has a Close method (a subscription) is closed.
func Call[C comparable, T any](ctx context.Context, c *Conn[C], fn func(C) (T, error)) (T, error) {
	var zero T
	cl, release, err := c.acquire()
	if err != nil {
		return zero, err
	}
	done := make(chan result[T], 1)
	go func() {
		defer release()
		v, err := fn(cl)
		done <- result[T]{v, err}
	}()
	timer := time.NewTimer(c.cfg.HangLimit)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, c.check(cl, r.err)
	case <-ctx.Done():
		go closeLate(done)
		return zero, ctx.Err()
	case <-timer.C:
		go closeLate(done)
		// Left open on purpose: closing it would make the stuck call panic
		// (a send on its closed channel). Its state machine has stopped.
		c.drop(cl)
		return zero, fmt.Errorf("%s: %s client at %s did not answer within %v: %w", c.cfg.Package, c.cfg.Server, c.cfg.URI, c.cfg.HangLimit, ErrHung)
	}
}

type result[T any] struct {
	v   T
	err error
}

// closeLate closes what an abandoned call returns, if it ever returns.
func closeLate[T any](done <-chan result[T]) {
	r := <-done
	if c, ok := any(r.v).(interface{ Close() error }); ok && r.err == nil {
		c.Close()
	}
}
