// Package esdbv4 is the adapter of the event-store sources to
// EventStore-Client-Go v4 (github.com/EventStore/EventStore-Client-Go/v4,
// package esdb, archived by its maintainers in 2025): [Dial] returns a
// [subscription.Client] that reads, subscribes and appends through it.
// Package [github.com/revgate/projector/kurrent] is the same on the
// maintained KurrentDB client; the sources themselves live once in package
// [github.com/revgate/projector/subscription]. A projector binary on this
// client names it in its configuration, app.Config{Dial: esdbv4.Dial, ...},
// and links it and not the other.
//
// # Linking both clients
//
// EventStore-Client-Go v4 and KurrentDB-Client-Go generate their protocol
// code from the same .proto files, so both register the same protobuf names
// (event_store.client.streams.ReadReq, event_store.client.BadRequest, ...)
// in the protobuf runtime's global registry, and a binary that links both
// panics as it initializes, before main or TestMain runs: "proto: file ...
// has a name conflict over event_store.client.BadRequest". Nothing in this
// repository works around that behind the binary's back. A binary that links
// this adapter and KurrentDB-Client-Go (package kurrent, or the esdbtest
// double, which is built on KurrentDB-Client-Go's protocol code) builds with
//
//	-ldflags=-X=google.golang.org/protobuf/reflect/protoregistry.conflictPolicy=ignore
//
// which keeps the second client's descriptors out of the global registry;
// each client still encodes and decodes its messages with its own generated
// code, and neither looks these names up in the registry. (The variable, and
// GOLANG_PROTOBUF_REGISTRATION_CONFLICT=ignore in the environment of the
// process, are the protobuf runtime's documented escape hatch, outside its
// compatibility promise.) This package's tests are such a binary: they run
// v4 against esdbtest, and the Makefile's test targets pass the flag
// (BOTH_CLIENTS); go test ./subscription/esdbv4 needs it too.
package esdbv4

import (
	"context"
	"errors"
	"log/slog"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// Dial parses an EventStoreDB connection string (esdb://host:port?tls=false,
// esdb+discover://..., as the official client documents) and returns a
// client. It does not connect: the first subscription does, and an
// unreachable server shows there, under the runner's reconnect policy. The
// official client's own log goes to logger (nil: discarded): its errors and
// warnings at warn level, the rest at debug.
func Dial(uri string, logger *slog.Logger) (*subscription.Client, error) {
	// Its messages keep the prefix "subscription:", as before the adapter
	// moved out of package subscription.
	at := neutral.Endpoint{Package: "subscription", Server: "EventStoreDB"}
	cfg, err := esdb.ParseConnectionString(uri)
	if err != nil {
		return nil, at.BadURI(uri, err)
	}
	cfg.Logger = neutral.ClientLog(neutral.OrDiscard(logger).With("component", "esdb-client"))
	at = at.At(cfg.Address, cfg.DnsDiscover || len(cfg.GossipSeeds) > 0, !cfg.DisableTLS)
	return subscription.NewClient(uri, at, driver{cfg}), nil
}

// driver is [neutral.Driver] on the client.
type driver struct{ cfg *esdb.Configuration }

func (d driver) Open() (neutral.Session, error) {
	cl, err := esdb.NewClient(d.cfg)
	if err != nil {
		return nil, err
	}
	return session{cl}, nil
}

// kinds are the error codes the sources tell apart. (ErrorCodeUnauthenticated
// is retried, as an error of no kind: a node answers it while it starts or
// elects a leader as well as for wrong credentials.)
var kinds = map[esdb.ErrorCode]neutral.ErrorKind{
	esdb.ErrorCodeConnectionClosed:      neutral.ErrClosed,
	esdb.ErrorCodeAccessDenied:          neutral.ErrDenied,
	esdb.ErrorCodeResourceNotFound:      neutral.ErrNotFound,
	esdb.ErrorCodeStreamDeleted:         neutral.ErrDeleted,
	esdb.ErrorCodeResourceAlreadyExists: neutral.ErrExists,
	esdb.ErrorCodeWrongExpectedVersion:  neutral.ErrWrongRevision,
}

func (d driver) Kind(err error) neutral.ErrorKind { return neutral.KindOf[*esdb.Error](err, kinds) }

// session is one official client.
type session struct{ cl *esdb.Client }

func (s session) Close() error { return s.cl.Close() }

func allFrom(cp *projector.Checkpoint) esdb.AllPosition {
	if cp == nil {
		return esdb.Start{}
	}
	return esdb.Position{Commit: cp.Position, Prepare: cp.Prepare}
}

func (s session) ReadAll(ctx context.Context, from *projector.Checkpoint, backwards bool, n uint64) (neutral.Reader, error) {
	o := esdb.ReadAllOptions{From: allFrom(from)}
	if backwards {
		o = esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}
	}
	rs, err := s.cl.ReadAll(ctx, o, n)
	if err != nil {
		return nil, err
	}
	return reader{rs}, nil
}

