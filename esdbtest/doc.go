// Package esdbtest is an in-process test double of an EventStoreDB node: a gRPC
// server that emulates the subset of the EventStoreDB client protocol listed
// below, over an in-memory log, so that tests can drive the official Go clients
// against it and inject faults. It is a test double, not a database: there is
// no persistence (the log lives and dies with the [Server]) and no clustering.
//
// The server is built on the protocol code of KurrentDB-Client-Go
// (github.com/kurrent-io/KurrentDB-Client-Go v1.1.2, its v1 protocol), and
// [Server.Client] is that client: a test that imports this package links one
// official client. EventStore-Client-Go v4 (v4.2.0) speaks the same protocol
// and runs against the server too, but its generated code registers the same
// protobuf names as KurrentDB-Client-Go's, so a binary that links both
// (this package and v4's client, as the tests of
// github.com/revgate/projector/subscription/esdbv4 do) must be built with
// -ldflags=-X=google.golang.org/protobuf/reflect/protoregistry.conflictPolicy=ignore
// (the Makefile's test target does), or it panics as it starts.
//
// It behaves as an EventStoreDB 23.10 node, the version it reports. Each
// behaviour below names where the node does it: a file and function of the
// node's source, github.com/kurrent-io/KurrentDB (formerly EventStore/EventStore)
// at tag oss-v23.10.0, "Core/" standing for src/EventStore.Core/ and
// "Projections/" for src/EventStore.Projections.Core/; or a page of its
// documentation, docs/ at that tag. Where newer nodes (KurrentDB 24.x and
// later) differ, the section "Newer nodes" says how.
//
// # Appends
//
//   - Append with an expected revision (any, no stream, stream exists, an exact
//     revision), checked as Core/Services/Storage/ReaderIndex/IndexWriter.cs
//     CheckCommit does. A mismatch is answered with WrongExpectedVersion,
//     which the client turns into ErrorCodeWrongExpectedVersion.
//     Re-appending events whose ids are already in the stream at the expected
//     place succeeds without writing them again (the node's idempotent
//     write, compared on event ids only).
//   - An append to a tombstoned stream, whatever its expected revision, is
//     refused with StreamDeleted (status FailedPrecondition, trailer
//     exception=stream-deleted), which the client turns into
//     ErrorCodeStreamDeleted. For soft-deleted streams see "Deleting
//     streams".
//   - The append size limit (Core/Services/Transport/Grpc/Streams.Append.cs,
//     Append): the event data of one append may total [Options.MaxAppendSize]
//     bytes, 1,048,576 by default (the node's MaxAppendSize option). Over it
//     the append is refused, nothing written, with InvalidArgument "Maximum
//     Append Size of 1048576 Exceeded." (trailer
//     exception=maximum-append-size-exceeded), which the client has no code
//     for: ErrorCodeUnknown wrapping that status. Only the data counts:
//     Core/Data/Event.cs SizeOnDisk reads
//     "data?.Length ?? 0 + metadata?.Length ?? 0 + eventType.Length * 2", which
//     C# parses as the data's length alone. The node answers as soon as the
//     total is over while the client is still sending, so a real client may
//     get io.EOF from a Send instead (ErrorCodeUnknown too); this server reads
//     the whole append first so that the client gets the status.
//
// # Reads
//
//   - Read of a stream forwards or backwards from the start, the end or a
//     revision, with a count, as Core/Services/Storage/ReaderIndex/IndexReader.cs
//     ReadStreamEventsForwardInternal and ReadStreamEventsBackwardInternal read
//     it: a stream without events, or soft-deleted, answers StreamNotFound
//     (ErrorCodeResourceNotFound); a tombstoned one StreamDeleted
//     (ErrorCodeStreamDeleted); otherwise the read sees the events its
//     metadata leaves (see "Stream metadata"), which may be none (an empty
//     read, not StreamNotFound).
//   - Read of $all forwards or backwards from the start, the end or a position.
//     Forwards from a position includes the event at that position, as the real
//     server does; backwards from a position starts with the event before it.
//     $all does not apply stream metadata: it has every event until
//     [Server.Scavenge], deleted and truncated ones, soft-delete metadata and
//     tombstones included (docs/streams.md, "Deleting streams and events").
//     It leaves out the streams the node's
//     Core/Services/Storage/ReaderIndex/EventFilter.cs DefaultAllFilter
//     leaves out: "$epoch-information" and the checkpoint and parked-message
//     streams of persistent subscriptions to $all
//     ("$persistentsubscription-$all::<group>-parked"); reads, subscriptions,
//     filters and groups on $all do not see them.
//   - resolveLinkTos (Core/Services/Storage/StorageReaderWorker.cs
//     ResolveLinkToEvent): a link event (type "$>", data "revision@stream")
//     is sent with the event it points to, read as a read of that stream
//     would read it (IndexReader.cs ReadEventInternal). A dangling link, one
//     whose event does not read (its stream tombstoned, soft-deleted or
//     missing, the event truncated by $tb, $maxCount or $maxAge, or
//     scavenged), is sent as the link with no event: the clients give
//     ResolvedEvent{Event: nil, Link: the link}, and OriginalEvent() is the
//     link. A link whose revision does not parse is sent as an event, with
//     no link.
//
// # Catch-up subscriptions
//
//   - To a stream (from the start, the end or after a revision) and to $all
//     (from the start, the end or after a position), with a server-side
//     filter on $all (stream-name or event-type prefixes, or a regular
//     expression in Go's RE2 syntax rather than .NET's). A subscription is
//     confirmed first, then replays history, sends CaughtUp when it reaches
//     the head, then delivers live appends in order.
//   - To a stream (Core/Services/Transport/Grpc/Enumerators.StreamSubscription.cs):
//     the history is read as a read reads it (its metadata applies); live
//     events are sent as they are written, whatever the metadata says
//     (Core/Services/SubscriptionsService.cs ProcessEventCommited). A stream
//     tombstoned before the subscription is refused before the confirmation
//     with StreamDeleted, so SubscribeToStream returns ErrorCodeStreamDeleted
//     (from the end it is live only: CaughtUp, then nothing). A stream
//     tombstoned while live sends the tombstone ("$streamDeleted" at revision
//     9223372036854775807), then ends with StreamDeleted: the client's Recv
//     gives SubscriptionDropped with the raw status (FailedPrecondition
//     "Event stream '<name>' is deleted."). A stream without events, or
//     soft-deleted, sends CaughtUp at once and then its new events; 23.10
//     instead sends nothing, not even CaughtUp, until the stream has events
//     (it polls), and newer nodes do what this server does (this server kept
//     it: other packages rely on CaughtUp).
//   - Checkpoints of filtered $all subscriptions, exactly as 23.10's
//     Core/Services/Transport/Grpc/Enumerators.AllSubscriptionFiltered.cs
//     CatchUp and GoLive and SubscriptionsService.ProcessEventCommited send
//     them. The catch-up reads pages: a page scans events until 32 of them
//     pass the filter or it has scanned the filter's max search window (a
//     "count" window, the client's NoMaxSearchWindow, is 32), or the log
//     ends (Core/Services/Storage/ReaderIndex/AllReader.cs
//     ReadAllEventsForwardInternal). Every event scanned counts, kept or not.
//     After a page that does not end the log, when the count reaches window x
//     CheckpointInterval, a checkpoint goes out, at the last event of the
//     page that passed the filter or, if none did, where the page started
//     (the position of the last event of the page before; 0 for the first
//     page from the start), and the count keeps the remainder. The page that
//     reaches the end sends no checkpoint: the subscription sends CaughtUp
//     and goes live with the count as it is. Live, every event written
//     counts; when the count reaches window x CheckpointInterval, a
//     checkpoint at that event's position goes out (after the event, if it
//     passes) and the count restarts at 0. So a quiet filter's checkpoint
//     is not at the head when the subscription catches up; it moves on
//     after window x CheckpointInterval further events. From the end the
//     subscription is live at once with a count of 0. Unfiltered
//     subscriptions get no checkpoints. (The node writes events of its own,
//     which count too; this server writes none but those named here.)
//   - Events of streams whose name begins with "$" are in $all like any other
//     (but for those DefaultAllFilter leaves out) and a filter keeps or
//     drops them by its own rule.
//
// # Stream metadata
//
// An event appended to "$$<stream>" sets the stream's metadata, as
// SetStreamMetadata does, and GetStreamMetadata reads it back: the last event
// of the metadata stream counts if its content type is JSON, whatever its type
// (IndexReader.cs GetStreamMetadataUncached), parsed as
// Core/Data/StreamMetadata.cs FromJsonReader does: an object whose $maxCount,
// $maxAge (seconds) and $tb are JSON integers that fit in an int64; anything
// else malformed, a bad $acl included, makes the whole metadata empty, and
// $maxCount <= 0, $maxAge <= 0 and $tb < 0 are ignored one by one. A metadata
// stream keeps only its last event (its own metadata is fixed at $maxCount 1,
// ESConsts.MetaStreamMaxCount), which is how GetStreamMetadata, a read of
// "$$<stream>" forwards from the start, gets the latest. A read of the stream,
// forwards and backwards, and the history of a catch-up subscription to it,
// see the events from the higher of $tb and (last revision - $maxCount + 1),
// without those older than $maxAge (by [Options.Now]) (IndexReader.cs
// ReadStreamEventsForwardInternal, ForStreamWithMaxAge). $all and
// subscriptions to it still see them all until [Server.Scavenge]
// (docs/streams.md, "Deleting streams and events": "$all bypasses the index").
// The $acl of the metadata applies under [Options.Users].
//
// # Deleting streams
//
// DeleteStream soft-deletes (Core/Services/Storage/StorageWriterService.cs,
// IHandle<StorageMessage.WriteDelete>.Handle): it checks its expected revision
// as an append of one event would, refuses a stream with neither events nor
// metadata (WrongExpectedVersion, current -1), and writes to "$$<stream>" a
// "$metadata" event {"$tb":9223372036854775807} (long.MaxValue), which
// replaces the stream's metadata; its position is the one DeleteStream returns.
// A read then answers StreamNotFound; $all keeps the events and shows the
// metadata event; GetStreamMetadata shows the $tb (the clients parse it
// through a float64: 9223372036854775808). An append to the soft-deleted
// stream with Any, NoStream, or the revision of its last event continues its
// revisions (last + 1, ...) and the node then writes "$$<stream>" metadata, the
// old metadata with $tb set to the first new revision ({"$tb":3} after revisions
// 0-2), which hides the old events (StorageWriterService.cs SoftUndeleteStream;
// IndexWriter.cs CheckCommit lets NoStream through for a soft-deleted stream).
// An expected revision other than the last is WrongExpectedVersion with the
// last as the current revision; StreamExists is StreamDeleted. Metadata written
// to a soft-deleted stream recreates it the same way (SoftUndeleteMetastream):
// the new metadata with $tb = last + 1. Deleting again works with Any, and is
// StreamDeleted with StreamExists.
//
// TombstoneStream (the same Handle, hard delete) checks its expected revision
// the same way (a stream that never existed may be tombstoned with Any or
// NoStream) and writes a "$streamDeleted" event with empty data and metadata,
// content type application/octet-stream, at revision 9223372036854775807
// (EventNumber.DeletedStream), in the stream and in $all. Reads of the stream
// and of its metadata stream then answer StreamDeleted, and so do appends,
// SetStreamMetadata, DeleteStream and TombstoneStream, whatever their expected
// revision. Subscriptions: see "Catch-up subscriptions".
//
// Delete and Tombstone answer a wrong expected revision with the status
// FailedPrecondition "Delete failed due to WrongExpectedVersion. Stream: <name>,
// Expected version: <n>, Actual version: <n>" (-2 any, -1 no stream, -4 stream
// exists), for which the clients have no code: ErrorCodeUnknown
// (Core/Services/Transport/Grpc/Streams.Delete.cs DeleteInternal,
// RpcExceptions.WrongExpectedVersion).
//
// # Scavenging
//
// [Server.Scavenge] removes from the log what a node's scavenge removes
// (Core/TransactionLog/Scavenging/Stages/EventCalculator.cs DecideEvent,
// Accumulator.cs ProcessMetastreamRecord and ProcessTombstone): it keeps the
// last event of every stream and removes before it every event of a tombstoned
// stream (the tombstone stays), the events before $tb (all but the last for a
// soft-deleted stream), beyond the last $maxCount and older than $maxAge; of a
// metadata stream all but its last event, all of them when its stream is
// tombstoned. Afterwards $all reads and catch-ups no longer see them; stream
// reads do not change. A node measures $maxAge by each chunk's time range, so
// it may keep a few more events than this server.
//
// # System projections
//
// With [Options.SystemProjections] the server keeps the streams of a node's
// $by_category and $by_event_type projections (docs/projections.md, "System
// projections"), writing their links right after the events they link to (a
// node writes them a little later, from its own reading of $all; the order of
// the two projections' writes is not defined there):
//   - Projections/Standard/CategorizeEventsByStreamPath.cs (source
//     "first\r\n-", as ProjectionManager.cs creates it): an event of a stream
//     "<category>-..." is linked from "$ce-<category>": a "$>" event, content
//     type application/octet-stream, data "<revision>@<stream>" (a link event
//     is linked to its own target). Streams whose name starts with "$" are not
//     read, except "$$<stream>" metadata streams
//     (Projections/Services/Processing/TransactionFileEventFilter.cs
//     PassesSource); a soft delete's metadata event and a tombstone are
//     categorized by the stream they delete (the metadata event linked as
//     "<n>@$$<stream>", the tombstone as "9223372036854775807@<stream>").
//   - Projections/Standard/IndexEventsByEventType.cs: every event but links
//     is linked from "$et-<type>"; a soft delete's metadata and a tombstone
//     from "$et-$deleted"; for an event of "$$<stream>" the link names
//     <stream>, not the metadata stream ("<n>@<stream>"), as the node's does.
//   - The link's metadata is the source event's checkpoint tag
//     (Projections/Services/Processing/CheckpointTag.cs WriteTo,
//     EmittedStream.cs MetadataWithCausedByAndCorrelationId):
//     {"$v":"3:-1:1:4","$c":<position>,"$p":<position>,"$o":"<stream>","$causedBy":"<event id>"}
//     for $by_category ("$o" from EmittedLinkToWithRecategorization.cs), and
//     {"$v":"4:-1:1:4","$c":...,"$p":...,"$causedBy":...} for $by_event_type,
//     with "$deleted":-1 before "$causedBy" for deletions and a
//     "$correlationId" after it when the event's JSON metadata has one. "$v"
//     is projection id:epoch:version:subsystem version as a new node numbers
//     them.
//   - Before its first link to a stream, a projection writes its metadata,
//     {"$acl":{"$r":"$all","$mr":"$all"}} to "$$$ce-cart" (EmittedStream.cs
//     SubmitWriteMetadata): every user may read the projections' streams.
//
// Not kept: $streams, $stream_by_category, $by_correlation_id, user
// projections, and the projections' own checkpoint and state streams ("$et"
// and others).
//
// # Authentication
//
// With [Options.Users] the server is a secure node: it serves TLS (a
// self-signed certificate; the client sends credentials only over TLS) and
// authenticates calls as the node's
// Core/Services/Transport/Http/AuthenticationMiddleware.cs HandleAsGrpcAsync
// with BasicHttpAuthenticationProvider and AnonymousHttpAuthenticationProvider
// does: a call whose "authorization" header is "Basic user:password" of no
// user is refused with the status Unauthenticated "Unauthenticated", which the
// client turns into ErrorCodeUnauthenticated; a call without one runs as the
// anonymous user. Then the node's default policy applies
// (Core/Authorization/LegacyAuthorizationProviderFactory.cs Build, with
// AllowAnonymousStreamAccess off, its default, and
// LegacyStreamPermissionAssertion.cs): a refusal is the status PermissionDenied
// "Access Denied" (trailer exception=access-denied), ErrorCodeAccessDenied.
//   - Streams (read, append, delete, tombstone): an authenticated user whose
//     name or group is in the stream's ACL for the action, or an admin (the
//     user "admin" or a member of $admins). The ACL is the $acl of the
//     stream's metadata, else the default (Core/Data/SystemSettings.cs
//     Default): every user ($all) for a stream, $admins for a system stream
//     (name starting with "$"), $all included: reading $all, by a read or a
//     subscription, needs an admin; $ops is not enough (docs/security.md,
//     "Default users"). Reading or writing "$$<stream>" is reading or writing
//     <stream>'s metadata ($mr, $mw). $all cannot be written or deleted.
//     $settings (a node-wide default ACL) is not supported.
//   - Persistent subscriptions: Create, Update, Delete, ReplayParked and
//     RestartSubsystem need an admin or an operator (the user "ops" or a
//     member of $ops); GetInfo and List an authenticated user; connecting to a
//     group a user who may read its stream ($all: an admin).
//   - [DefaultUsers] returns a new node's users: admin in $admins and ops in
//     $ops, both with the password "changeit".
//
// Without [Options.Users] the server is an insecure node: no TLS, no
// authentication, no ACLs, as a node started with --insecure
// (docs/security.md, "Running without security").
//
// # Persistent subscriptions service
//
//   - Create, Update, Delete, GetInfo, List, ReplayParked and RestartSubsystem,
//     to a stream or to $all (with a filter). Because GetSupportedMethods
//     advertises them, the client uses gRPC for all of these and never its HTTP
//     fallback (which this server does not serve).
//   - Read (SubscribeToPersistentSubscription and ...ToAll): consumer strategies
//     RoundRobin, DispatchToSingle and Pinned (the stream id of the resolved
//     event, or for a dangling link the stream named in its data, hashed with
//     FNV-1a into 1024 buckets, a bucket going to connected consumer number
//     bucket modulo their count), at most BufferSize
//     messages in flight per consumer, Ack, Nack with Park, Retry, Skip and Stop
//     (Unknown is Retry), the message timeout, MaxRetryCount (a message
//     redelivered more often is parked with the reason "max retry count
//     exceeded") and MaxSubscriberCount. Each redelivery (nack retry, timeout,
//     or the consumer it was sent to going away) adds one to RetryCount.
//   - Parked messages are written as link events to the stream
//     "$persistentsubscription-<stream>::<group>-parked" ("$all" as the stream
//     for groups on $all), with a JSON metadata carrying the reason, and listed
//     with their reason by [Server.Parked]. A dangling link is parked as its
//     own data.
//   - Start: from the start, the end (resolved when the group is created), or
//     revision/position n, which is delivered (inclusive, as the real server
//     does for a revision). The group keeps a checkpoint, the last event up to
//     which everything was acked, skipped or parked. Groups live in the server's
//     memory, so a consumer that reconnects continues where the group is: acked
//     events are not sent again, unacked ones are redelivered. Update and
//     RestartSubsystem drop the group's consumers and restart it after its
//     checkpoint (or from the new start if it has none).
//   - Groups on a stream do not apply its metadata or deletion: they deliver
//     every event written to it, and never its tombstone. Groups on $all skip
//     what a scavenge removed.
//
// Server features: GetSupportedMethods lists the methods above, Delete and
// Tombstone included, and persistent subscriptions to $all. Gossip is not
// served: the client does not ask for it with a single-host esdb:// URI, only
// with gossip seeds or esdb+discover. Not supported at all: BatchAppend (the
// client does not use it), the projections, users, operations and monitoring
// services.
//
// # Newer nodes
//
// KurrentDB 24.2 and later (Core/Services/Transport/Enumerators/
// Enumerator.AllSubscriptionFiltered.cs in the repository's main branch) send
// filtered $all subscriptions a checkpoint when they catch up: at the last event
// sent or (24.10.14, 25.1 and later) the start of the last page, which is not
// the head either; their live checkpoints count the events written since the
// subscription started, catch-up included, from 0. 25.0 and later count an
// append's size as data + metadata + 2 x the event type's length. 24.2 and
// later confirm a subscription to a tombstoned stream and then end it with
// StreamDeleted (SubscribeToStream succeeds, the first Recv is the drop), and
// send CaughtUp for a stream without events, as this server does.
//
// # Concurrency and slow subscribers
//
// Everything is safe for concurrent use. Appends never wait for subscribers:
// a catch-up subscription reads the in-memory log at its own pace and is woken
// by a broadcast channel when the log grows, so a slow subscriber lags but is
// never dropped (there is no FellBehind). A subscription that is live sends
// every event written since, even one a later scavenge removes, as a node
// pushes events when they are written. A persistent consumer has its own
// unbounded send queue fed by the group's dispatcher; the number of messages in
// it is bounded by the consumer's BufferSize (times two with duplicate
// deliveries). A subscription whose client stops reading while gRPC flow
// control is full ends when its client reads again or goes away.
//
// An event's Streams.Read message is encoded the first time it is sent and
// kept with the event, so that the many reads of a test or a benchmark cost
// the server a copy each, not an encoding (the server shares its machine with
// the client it serves; a node does not): the log takes about twice the
// memory of its events once they have been read (three times, for events
// read with both forms of ids). A resolved link is encoded for each read.
//
// # Faults
//
// [Server.DropSubscriptions] ends every subscription with codes.Unavailable;
// [Server.Refuse] does that and answers every call with codes.Unavailable for a
// while; [Server.DuplicateDeliveries] sends events twice at a seeded random
// rate. [Server.URI] carries discovery settings that let a client survive a
// refusal of up to about ten seconds (see its documentation). [Options.Now]
// moves the server's clock, for $maxAge.
//
// # Client pitfalls this server is shaped around (v4.2.0; KurrentDB-Client-Go v1.1.2 alike)
//
// The clients carry the same code for what follows. The client log.Fatalf's on an event without the "created" metadata (.NET
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
// A dangling link comes with a nil Event: code that reads e.Event without
// checking panics on it. The client sends credentials only with tls=true.
// KurrentDB-Client-Go delivers CaughtUp, which this server sends without a
// timestamp as 23.10 does, as a message with every field nil (v4 as
// CaughtUp).
package esdbtest
