package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// runRole is the role of run's processes in their holder ids (holderID):
// "run host/pid/random".
const runRole = "run"

// holderID names this process in the leases it takes: its role (runRole,
// "rebuild", "replay-parked"), host, pid and a random part, so that a
// restarted process is a new holder.
func holderID(role string) string {
	host, _ := os.Hostname()
	b := make([]byte, 3)
	rand.Read(b)
	return fmt.Sprintf("%s %s/%d/%s", role, host, os.Getpid(), hex.EncodeToString(b))
}

// takeOverGone lets go of lease l, held by another process, for this one,
// when this process runs the embedded server on the data dir that process
// ran it on (ownsData: the dir's lock proves that server gone) and the
// holder no longer runs (killed, crashed): its lease is not waited out. It
// reports whether it did.
func takeOverGone(ctx context.Context, store *mongostore.Store, ownsData bool, l mongostore.Lease) bool {
	return ownsData && goneHolder(l.Holder) && store.ReleaseLease(ctx, l) == nil
}

// goneHolder reports whether a lease's holder (as holderID names it) is a
// process of this host, not this one, that no longer runs. A process of
// another host, or one that cannot be told, is not gone.
func goneHolder(holder string) bool {
	_, id, ok := strings.Cut(holder, " ")
	if !ok {
		return false
	}
	parts := strings.Split(id, "/")
	host, _ := os.Hostname()
	if len(parts) != 3 || parts[0] != host {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	p, err := os.FindProcess(pid)
	return err == nil && errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone) || zombie(pid)
}

// zombie reports whether process pid has exited and waits for its parent
// to reap it (Linux's /proc; false where there is none).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(b, ')') // after the command's name, which may hold anything
	return err == nil && i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// heldLease is a lease this process holds, renewed in the background every
// third of its time until released; lost is closed once it is not held any
// more (another process took it, or it could not be renewed before it
// expired).
type heldLease struct {
	store  *mongostore.Store
	ttl    time.Duration
	logger *slog.Logger

	mu       sync.Mutex
	lease    mongostore.Lease
	lost     chan struct{}
	lostOnce sync.Once
	stop     context.CancelFunc
	done     chan struct{}
}

// holdLease takes the lease of name for holder, or returns an error wrapping
// [mongostore.ErrLeaseHeld] that says who holds it.
func holdLease(ctx context.Context, store *mongostore.Store, name, holder string, ttl time.Duration, logger *slog.Logger) (*heldLease, mongostore.Lease, error) {
	l, err := store.AcquireLease(ctx, name, holder, ttl)
	if err != nil {
		return nil, l, err
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h := &heldLease{store: store, ttl: ttl, logger: logger, lease: l, lost: make(chan struct{}), stop: stop, done: make(chan struct{})}
	go h.renew(rctx)
	return h, l, nil
}

func (h *heldLease) renew(ctx context.Context) {
	defer close(h.done)
	tick := time.NewTicker(h.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.lost:
			return
		case <-tick.C:
		}
		l := h.current()
		// Not cut short by stop: a renewal abandoned in flight can still
		// reach the server after the release, and on a server whose
		// conditional writes are not atomic (the embedded one) land after
		// it, holding the lease again for a whole ttl. release waits for
		// it instead (at most a third of the ttl).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.ttl/3)
		next, err := h.store.RenewLease(rctx, l, h.ttl)
		cancel()
		switch {
		case err == nil:
			h.mu.Lock()
			h.lease = next
			h.mu.Unlock()
		case errors.Is(err, mongostore.ErrLeaseLost):
			h.markLost(err)
		case ctx.Err() != nil:
			return
		case !time.Now().Before(l.Expires):
			h.markLost(fmt.Errorf("could not renew the lease before it expired: %w", err))
		default:
			h.logger.Warn("renewing the lease", "lease", l.Name, "err", err)
		}
	}
}

// confirm renews the lease once, a moment after it was taken: on a store
// whose conditional writes are not atomic (the embedded server) two
// standbys can both take an expired lease; the one whose write was not the
// last finds it lost here, before it runs anything.
func (h *heldLease) confirm(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(min(standbyPoll(h.ttl), 250*time.Millisecond)):
	}
	held, _ := h.stillHeld(ctx) // not known to be held: let it go, and take one again
	return held
}

// stillHeld renews the lease now, and reports whether it is still held:
// false once another process took it, or it expired; an error, with false,
// when the store did not answer in time, so that nothing tells.
func (h *heldLease) stillHeld(ctx context.Context) (bool, error) {
	if h.isLost() {
		return false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, h.ttl/3)
	defer cancel()
	next, err := h.store.RenewLease(rctx, h.current(), h.ttl)
	switch {
	case errors.Is(err, mongostore.ErrLeaseLost):
		return false, nil
	case err != nil:
		return false, err
	}
	h.mu.Lock()
	h.lease = next
	h.mu.Unlock()
	return true, nil
}

// token is the fencing token of the holding.
func (h *heldLease) token() int64 { return h.current().Token }

// current is the lease as this process holds it.
func (h *heldLease) current() mongostore.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// markLost notes that the lease is not held any more.
func (h *heldLease) markLost(why error) {
	h.lostOnce.Do(func() {
		h.logger.Warn("lost the lease: this process stops writing", "lease", h.current().Name, "why", why)
		close(h.lost)
	})
}

// isLost reports whether the lease was lost.
func (h *heldLease) isLost() bool {
	select {
	case <-h.lost:
		return true
	default:
		return false
	}
}

// letGoWait bounds a release of a lease, and of a process's heartbeat: a
// MongoDB that does not answer in it will not answer the others of a stop
// either, and the lease expires by itself.
const letGoWait = 5 * time.Second

// release stops renewing and lets the lease go. One known lost is let go
// too: a renewal that came late (a loaded machine) leaves the lease this
// process's in the store until it expires, and the release is conditional
// on its token, so that one another process took is left alone.
func (h *heldLease) release() {
	h.stop()
	<-h.done
	l := h.current()
	wait := min(h.ttl, letGoWait)
	if h.isLost() {
		// Let go in passing: it expires by itself, and MongoDB, which did
		// not answer its renewal, may not answer this either (a stop
		// must not wait out another timeout).
		wait = min(wait, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := h.store.ReleaseLease(ctx, l); err != nil {
		h.logger.Warn("releasing the lease", "lease", l.Name, "err", err)
	}
}

// leasedCheckpoints stores a runner's checkpoints fenced by the lease its
// process holds: once another process has taken the lease over and written
// the checkpoint, this one's writes are refused, and the lease is known lost.
type leasedCheckpoints struct {
	*mongostore.Store
	held *heldLease
}

func (l leasedCheckpoints) SaveCheckpoint(ctx context.Context, name string, c projector.Checkpoint) error {
	err := l.Store.SaveCheckpointUnder(ctx, name, c, l.held.current(), 0)
	if errors.Is(err, mongostore.ErrFenced) {
		l.held.markLost(err)
	}
	return err
}

// standbyPoll is how often a standby tries to take a lease: a tenth of its
// time, so that it takes over soon after the holder's lease expires.
func standbyPoll(ttl time.Duration) time.Duration { return max(ttl/10, 50*time.Millisecond) }

// defaultLease is run's and replay-parked's --lease when it is not given.
const defaultLease = 15 * time.Second

// groupLeasePoll is how often a --group consumer reads its projection's
// lease, whatever --lease is (it takes none): replay-parked, which holds
// it, waits twice that after taking it before it counts the group's
// consumers, so that none subscribes again unseen.
const groupLeasePoll = time.Second
