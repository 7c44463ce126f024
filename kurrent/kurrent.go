package kurrent

import (
	"context"
	"errors"
	"log/slog"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// Dial parses a connection string (kurrentdb://host:port?tls=false; the
// kurrent://, kdb:// and esdb:// schemes and their +discover forms are the
// same to the client) and returns a client. It does not connect: the first subscription does, and an
// unreachable server shows there, under the runner's reconnect policy. The
// official client's own log goes to logger (nil: discarded): its errors and
// warnings at warn level, the rest at debug.
func Dial(uri string, logger *slog.Logger) (*subscription.Client, error) {
	at := neutral.Endpoint{Package: "kurrent", Server: "KurrentDB"}
	cfg, err := kurrentdb.ParseConnectionString(uri)
	if err != nil {
		return nil, at.BadURI(uri, err)
	}
	cfg.Logger = neutral.ClientLog(neutral.OrDiscard(logger).With("component", "kurrentdb-client"))
	at = at.At(cfg.Address, cfg.DnsDiscover || len(cfg.GossipSeeds) > 0, !cfg.DisableTLS)
	return subscription.NewClient(uri, at, driver{cfg}), nil
}

// driver is [neutral.Driver] on the client.
type driver struct{ cfg *kurrentdb.Configuration }

func (d driver) Open() (neutral.Session, error) {
	cl, err := kurrentdb.NewClient(d.cfg)
	if err != nil {
		return nil, err
	}
	return session{cl}, nil
}

// kinds are the error codes the sources tell apart. (ErrorCodeUnauthenticated
// is retried, as an error of no kind: a node answers it while it starts or
// elects a leader as well as for wrong credentials.)
var kinds = map[kurrentdb.ErrorCode]neutral.ErrorKind{
	kurrentdb.ErrorCodeConnectionClosed:      neutral.ErrClosed,
	kurrentdb.ErrorCodeAccessDenied:          neutral.ErrDenied,
	kurrentdb.ErrorCodeResourceNotFound:      neutral.ErrNotFound,
	kurrentdb.ErrorCodeStreamDeleted:         neutral.ErrDeleted,
	kurrentdb.ErrorCodeResourceAlreadyExists: neutral.ErrExists,
	kurrentdb.ErrorCodeWrongExpectedVersion:  neutral.ErrWrongRevision,
	kurrentdb.ErrorCodeStreamTombstoned:      neutral.ErrDeleted,
	// The v1 append answers a wrong expected revision in its result; a node
	// that reports it as a rich error detail instead gives this code.
	kurrentdb.ErrorCodeStreamRevisionConflict: neutral.ErrWrongRevision,
}

func (d driver) Kind(err error) neutral.ErrorKind {
	return neutral.KindOf[*kurrentdb.Error](err, kinds)
}

// session is one official client.
type session struct{ cl *kurrentdb.Client }

func (s session) Close() error { return s.cl.Close() }

func allFrom(cp *projector.Checkpoint) kurrentdb.AllPosition {
	if cp == nil {
		return kurrentdb.Start{}
	}
	return kurrentdb.Position{Commit: cp.Position, Prepare: cp.Prepare}
}

func (s session) ReadAll(ctx context.Context, from *projector.Checkpoint, backwards bool, n uint64) (neutral.Reader, error) {
	o := kurrentdb.ReadAllOptions{From: allFrom(from)}
	if backwards {
		o = kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}
	}
	rs, err := s.cl.ReadAll(ctx, o, n)
	if err != nil {
		return nil, err
	}
	return reader{rs}, nil
}

func (s session) ReadStream(ctx context.Context, stream string, from, n uint64) (neutral.Reader, error) {
	var start kurrentdb.StreamPosition = kurrentdb.Revision(from)
	if from == 0 {
		start = kurrentdb.Start{}
	}
	rs, err := s.cl.ReadStream(ctx, stream, kurrentdb.ReadStreamOptions{From: start}, n)
	if err != nil {
		return nil, err
	}
	return reader{rs}, nil
}

// reader is an open read.
type reader struct{ rs *kurrentdb.ReadStream }

func (r reader) Recv() (*neutral.Resolved, error) {
	re, err := r.rs.Recv()
	if err != nil {
		return nil, err
	}
	return resolved(re), nil
}

