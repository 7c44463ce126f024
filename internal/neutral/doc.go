// Package neutral is the part of the event-store sources that depends on
// neither official client: package [github.com/revgate/projector/subscription]
// builds them on EventStore-Client-Go v4 (esdb), package
// [github.com/revgate/projector/kurrent] on KurrentDB-Client-Go (kurrentdb).
// Both clients speak the same v1 gRPC protocol and have the same shape, but
// their types are distinct, so what the sources decide lives here once, in
// types of its own, and each source package converts at its edge:
//
//   - the options of a catch-up subscription to $all or to a stream
//     ([AllOptions], [StreamOptions]; both packages alias them, so that one
//     value configures either) and the server-side filter they ask for
//     ([AllOptions.ServerFilter]);
//   - a connection that outlives an outage ([Conn]): both clients close
//     themselves for good once discovery fails, and a call queued at that
//     moment blocks for ever;
//   - the envelope of a recorded event ([Envelope]), with the handling of
//     links and of links to events that no longer exist;
//   - the loop of a catch-up subscription ([NewCatchUp]) over messages a
//     client adapter has translated ([Message]);
//   - the consumer of a persistent subscription group ([NewConsumer]): how
//     it settles an event from the engine's results and its delivery count
//     ([ConsumerOptions.Decide]), and what it keeps of it ([Ledger]: its
//     counts and the documents left behind parked events);
//   - the check of a checkpoint against the log ([CheckAnchor]);
//   - the redaction of connection strings ([Redact]).
//
// A projector's user needs none of this directly: the source packages are
// the API.
package neutral
