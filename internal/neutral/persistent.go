package neutral

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/revgate/projector/projector"
)

// Action is what a consumer asks the server to do with an event it declines
// (nacks), numbered as the protocol numbers them: both clients' NackAction
// have these values, so a conversion either way is a type conversion.
type Action int32

// The actions a consumer uses. (The protocol's Stop is not one of them.)
const (
	// ActionUnknown leaves it to the server; as a setting it means the
	// default, ActionPark.
	ActionUnknown Action = 0
	// ActionPark moves the event to the group's parked stream, with the
	// reason.
	ActionPark Action = 1
	// ActionRetry has the event delivered again.
	ActionRetry Action = 2
	// ActionSkip drops the event.
	ActionSkip Action = 3
)

func (a Action) String() string {
	switch a {
	case ActionUnknown:
		return "unknown"
	case ActionPark:
		return "park"
	case ActionRetry:
		return "retry"
	case ActionSkip:
		return "skip"
	}
	return fmt.Sprintf("action %d", int32(a))
}

// ConsumerOptions are the client-neutral settings of a consumer of a
// persistent subscription group; package subscription's PersistentOptions
// carry them, and document them.
type ConsumerOptions struct {
	// Stream the group reads: a stream name, or [AllStreams]; Group its name.
	Stream, Group string
	// BufferSize is how many events the server may have in flight to this
	// consumer (default 64).
	BufferSize int
	// OnPermanentFailure is the action on an event that failed for good
	// (default [ActionPark]; [ActionRetry] and [ActionSkip] are the others).
	OnPermanentFailure Action
	// MaxDeliveries bounds how many times a failing event is delivered
	// (default 10) before the consumer parks it.
	MaxDeliveries int
	Logger        *slog.Logger
}

// Validate checks o and fills in its defaults.
func (o *ConsumerOptions) Validate() error {
	if o.Stream == "" || o.Group == "" {
		return errors.New("a persistent subscription needs a client, a stream (or $all) and a group")
	}
	switch o.OnPermanentFailure {
	case ActionUnknown:
		o.OnPermanentFailure = ActionPark
	case ActionPark, ActionRetry, ActionSkip:
	default:
		return fmt.Errorf("nack action %d on permanent failure: use park, retry or skip", o.OnPermanentFailure)
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 64
	}
	if o.MaxDeliveries <= 0 {
		o.MaxDeliveries = 10
	}
	o.Logger = OrDiscard(o.Logger)
	return nil
}

// Settlement is what a consumer tells the server about one event it was
// given: an acknowledgement, or a nack with an action and a reason.
type Settlement struct {
	Ack    bool
	Action Action
	Reason string
	// GaveUp: the event is parked because it failed on the last delivery
	// MaxDeliveries allows, not for what failed.
	GaveUp bool
}

// Decide returns the settlement of an event from the engine's results for it
// and how many times it has been delivered, counting this one. An event
// every projection handled (applied, or a duplicate), or settled under the
// engine's failure policy, is acknowledged: a parked one is in the engine's
// record of parked events, which replay-parked applies (one record a
// failure: parked in the group too, it would be delivered again to a
// document that has moved past it, a duplicate that replays nothing), and a
// skipped one is told to the server as skipped (nack skip). One that failed
// in a way that may pass (a predecessor not there in time) is handed back to
// be retried: another consumer may apply what it waits for meanwhile. One
// that failed for good under the engine's [projector.Block] policy (a
// payload that does not decode, a domain error) gets o.OnPermanentFailure.
// A retry on the delivery MaxDeliveries allows is a park instead, so that
// nothing is retried for ever.
func (o *ConsumerOptions) Decide(results []projector.Result, deliveries int) Settlement {
	var permanent, transient, skipped []string
	for _, r := range results {
		switch r.Outcome {
		case projector.Skipped:
			skipped = append(skipped, r.Err.Error())
		case projector.Failed:
			var perr *projector.Error
			if errors.As(r.Err, &perr) && perr.Retryable() {
				transient = append(transient, r.Err.Error())
			} else {
				permanent = append(permanent, r.Err.Error())
			}
		}
	}
	switch {
	case len(transient) == 0 && len(permanent) == 0 && len(skipped) == 0:
		return Settlement{Ack: true}
	case len(transient) == 0 && len(permanent) == 0:
		return Settlement{Action: ActionSkip, Reason: strings.Join(skipped, "; ")}
	}
	s := Settlement{Action: ActionRetry, Reason: strings.Join(append(transient, permanent...), "; ")}
	if len(transient) == 0 {
		s.Action = o.OnPermanentFailure
	}
	if s.Action == ActionRetry && deliveries >= o.MaxDeliveries {
		s.Action, s.GaveUp = ActionPark, true
		s.Reason = fmt.Sprintf("failed on %d deliveries: %s", deliveries, s.Reason)
	}
	return s
}