func (r reader) Close() error { r.rs.Close(); return nil }

func (s session) SubscribeAll(ctx context.Context, o neutral.AllSubscription) (neutral.Feed, error) {
	sub, err := s.cl.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{
		From: allFrom(o.From), ResolveLinkTos: o.ResolveLinks, Filter: filter(o.Filter),
		MaxSearchWindow: o.MaxSearchWindow, CheckpointInterval: o.CheckpointInterval,
	})
	if err != nil {
		return nil, err
	}
	return &feed{sub: sub}, nil
}

func (s session) SubscribeStream(ctx context.Context, stream string, from *uint64, resolveLinks bool) (neutral.Feed, error) {
	var start kurrentdb.StreamPosition = kurrentdb.Start{}
	if from != nil {
		start = kurrentdb.Revision(*from)
	}
	sub, err := s.cl.SubscribeToStream(ctx, stream, kurrentdb.SubscribeToStreamOptions{From: start, ResolveLinkTos: resolveLinks})
	if err != nil {
		return nil, err
	}
	return &feed{sub: sub}, nil
}

// filter is f in the client's terms.
func filter(f neutral.Filter) *kurrentdb.SubscriptionFilter {
	switch {
	case f.ExcludeSystemEvents:
		return kurrentdb.ExcludeSystemEventsFilter()
	case f.EventTypes:
		return &kurrentdb.SubscriptionFilter{Type: kurrentdb.EventFilterType, Prefixes: f.Prefixes, Regex: f.Regex}
	}
	return &kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: f.Prefixes, Regex: f.Regex}
}

// feed is an open catch-up subscription. It is read by one goroutine at a
// time.
type feed struct {
	sub  *kurrentdb.Subscription
	live bool // the last of CaughtUp and FellBehind was CaughtUp
}

func (f *feed) Recv() neutral.Notice {
	m := f.sub.Recv()
	switch {
	case m.SubscriptionDropped != nil:
		return neutral.Notice{Dropped: m.SubscriptionDropped.Error}
	case m.EventAppeared != nil:
		return neutral.Notice{Event: resolved(m.EventAppeared)}
	case m.CheckPointReached != nil:
		return neutral.Notice{Checkpoint: &projector.Checkpoint{Position: m.CheckPointReached.Commit, Prepare: m.CheckPointReached.Prepare}}
	case m.CaughtUp != nil:
		f.live = true
		return neutral.Notice{CaughtUp: true}
	case m.FellBehind != nil:
		f.live = false
		return neutral.Notice{}
	}
	// Every field nil: a CaughtUp or a FellBehind without a timestamp (older
	// servers, and esdbtest, built on protocol types that have no such
	// field, send none); the client then loses which of the two it was. The
	// server sends them in turn, CaughtUp first (a subscription falls behind
	// only after it was live).
	f.live = !f.live
	return neutral.Notice{CaughtUp: f.live}
}

func (f *feed) Close() error { return f.sub.Close() }

func (s session) Append(ctx context.Context, stream string, expected int64, events []neutral.NewEvent) (uint64, error) {
	var want kurrentdb.StreamState = kurrentdb.Revision(uint64(expected))
	switch expected {
	case neutral.NoStream:
		want = kurrentdb.NoStream{}
	case neutral.AnyRevision:
		want = kurrentdb.Any{}
	}
	data := make([]kurrentdb.EventData, len(events))
	for i, e := range events {
		data[i] = kurrentdb.EventData{EventID: e.ID, EventType: e.Type, ContentType: kurrentdb.ContentTypeJson, Data: e.Data, Metadata: e.Metadata}
	}
	r, err := s.cl.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{StreamState: want}, data...)
	if err != nil {
		return 0, err
	}
	return r.CommitPosition, nil
}

