// Package coexist lets the two official clients live in one binary.
//
// EventStore-Client-Go v4 and KurrentDB-Client-Go generate their protocol
// code from the same .proto files, so both register the same protobuf names
// (event_store.client.streams.ReadReq, event_store.client.BadRequest, ...)
// in the protobuf runtime's global registry. Under the runtime's default
// policy the second registration panics while the program initializes,
// before main or TestMain can do anything: a binary that links both clients
// (one that imports package app, which dials either by the connection
// string's scheme; the tests of
// package kurrent, which run the KurrentDB client against the esdbtest
// double built on v4's protocol code) would not start.
//
// Importing this package (the adapter packages do) sets
// GOLANG_PROTOBUF_REGISTRATION_CONFLICT=ignore, unless the environment
// already sets it, before any protobuf file registers: Go initializes
// packages in import-path order among those ready, this package needs only
// os, and its path sorts before google.golang.org/protobuf, which every
// registration needs. The second client's descriptors then stay out of the
// global registry; each client still encodes and decodes its messages with
// its own generated code, and neither looks these names up in the registry
// (the KurrentDB client reads rich error details of its v2 protocol, whose
// names do not clash). The variable is part of the protobuf runtime's
// documented escape hatch, though outside its compatibility promise; the
// linker flag -X google.golang.org/protobuf/reflect/protoregistry.conflictPolicy=ignore
// does the same at build time.
package coexist

import "os"

// Env is the protobuf runtime's variable for its registration conflict
// policy.
const Env = "GOLANG_PROTOBUF_REGISTRATION_CONFLICT"

// Set says whether this package set [Env] (false: the environment had it).
var Set bool

func init() {
	if _, ok := os.LookupEnv(Env); !ok {
		Set = os.Setenv(Env, "ignore") == nil
	}
}
