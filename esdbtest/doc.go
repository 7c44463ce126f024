// Package esdbtest is an in-process test double of an EventStoreDB node: a gRPC
// server that emulates the subset of the EventStoreDB client protocol listed
// below, over an in-memory log, so that tests can drive the official Go client
// (github.com/EventStore/EventStore-Client-Go/v4, v4.2.0) against it and inject
// faults. It is a test double, not a database: there is no persistence (the log
// lives and dies with the [Server]), no ACLs or authentication, no projections
// (no $ce-, $et- or $by_category streams are built), no clustering and no
// scavenging.
//
// # What it speaks
//
// Streams service:
//   - Append with an expected revision (any, no stream, stream exists, an exact
//     revision). A mismatch is answered with WrongExpectedVersion, which the
//     client turns into an error with code ErrorCodeWrongExpectedVersion.
//     Re-appending events whose ids are already in the stream at the expected
//     place succeeds without writing them again (the server's idempotent write,
//     compared on event ids only).
//   - Read of a stream forwards or backwards from the start, the end or a
//     revision, with a count; a stream without events answers StreamNotFound.
//   - Read of $all forwards or backwards from the start, the end or a position.
//     Forwards from a position includes the event at that position, as the real
//     server does; backwards from a position starts with the event before it.
//   - resolveLinkTos: link events (type "$>", data "revision@stream") are
//     resolved to the event they point to; an unresolvable link is sent as the
//     event itself.
//   - Catch-up subscriptions to a stream (from the start, the end or after a
//     revision) and to $all (from the start, the end or after a position),
//     with a server-side filter on $all (stream-name or event-type prefixes, or
//     a regular expression in Go's RE2 syntax rather than .NET's). A
//     subscription is confirmed first, then replays history, sends CaughtUp when
//     it reaches the head, then delivers live appends in order.
//   - Checkpoints for filtered $all subscriptions: a Checkpoint carrying the
//     position of the last event scanned, every MaxSearchWindow x
//     CheckpointInterval scanned events (filtered in or out; a "count" window
//     counts as 1), and also each time the subscription reaches the head if
//     events were scanned since the last checkpoint, so the checkpoint of a
//     quiet filter still advances. Unfiltered subscriptions get no checkpoints.
//   - Events of streams whose name begins with "$" get no special treatment:
//     they are in $all like any other event and a filter keeps or drops them by
//     its own rule (an unfiltered $all subscription sees them).
//
// Persistent subscriptions service:
//   - Create, Update, Delete, GetInfo, List, ReplayParked and RestartSubsystem,
//     to a stream or to $all (with a filter). Because GetSupportedMethods
//     advertises them, the client uses gRPC for all of these and never its HTTP
//     fallback (which this server does not serve).
//   - Read (SubscribeToPersistentSubscription and ...ToAll): consumer strategies
//     RoundRobin, DispatchToSingle and Pinned (the stream id of the resolved
//     event hashed with FNV-1a into 1024 buckets, a bucket going to connected
//     consumer number bucket modulo their count), at most BufferSize
//     messages in flight per consumer, Ack, Nack with Park, Retry, Skip and Stop
//     (Unknown is Retry), the message timeout, MaxRetryCount (a message
//     redelivered more often is parked with the reason "max retry count
//     exceeded") and MaxSubscriberCount. Each redelivery (nack retry, timeout,
//     or the consumer it was sent to going away) adds one to RetryCount.
//   - Parked messages are written as link events to the stream
//     "$persistentsubscription-<stream>::<group>-parked" ("$all" as the stream
//     for groups on $all), with a JSON metadata carrying the reason, and listed
//     with their reason by [Server.Parked].
//   - Start: from the start, the end (resolved when the group is created), or
//     revision/position n, which is delivered (inclusive, as the real server
//     does for a revision). The group keeps a checkpoint, the last event up to
//     which everything was acked, skipped or parked. Groups live in the server's
//     memory, so a consumer that reconnects continues where the group is: acked
//     events are not sent again, unacked ones are redelivered. Update and
//     RestartSubsystem drop the group's consumers and restart it after its
//     checkpoint (or from the new start if it has none).
//
// Server features: GetSupportedMethods lists the methods above, including
// persistent subscriptions to $all. Gossip is not served: the client does not
// ask for it with a single-host esdb:// URI, only with gossip seeds or
// esdb+discover. Not supported at all: DeleteStream, TombstoneStream,
// BatchAppend (the client does not use it), stream metadata semantics (a
// SetStreamMetadata append is stored as a plain event in "$$stream", with no
// effect on $maxAge, $maxCount or $tb), projections, users, operations and
// monitoring.
//
// # Concurrency and slow subscribers
//
// Everything is safe for concurrent use. Appends never wait for subscribers:
// a catch-up subscription reads the in-memory log at its own pace and is woken
// by a broadcast channel when the log grows, so a slow subscriber lags but is
// never dropped (there is no FellBehind). A persistent consumer has its own
// unbounded send queue fed by the group's dispatcher; the number of messages in
// it is bounded by the consumer's BufferSize (times two with duplicate
// deliveries). A subscription whose client stops reading while gRPC flow
// control is full ends when its client reads again or goes away.
//
// # Faults
//
// [Server.DropSubscriptions] ends every subscription with codes.Unavailable;
// [Server.Refuse] does that and answers every call with codes.Unavailable for a
// while; [Server.DuplicateDeliveries] sends events twice at a seeded random
// rate. [Server.URI] carries discovery settings that let a client survive a
// refusal of up to about ten seconds (see its documentation).
//
// # Client pitfalls this server is shaped around (v4.2.0)
//
// The client log.Fatalf's on an event without the "created" metadata (.NET
// ticks of 100 ns since the Unix epoch, as a decimal string; the client reads
// it with time.Unix(0, ticks*100), so this server sends ticks since 1970, not
// since year 1, which would overflow), panics on any message other than an
// event or StreamNotFound in a plain read and on anything but an event after a
// persistent subscription's confirmation, and expects a confirmation as the
// first message of every subscription. The client pings every 10 s even when
// idle; the server's keepalive enforcement policy permits it (with gRPC's
// default policy an idle subscription gets GOAWAY too_many_pings after about
// 30 s). PersistentSubscription.Close calls CloseSend, which races with an Ack
// or Nack sent from another goroutine: end a consumer goroutine by cancelling
// its subscription's context, and Close it from that goroutine or afterwards.
package esdbtest
