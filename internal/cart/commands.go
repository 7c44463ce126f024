package cart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/revgate/projector/projector"
)

// The write side: commands decided against the cart's state folded from its
// stream, appended with the expected revision, with event ids derived from the
// command's request id, so that a retried command appends nothing new.

// Errors of the write side.
var (
	// ErrCartExists: opening a cart whose stream has events.
	ErrCartExists = errors.New("cart exists already")
	// ErrCartNotFound: a command on a cart that was never opened.
	ErrCartNotFound = errors.New("cart not found")
	// ErrCartClosed: changing a cart that was confirmed or canceled.
	ErrCartClosed = errors.New("cart is closed")
	// ErrEmptyCart: confirming a cart without items.
	ErrEmptyCart = errors.New("cart is empty")
	// ErrConflict is what an [EventStore] returns when the stream has moved
	// past the expected revision.
	ErrConflict = errors.New("stream changed since it was read")
	// ErrNoRequestID: every command needs a request id, its idempotency key.
	ErrNoRequestID = errors.New("command has no request id")
)

// Command is a request to change a cart. RequestID identifies the request:
// the client sends the same one when it retries.
type Command interface {
	cartID() string
	requestID() string
	decide(state writeState, now time.Time) ([]any, error)
}

// OpenCart opens a cart for a client.
type OpenCart struct {
	RequestID, CartID, ClientID string
}

// AddItem adds a quantity of a product to an open cart.
type AddItem struct {
	RequestID, CartID string
	Item              ProductItem
}

// RemoveItem removes a quantity of a product from an open cart.
type RemoveItem struct {
	RequestID, CartID string
	Item              ProductItem
}

// ConfirmCart closes an open cart with items for checkout.
type ConfirmCart struct{ RequestID, CartID string }

// CancelCart closes an open cart without checkout.
type CancelCart struct{ RequestID, CartID string }

func (c OpenCart) cartID() string       { return c.CartID }
func (c AddItem) cartID() string        { return c.CartID }
func (c RemoveItem) cartID() string     { return c.CartID }
func (c ConfirmCart) cartID() string    { return c.CartID }
func (c CancelCart) cartID() string     { return c.CartID }
func (c OpenCart) requestID() string    { return c.RequestID }
func (c AddItem) requestID() string     { return c.RequestID }
func (c RemoveItem) requestID() string  { return c.RequestID }
func (c ConfirmCart) requestID() string { return c.RequestID }
func (c CancelCart) requestID() string  { return c.RequestID }

// writeState is what the decisions need of a cart.
type writeState struct {
	exists   bool
	clientID string
	status   string
	items    []ProductItem
}

func (s writeState) open() error {
	switch {
	case !s.exists:
		return ErrCartNotFound
	case s.status != StatusOpened:
		return fmt.Errorf("%w (%s)", ErrCartClosed, s.status)
	}
	return nil
}

func (c OpenCart) decide(s writeState, now time.Time) ([]any, error) {
	if s.exists {
		return nil, ErrCartExists
	}
	return []any{ShoppingCartOpened{ShoppingCartID: c.CartID, ClientID: c.ClientID, OpenedAt: now}}, nil
}

func (c AddItem) decide(s writeState, _ time.Time) ([]any, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if _, err := AddProductItem(s.items, c.Item); err != nil {
		return nil, err
	}
	return []any{ProductItemAddedToShoppingCart{ShoppingCartID: c.CartID, ProductItem: c.Item}}, nil
}

func (c RemoveItem) decide(s writeState, _ time.Time) ([]any, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if _, err := RemoveProductItem(s.items, c.Item); err != nil {
		return nil, err
	}
	return []any{ProductItemRemovedFromShoppingCart{ShoppingCartID: c.CartID, ProductItem: c.Item}}, nil
}

func (c ConfirmCart) decide(s writeState, now time.Time) ([]any, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if len(s.items) == 0 {
		return nil, ErrEmptyCart
	}
	return []any{ShoppingCartConfirmed{ShoppingCartID: c.CartID, ConfirmedAt: now, ProductItems: slices.Clone(s.items)}}, nil
}

func (c CancelCart) decide(s writeState, now time.Time) ([]any, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	return []any{ShoppingCartCanceled{ShoppingCartID: c.CartID, CanceledAt: now}}, nil
}

