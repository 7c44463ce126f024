package esdbtest

import (
	"context"

	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/serverfeatures"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
)

// serverVersion is the EventStoreDB version the server claims to be.
const serverVersion = "23.10.0"

// Service names as the real server reports them.
const (
	serviceStreams    = "event_store.client.streams.streams"
	servicePersistent = "event_store.client.persistent_subscriptions.persistentsubscriptions"
	serviceFeatures   = "event_store.client.server_features.serverfeatures"
)

// featuresService answers the client's GetSupportedMethods at connection time.
type featuresService struct {
	serverfeatures.UnimplementedServerFeaturesServer
}

// GetSupportedMethods lists what this server implements. "create" with the
// feature "all" is what makes the client allow persistent subscriptions to
// $all; any of getinfo, list, replayparked or restartsubsystem makes it use
// gRPC rather than HTTP for all four.
func (featuresService) GetSupportedMethods(context.Context, *shared.Empty) (*serverfeatures.SupportedMethods, error) {
	m := func(service, method string, features ...string) *serverfeatures.SupportedMethod {
		return &serverfeatures.SupportedMethod{ServiceName: service, MethodName: method, Features: features}
	}
	return &serverfeatures.SupportedMethods{
		EventStoreServerVersion: serverVersion,
		Methods: []*serverfeatures.SupportedMethod{
			m(serviceStreams, "read"),
			m(serviceStreams, "append"),
			m(serviceStreams, "delete"),
			m(serviceStreams, "tombstone"),
			m(servicePersistent, "create", "stream", "all"),
			m(servicePersistent, "update", "stream", "all"),
			m(servicePersistent, "delete", "stream", "all"),
			m(servicePersistent, "read", "stream", "all"),
			m(servicePersistent, "getinfo", "stream", "all"),
			m(servicePersistent, "list", "stream", "all"),
			m(servicePersistent, "replayparked", "stream", "all"),
			m(servicePersistent, "restartsubsystem"),
			m(serviceFeatures, "getsupportedmethods"),
		},
	}, nil
}