func (s session) ReadStream(ctx context.Context, stream string, from, n uint64) (neutral.Reader, error) {
	var start esdb.StreamPosition = esdb.Revision(from)
	if from == 0 {
		start = esdb.Start{}
	}
	rs, err := s.cl.ReadStream(ctx, stream, esdb.ReadStreamOptions{From: start}, n)
	if err != nil {
		return nil, err
	}
	return reader{rs}, nil
}

// reader is an open read.
type reader struct{ rs *esdb.ReadStream }

func (r reader) Recv() (*neutral.Resolved, error) {
	re, err := r.rs.Recv()
	if err != nil {
		return nil, err
	}
	return resolved(re), nil
}

func (r reader) Close() error { r.rs.Close(); return nil }

func (s session) SubscribeAll(ctx context.Context, o neutral.AllSubscription) (neutral.Feed, error) {
	sub, err := s.cl.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{
		From: allFrom(o.From), ResolveLinkTos: o.ResolveLinks, Filter: filter(o.Filter),
		MaxSearchWindow: o.MaxSearchWindow, CheckpointInterval: o.CheckpointInterval,
	})
	if err != nil {
		return nil, err
	}
	return feed{sub}, nil
}

func (s session) SubscribeStream(ctx context.Context, stream string, from *uint64, resolveLinks bool) (neutral.Feed, error) {
	var start esdb.StreamPosition = esdb.Start{}
	if from != nil {
		start = esdb.Revision(*from)
	}
	sub, err := s.cl.SubscribeToStream(ctx, stream, esdb.SubscribeToStreamOptions{From: start, ResolveLinkTos: resolveLinks})
	if err != nil {
		return nil, err
	}
	return feed{sub}, nil
}

// filter is f in the client's terms.
func filter(f neutral.Filter) *esdb.SubscriptionFilter {
	switch {
	case f.ExcludeSystemEvents:
		return esdb.ExcludeSystemEventsFilter()
	case f.EventTypes:
		return &esdb.SubscriptionFilter{Type: esdb.EventFilterType, Prefixes: f.Prefixes, Regex: f.Regex}
	}
	return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: f.Prefixes, Regex: f.Regex}
}

// feed is an open catch-up subscription.
type feed struct{ sub *esdb.Subscription }

func (f feed) Recv() neutral.Notice {
	m := f.sub.Recv()
	switch {
	case m.SubscriptionDropped != nil:
		return neutral.Notice{Dropped: m.SubscriptionDropped.Error}
	case m.EventAppeared != nil:
		return neutral.Notice{Event: resolved(m.EventAppeared)}
	case m.CheckPointReached != nil:
		return neutral.Notice{Checkpoint: &projector.Checkpoint{Position: m.CheckPointReached.Commit, Prepare: m.CheckPointReached.Prepare}}
	}
	return neutral.Notice{CaughtUp: m.CaughtUp != nil}
}

func (f feed) Close() error { return f.sub.Close() }