// fold computes the write state from a cart's decoded events.
func fold(events []any) (writeState, error) {
	var s writeState
	for _, e := range events {
		var err error
		switch e := e.(type) {
		case ShoppingCartOpened:
			s = writeState{exists: true, clientID: e.ClientID, status: StatusOpened, items: []ProductItem{}}
		case ProductItemAddedToShoppingCart:
			s.items, err = AddProductItem(s.items, e.ProductItem)
		case ProductItemRemovedFromShoppingCart:
			s.items, err = RemoveProductItem(s.items, e.ProductItem)
		case ShoppingCartConfirmed:
			s.status = StatusConfirmed
		case ShoppingCartCanceled:
			s.status = StatusCanceled
		}
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

// RecordedEvent is an event of a stream as the write side reads it.
type RecordedEvent struct {
	ID   string
	Type string
	Data []byte
}

// NewEvent is an event the write side appends.
type NewEvent struct {
	ID       uuid.UUID
	Type     string
	Data     []byte
	Metadata []byte
}

// EventStore is what the write side needs of EventStoreDB ([NewStore]
// adapts a client of either official client).
type EventStore interface {
	// Read returns the events of stream in order, and the revision of the
	// last one (-1 for a stream with none).
	Read(ctx context.Context, stream string) ([]RecordedEvent, int64, error)
	// Append appends events if the stream's last revision is expected (-1:
	// no stream), else returns an error wrapping [ErrConflict].
	Append(ctx context.Context, stream string, expected int64, events []NewEvent) error
}

// Metadata is what the write side puts in every cart event's metadata: the
// cart's client, so that read models per client can route any cart event
// (events other than the opening do not name the client), and the request.
type Metadata struct {
	ClientID  string `json:"clientId"`
	RequestID string `json:"requestId,omitempty"`
	// The trace context of the command, when it has one (see
	// [Handler.Handle]): W3C traceparent and tracestate, and the Kurrent
	// clients' $traceId and $spanId.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
	TraceID     string `json:"$traceId,omitempty"`
	SpanID      string `json:"$spanId,omitempty"`
}

// ClientOf returns the client an event's metadata names.
func ClientOf(ev projector.Event) (string, bool) {
	if o, ok := ev.Payload.(ShoppingCartOpened); ok && o.ClientID != "" {
		return o.ClientID, true
	}
	var m Metadata
	if len(ev.Metadata) == 0 || json.Unmarshal(ev.Metadata, &m) != nil || m.ClientID == "" {
		return "", false
	}
	return m.ClientID, true
}

// Namespace is the name space of the event ids the write side derives
// (RFC 4122 name-based, SHA-1).
var Namespace = uuid.MustParse("4f1f1a4c-8e0b-5b8e-9c35-6b0d8e1c2a77")

// EventID is the id of the n-th event a request appends to a cart: the same
// cart and request id always give the same ids, and two carts never share one
// (read models that remember event ids key on them).
func EventID(cartID, requestID string, n int) uuid.UUID {
	return uuid.NewSHA1(Namespace, fmt.Appendf(nil, "%s/%s/%d", cartID, requestID, n))
}

// Handler decides commands and appends their events.
type Handler struct {
	store    EventStore
	registry *projector.Registry
	now      func() time.Time
	retries  int
	tracer   trace.Tracer
}

// HandlerOption configures a [Handler].
type HandlerOption func(*handlerConfig)

// NewHandler returns a handler on store. now may be nil (the wall clock).
func NewHandler(store EventStore, now func() time.Time, opts ...HandlerOption) *Handler {
	if now == nil {
		now = func() time.Time { return time.Now().UTC() }
	}
	var c handlerConfig
	for _, o := range opts {
		o(&c)
	}
	return &Handler{store: store, registry: Registry(), now: now, retries: 10, tracer: c.tracer()}
}

// Result is what handling a command did.
type Result struct {
	// Events appended now; none when the request had been handled before.
	Appended int
	// Duplicate: the stream holds this request's events already.
	Duplicate bool
	// Revision of the stream's last event after the command.
	Revision int64
}

// handle is Handle within the command's span.
func (h *Handler) handle(ctx context.Context, cmd Command) (Result, error) {
	if cmd.requestID() == "" {
		return Result{}, ErrNoRequestID
	}
	stream := StreamID(cmd.cartID())
	for attempt := 0; ; attempt++ {
		recorded, rev, err := h.store.Read(ctx, stream)
		if err != nil {
			return Result{}, fmt.Errorf("cart: read %s: %w", stream, err)
		}
		first := EventID(cmd.cartID(), cmd.requestID(), 0).String()
		payloads := make([]any, 0, len(recorded))
		for _, r := range recorded {
			if r.ID == first {
				return Result{Duplicate: true, Revision: rev}, nil
			}
			ev, err := h.registry.Decode(projector.Event{Type: r.Type, StreamID: stream, Data: r.Data})
			if err != nil {
				return Result{}, fmt.Errorf("cart: %s: %w", stream, err)
			}
			payloads = append(payloads, ev.Payload)
		}
		state, err := fold(payloads)
		if err != nil {
			return Result{}, fmt.Errorf("cart: %s: %w", stream, err)
		}
		decided, err := cmd.decide(state, h.now())
		if err != nil {
			return Result{Revision: rev}, fmt.Errorf("cart %s: %w", cmd.cartID(), err)
		}
		client := state.clientID
		if o, ok := cmd.(OpenCart); ok {
			client = o.ClientID
		}
		meta, err := json.Marshal(withTrace(ctx, Metadata{ClientID: client, RequestID: cmd.requestID()}))
		if err != nil {
			return Result{}, err
		}
		events := make([]NewEvent, len(decided))
		for i, p := range decided {
			name, data, err := h.registry.Encode(p)
			if err != nil {
				return Result{}, err
			}
			events[i] = NewEvent{ID: EventID(cmd.cartID(), cmd.requestID(), i), Type: name, Data: data, Metadata: meta}
		}
		err = h.store.Append(ctx, stream, rev, events)
		if err == nil {
			return Result{Appended: len(events), Revision: rev + int64(len(events))}, nil
		}
		if !errors.Is(err, ErrConflict) || attempt >= h.retries {
			return Result{}, fmt.Errorf("cart: append to %s: %w", stream, err)
		}
	}
}
