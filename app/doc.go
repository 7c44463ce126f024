// Package app turns your projections into the projector command line: a
// main function hands it the projections and the event registry, and gets
// the commands run, status, rebuild, replay-parked and version, every flag
// with its PROJECTOR_<FLAG> environment variable, /metrics, /healthz and
// /readyz, graceful shutdown on SIGINT and SIGTERM, structured logs, and
// (opted into with package embedmongo) an embedded Mongo-wire server when
// --mongo is not given.
//
//	func main() {
//		app.Main(app.Config{
//			Name:     "library-projector",
//			Registry: lending.Registry(),
//			Dial:     kurrent.Dial, // the event store's client
//			Projections: []app.Projection{
//				{Definition: lending.NewLoans(), Reads: app.StreamPrefix("loan/")},
//				{Definition: lending.NewMembers(), Reads: app.StreamPrefix("loan/"), Workers: 2},
//			},
//			Embedded: embedmongo.Start, // optional: run without --mongo
//		})
//	}
//
// Each [Projection] carries its definition (state, handlers, idempotency
// strategy and failure policy, from package projector), what its
// subscription reads ([StreamPrefix], [Category], [StreamRegex],
// [EventTypes]: a server-side filter on $all), and the runner settings it
// wants; the flags --workers, --batch and --on-failure give the defaults a
// projection does not set.
//
// [Config.Dial] names the official client the binary reads the event store
// through, and so the one it links, as a database/sql driver is linked by
// its import: kurrent.Dial (package github.com/revgate/projector/kurrent,
// KurrentDB-Client-Go, which reads esdb:// and kurrentdb:// connection
// strings alike), or esdbv4.Dial (package
// github.com/revgate/projector/subscription/esdbv4, the archived
// EventStore-Client-Go v4, esdb:// only). This package imports neither.
//
// The catalog is checked before any command connects to anything: no
// Config.Dial, two
// projections with one name or collection, a projection without handlers, a
// handler of an event type the registry does not know, a filter the server
// cannot take or that the projection's strategy cannot keep, or an unknown
// name in --projections print one line and exit with status 2. A command
// that fails while running exits with 1.
//
// Only [Main] reads the process's arguments, environment and signals, and
// exits; [Config.Run] does the same work for a test or another front end,
// with the arguments, environment and output it is given (package
// projectortest/e2e runs it in a test). Commands of your own
// ([Config.Commands]) get the same [Invocation]: flags, variables, output.
//
// examples/library in the projector's repository is a complete binary of
// this kind, with its tests.
//
// # Tracing
//
// Every command traces with OpenTelemetry when the standard OTEL_*
// variables ask it to, and not otherwise: OTEL_TRACES_EXPORTER=otlp (or
// console), or an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT), turns it on;
// OTEL_SDK_DISABLED=true turns it off. The SDK is set up here, as the
// global tracer provider that the engine's spans go to; a bad value is one
// line and exit status 2. docs/tracing.md lists the spans
// and their attributes.
//
// A binary built with this package links no test double: neither the
// EventStoreDB-protocol test server (package esdbtest), nor projectortest,
// nor package testing; and of the two official clients, only the one its
// Config.Dial names.
package app
