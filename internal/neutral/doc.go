// Package neutral is the part of the event-store sources that depends on
// neither official client. Package
// [github.com/revgate/projector/subscription] builds the sources from it,
// over a [Driver] on an official client, which package internal/official
// implements once for both (package [github.com/revgate/projector/kurrent]
// gives it KurrentDB-Client-Go, package
// [github.com/revgate/projector/subscription/esdbv4] EventStore-Client-Go
// v4). Both clients speak the same v1 gRPC protocol and have the same
// shape, but their types are distinct, so what the sources decide lives
// here and in package subscription once, in types of their own, and the
// adapter converts at its edge:
//
//   - what a client must do for the sources ([Driver], [Session]) and what
//     it hands back ([Resolved], [Notice]);
//   - the options of a catch-up subscription to $all or to a stream
//     ([AllOptions], [StreamOptions]; package subscription aliases them) and the server-side filter they ask for
//     ([AllOptions.ServerFilter]);
//   - a connection that outlives an outage ([Conn]): both clients close
//     themselves for good once discovery fails, and a call queued at that
//     moment blocks for ever;
//   - the envelope of a recorded event ([Envelope]), with the handling of
//     links and of links to events that no longer exist;
//   - the loop of a catch-up subscription ([NewCatchUp]) over messages
//     package subscription has translated ([Message]);
//   - the consumer of a persistent subscription group ([NewConsumer]): how
//     it settles an event from the engine's results and its delivery count
//     ([ConsumerOptions.Decide]), and what it keeps of it ([Ledger]: its
//     counts and the documents left behind parked events);
//   - the check of a checkpoint against the log ([CheckAnchor]);
//   - the redaction of connection strings ([Redact]).
//
// A projector's user needs none of this directly: package subscription and
// the adapters' Dial are the API.
package neutral