func (s session) Append(ctx context.Context, stream string, expected int64, events []neutral.NewEvent) (uint64, error) {
	var want esdb.ExpectedRevision = esdb.Revision(uint64(expected))
	switch expected {
	case neutral.NoStream:
		want = esdb.NoStream{}
	case neutral.AnyRevision:
		want = esdb.Any{}
	}
	data := make([]esdb.EventData, len(events))
	for i, e := range events {
		data[i] = esdb.EventData{EventID: e.ID, EventType: e.Type, ContentType: esdb.ContentTypeJson, Data: e.Data, Metadata: e.Metadata}
	}
	r, err := s.cl.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: want}, data...)
	if err != nil {
		return 0, err
	}
	return r.CommitPosition, nil
}

func (s session) CreateGroup(ctx context.Context, stream, group string, g neutral.GroupSettings, f neutral.Filter) error {
	settings := esdb.SubscriptionSettingsDefault()
	settings.ResolveLinkTos = g.ResolveLinks
	if g.Strategy != "" {
		settings.ConsumerStrategyName = esdb.ConsumerStrategy(g.Strategy)
	}
	if g.MaxRetryCount > 0 {
		settings.MaxRetryCount = int32(g.MaxRetryCount)
	}
	if stream == neutral.AllStreams {
		o := esdb.PersistentAllSubscriptionOptions{Settings: &settings, StartFrom: esdb.End{}, Filter: filter(f)}
		if g.FromStart {
			settings.StartFrom, o.StartFrom = esdb.Start{}, esdb.Start{}
		}
		return s.cl.CreatePersistentSubscriptionToAll(ctx, group, o)
	}
	o := esdb.PersistentStreamSubscriptionOptions{Settings: &settings, StartFrom: esdb.End{}}
	if g.FromStart {
		settings.StartFrom, o.StartFrom = esdb.Start{}, esdb.Start{}
	}
	return s.cl.CreatePersistentSubscription(ctx, stream, group, o)
}

func (s session) SubscribeGroup(ctx context.Context, stream, group string, bufferSize int) (neutral.GroupFeed, error) {
	o := esdb.SubscribeToPersistentSubscriptionOptions{BufferSize: uint32(bufferSize)}
	var sub *esdb.PersistentSubscription
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
type groupFeed struct{ sub *esdb.PersistentSubscription }

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
	return g.sub.Ack(re.Handle.(*esdb.ResolvedEvent))
}

func (g groupFeed) Nack(reason string, a neutral.Action, re *neutral.Resolved) error {
	return g.sub.Nack(reason, esdb.NackAction(a), re.Handle.(*esdb.ResolvedEvent))
}

func (s session) GroupInfo(ctx context.Context, group string) (string, int64, error) {
	info, err := s.cl.GetPersistentSubscriptionInfoToAll(ctx, group, esdb.GetPersistentSubscriptionOptions{})
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
	gs, err := s.cl.ListPersistentSubscriptionsToAll(ctx, esdb.ListPersistentSubscriptionsOptions{})
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		names = append(names, g.GroupName)
	}
	return names, err
}

func (s session) ReplayParked(ctx context.Context, group string) error {
	return s.cl.ReplayParkedMessagesToAll(ctx, group, esdb.ReplayParkedMessagesOptions{})
}

// resolved is re in the neutral package's terms (nil for nil).
func resolved(re *esdb.ResolvedEvent) *neutral.Resolved {
	if re == nil {
		return nil
	}
	return &neutral.Resolved{Event: recorded(re.Event), Link: recorded(re.Link), Commit: re.Commit, Handle: re}
}

// recorded is e in the neutral package's terms (nil for nil).
func recorded(e *esdb.RecordedEvent) *neutral.Recorded {
	if e == nil {
		return nil
	}
	return &neutral.Recorded{
		ID: e.EventID, Type: e.EventType, Stream: e.StreamID, Revision: e.EventNumber,
		Commit: e.Position.Commit, Prepare: e.Position.Prepare, Created: e.CreatedDate, Data: e.Data, Metadata: e.UserMetadata,
	}
}
