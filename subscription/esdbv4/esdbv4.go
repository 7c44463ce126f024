// Package esdbv4 is the adapter of the event-store sources to
// EventStore-Client-Go v4 (github.com/EventStore/EventStore-Client-Go/v4,
// package esdb, archived by its maintainers in 2025): [Dial] returns a
// [subscription.Client] that reads, subscribes and appends through it.
// Package [github.com/revgate/projector/kurrent] is the same on the
// maintained KurrentDB client; the sources themselves live once in package
// [github.com/revgate/projector/subscription], and the adapter to both
// clients once in package internal/official: this package parses the
// connection string and names what package esdb declares. A projector
// binary on this client names it in its configuration,
// app.Config{Dial: esdbv4.Dial, ...}, and links it and not the other.
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
// (BOTH_CLIENTS); go test ./subscription/esdbv4 needs it too, and so does
// go test ./internal/official, whose tests check the adapter on both.
package esdbv4

import (
	"log/slog"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/internal/official"
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
	d, err := official.NewDriver(func() (*esdb.Client, error) { return esdb.NewClient(cfg) }, kind, names)
	if err != nil {
		return nil, err
	}
	return subscription.NewClient(uri, at, d), nil
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

func kind(err error) neutral.ErrorKind { return neutral.KindOf[*esdb.Error](err, kinds) }

// names are what package esdb declares that the adapter uses.
var names = official.Names{
	Start: esdb.Start{}, End: esdb.End{}, NoStream: esdb.NoStream{}, Any: esdb.Any{}, Revision: esdb.Revision,
	Backwards: esdb.Backwards, ContentTypeJson: esdb.ContentTypeJson,
	EventFilterType: esdb.EventFilterType, StreamFilterType: esdb.StreamFilterType,
	ExcludeSystemEventsFilter: esdb.ExcludeSystemEventsFilter, SubscriptionSettingsDefault: esdb.SubscriptionSettingsDefault,
	PerEvent: official.PerEvent((*esdb.ReadStream).Recv, (*esdb.Subscription).Recv, (*esdb.PersistentSubscription).Recv,
		(*esdb.PersistentSubscription).Ack, (*esdb.PersistentSubscription).Nack),
}
