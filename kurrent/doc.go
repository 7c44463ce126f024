// Package kurrent is the adapter of the event-store sources to KurrentDB
// (or EventStoreDB) through the maintained official client,
// github.com/kurrent-io/KurrentDB-Client-Go (package kurrentdb): [Dial]
// returns a [subscription.Client] that reads, subscribes and appends
// through it. The sources (a catch-up subscription to $all or to one
// stream, a consumer of a persistent subscription group) live once in
// package [github.com/revgate/projector/subscription], over a narrow driver
// that package internal/official implements once for both clients, through
// reflection over the API they share; this package gives it
// KurrentDB-Client-Go and [github.com/revgate/projector/subscription/esdbv4]
// the archived EventStore-Client-Go v4, and one acceptance suite
// (internal/sourcetest) runs against both. This package does not link the
// archived client. A projector binary names its client in its
// configuration, app.Config{Dial: kurrent.Dial, ...} (cmd/projector does),
// and links that one only.
//
// Both clients speak the same v1 gRPC protocol and share most of their code
// (the kurrentdb client is v4 renamed and carried on), so a projector
// behaves the same on either. Where they differ:
//
//   - Connection strings: kurrentdb:// kurrent:// kdb:// and esdb:// (each
//     also +discover) are all accepted; v4 takes esdb:// only.
//   - Names: an append's expectation is AppendToStreamOptions.StreamState
//     (kurrentdb.StreamState: Any, NoStream, StreamExists, StreamRevision)
//     where v4 has ExpectedRevision; errors are *kurrentdb.Error with the
//     same codes, plus ErrorCodeStreamRevisionConflict,
//     ErrorCodeStreamTombstoned and the append size codes, which the client
//     reads from rich gRPC error details (a conflict may come back under
//     either ErrorCodeWrongExpectedVersion or ErrorCodeStreamRevisionConflict;
//     the adapter reads both as a conflict).
//   - Caught up: the client reports CaughtUp and FellBehind with the
//     server's timestamp and position. From a server that sends no
//     timestamp (older ones, and the esdbtest double) it delivers a message
//     with every field nil and the kind lost; the $all and stream sources
//     here read such messages in turn as CaughtUp, then FellBehind, which
//     is the order servers send them in. (v4 reports both without detail.)
//   - A dropped subscription looks the same: SubscriptionDropped with the
//     raw gRPC error (v4 too), never a reconnect; the runner resubscribes
//     from its checkpoint. A closed subscription's Recv answers "subscription
//     has been dropped" at once. Once the client has closed itself, every
//     call fails with ErrorCodeConnectionClosed, even an error that came
//     back from the server (kurrentdb checks first), and the Client builds a
//     new one; the first error after discovery gave up carries the last
//     discovery error's code (often Unavailable), as in v4.
//   - Persistent groups: the client sends the consumer strategy by name to a
//     server of 21.10.1 or later, so it could create PinnedByCorrelation
//     groups (v4 panics on that strategy; on an older server this client
//     does likewise); subscription.NewPersistent takes the three strategies
//     both clients create, and refuses others with an error. Persistent Recv still panics on any message but an event
//     after the confirmation, and Close still half-closes the stream, racing
//     with an acknowledgement: the consumer here cancels the stream instead,
//     on either client.
//   - Extras this package does not use: MultiStreamAppend (the v2 protocol's
//     AppendSession, on servers that advertise it), Gossip, and version
//     checks (ServerVersion.IsAtLeast).
//   - Logging: both default to printing through the standard log package;
//     [Dial] routes the client's log to a *slog.Logger. (Parsing a
//     connection string with an unknown setting still prints a warning
//     through the standard logger, before Dial can route it; both clients.)
//
// Credentials are sent only over TLS, by both clients; tls=false sends
// none.
package kurrent