// PersistentStats counts what a consumer told the server about the events it
// was given.
type PersistentStats struct {
	// Acked events were handled; Parked ones moved to the group's parked
	// stream with their reason; Retried ones were handed back to be
	// redelivered; Skipped ones were dropped (nack skip).
	Acked, Parked, Retried, Skipped uint64
}

// Ledger keeps what a consumer told the server, and which documents stay
// behind an event it parked. The zero value is ready; it is safe for
// concurrent use.
type Ledger struct {
	acked, parked, retried, skipped atomic.Uint64

	mu      sync.Mutex
	blocked map[blockedDoc]string // documents left behind an event the consumer parked, and why
}

// blockedDoc is a document of a projection.
type blockedDoc struct{ projection, document string }

// Stats returns the counts so far.
func (l *Ledger) Stats() PersistentStats {
	return PersistentStats{Acked: l.acked.Load(), Parked: l.parked.Load(), Retried: l.retried.Load(), Skipped: l.skipped.Load()}
}

// Sent counts a settlement the server has taken.
func (l *Ledger) Sent(s Settlement) {
	switch {
	case s.Ack:
		l.acked.Add(1)
	case s.Action == ActionPark:
		l.parked.Add(1)
	case s.Action == ActionRetry:
		l.retried.Add(1)
	case s.Action == ActionSkip:
		l.skipped.Add(1)
	}
}

// Blocked returns the documents that stay behind an event the consumer
// parked after it failed (under the engine's [projector.Block] policy the
// document did not move past it, so its later events cannot apply either),
// each with why, until the document applies an event again (once the parked
// events are replayed, say). Sorted; empty when none.
func (l *Ledger) Blocked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.blocked))
	for d, why := range l.blocked {
		out = append(out, fmt.Sprintf("%s/%s: %s", d.projection, d.document, why))
	}
	slices.Sort(out)
	return out
}

// behind reports whether an event's results failed only in ways that may
// pass, each on a document that stays behind an event the consumer parked
// (Blocked), and why the first such document does: delivered again, it
// would wait for that event again, until the parked events are replayed.
func (l *Ledger) behind(results []projector.Result) (why string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range results {
		if r.Outcome != projector.Failed {
			continue
		}
		var perr *projector.Error
		w, blocked := l.blocked[blockedDoc{r.Projection, r.Document}]
		if !errors.As(r.Err, &perr) || !perr.Retryable() || !blocked {
			return "", false
		}
		why = cmp.Or(why, w)
	}
	return why, why != ""
}

// Note records what the results of an event settled as s say of the
// documents: a failed one whose event is parked is blocked; one that applied
// an event is not any more.
func (l *Ledger) Note(results []projector.Result, s Settlement) {
	parked := !s.Ack && s.Action == ActionPark
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range results {
		d := blockedDoc{r.Projection, r.Document}
		switch {
		case r.Outcome == projector.Applied:
			delete(l.blocked, d)
		case r.Outcome == projector.Failed && parked && r.Document != "":
			if l.blocked == nil {
				l.blocked = map[blockedDoc]string{}
			}
			if _, ok := l.blocked[d]; !ok { // why it stays behind the first
				l.blocked[d] = s.Reason
			}
		}
	}
}