func (s session) CreateGroup(ctx context.Context, stream, group string, g neutral.GroupSettings, f neutral.Filter) error {
	settings := kurrentdb.SubscriptionSettingsDefault()
	settings.ResolveLinkTos = g.ResolveLinks
	if g.Strategy != "" {
		settings.ConsumerStrategyName = kurrentdb.ConsumerStrategy(g.Strategy)
	}
	if g.MaxRetryCount > 0 {
		settings.MaxRetryCount = int32(g.MaxRetryCount)
	}
	if stream == neutral.AllStreams {
		o := kurrentdb.PersistentAllSubscriptionOptions{Settings: &settings, StartFrom: kurrentdb.End{}, Filter: filter(f)}
		if g.FromStart {
			settings.StartFrom, o.StartFrom = kurrentdb.Start{}, kurrentdb.Start{}
		}
		return s.cl.CreatePersistentSubscriptionToAll(ctx, group, o)
	}
	o := kurrentdb.PersistentStreamSubscriptionOptions{Settings: &settings, StartFrom: kurrentdb.End{}}
	if g.FromStart {
		settings.StartFrom, o.StartFrom = kurrentdb.Start{}, kurrentdb.Start{}
	}
	return s.cl.CreatePersistentSubscription(ctx, stream, group, o)
}

func (s session) SubscribeGroup(ctx context.Context, stream, group string, bufferSize int) (neutral.GroupFeed, error) {
	o := kurrentdb.SubscribeToPersistentSubscriptionOptions{BufferSize: uint32(bufferSize)}
	var sub *kurrentdb.PersistentSubscription
	var err error
	if stream == neutral.AllStreams {
		sub, err = s.cl.SubscribeToPersistentSubscriptionToAll(ctx, group, o)
	} else {
		sub, err = s.cl.SubscribeToPersistentSubscription(ctx, stream, group, o)
	}
	if err != nil {
		return nil, err
	}
	return groupFeed{sub}, nil
}

// groupFeed is an open connection to a group.
type groupFeed struct {
	sub *kurrentdb.PersistentSubscription
}

func (g groupFeed) Recv() (*neutral.Resolved, int, error) {
	m := g.sub.Recv()
	switch {
	case m.SubscriptionDropped != nil:
		return nil, 0, m.SubscriptionDropped.Error
	case m.EventAppeared == nil:
		return nil, 0, errors.New("empty message from the server")
	}
	return resolved(m.EventAppeared.Event), 1 + max(m.EventAppeared.RetryCount, 0), nil
}

func (g groupFeed) Ack(re *neutral.Resolved) error {
	return g.sub.Ack(re.Handle.(*kurrentdb.ResolvedEvent))
}

func (g groupFeed) Nack(reason string, a neutral.Action, re *neutral.Resolved) error {
	return g.sub.Nack(reason, kurrentdb.NackAction(a), re.Handle.(*kurrentdb.ResolvedEvent))
}

func (s session) GroupInfo(ctx context.Context, group string) (string, int64, error) {
	info, err := s.cl.GetPersistentSubscriptionInfoToAll(ctx, group, kurrentdb.GetPersistentSubscriptionOptions{})
	if err != nil {
		return "", 0, err
	}
	var n int64
	if info.Stats != nil {
		n = info.Stats.ParkedMessagesCount
	}
	return info.GroupName, n, nil
}

func (s session) ListGroups(ctx context.Context) ([]string, error) {
	gs, err := s.cl.ListPersistentSubscriptionsToAll(ctx, kurrentdb.ListPersistentSubscriptionsOptions{})
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		names = append(names, g.GroupName)
	}
	return names, err
}

func (s session) ReplayParked(ctx context.Context, group string) error {
	return s.cl.ReplayParkedMessagesToAll(ctx, group, kurrentdb.ReplayParkedMessagesOptions{})
}

// resolved is re in the neutral package's terms (nil for nil).
func resolved(re *kurrentdb.ResolvedEvent) *neutral.Resolved {
	if re == nil {
		return nil
	}
	return &neutral.Resolved{Event: recorded(re.Event), Link: recorded(re.Link), Commit: re.Commit, Handle: re}
}

// recorded is e in the neutral package's terms (nil for nil).
func recorded(e *kurrentdb.RecordedEvent) *neutral.Recorded {
	if e == nil {
		return nil
	}
	return &neutral.Recorded{
		ID: e.EventID, Type: e.EventType, Stream: e.StreamID, Revision: e.EventNumber,
		Commit: e.Position.Commit, Prepare: e.Position.Prepare, Created: e.CreatedDate, Data: e.Data, Metadata: e.UserMetadata,
	}
}
