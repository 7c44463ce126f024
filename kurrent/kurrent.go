package kurrent

import (
	"log/slog"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/internal/official"
	"github.com/revgate/projector/subscription"
)

// Dial parses a connection string (kurrentdb://host:port?tls=false; the
// kurrent://, kdb:// and esdb:// schemes and their +discover forms are the
// same to the client) and returns a client. It does not connect: the first subscription does, and an
// unreachable server shows there, under the runner's reconnect policy. The
// official client's own log goes to logger (nil: discarded): its errors and
// warnings at warn level, the rest at debug.
func Dial(uri string, logger *slog.Logger) (*subscription.Client, error) {
	at := neutral.Endpoint{Package: "kurrent", Server: "KurrentDB"}
	cfg, err := kurrentdb.ParseConnectionString(uri)
	if err != nil {
		return nil, at.BadURI(uri, err)
	}
	cfg.Logger = neutral.ClientLog(neutral.OrDiscard(logger).With("component", "kurrentdb-client"))
	at = at.At(cfg.Address, cfg.DnsDiscover || len(cfg.GossipSeeds) > 0, !cfg.DisableTLS)
	open := func() (*kurrentdb.Client, error) { return kurrentdb.NewClient(cfg) }
	d, err := official.NewDriver(open, func(err error) neutral.ErrorKind { return neutral.KindOf[*kurrentdb.Error](err, kinds) }, names)
	if err != nil {
		return nil, err
	}
	return subscription.NewClient(uri, at, d), nil
}

// kinds are the error codes the sources tell apart. (ErrorCodeUnauthenticated
// is retried, as an error of no kind: a node answers it while it starts or
// elects a leader as well as for wrong credentials.)
var kinds = map[kurrentdb.ErrorCode]neutral.ErrorKind{
	kurrentdb.ErrorCodeConnectionClosed:      neutral.ErrClosed,
	kurrentdb.ErrorCodeAccessDenied:          neutral.ErrDenied,
	kurrentdb.ErrorCodeResourceNotFound:      neutral.ErrNotFound,
	kurrentdb.ErrorCodeStreamDeleted:         neutral.ErrDeleted,
	kurrentdb.ErrorCodeResourceAlreadyExists: neutral.ErrExists,
	kurrentdb.ErrorCodeWrongExpectedVersion:  neutral.ErrWrongRevision,
	kurrentdb.ErrorCodeStreamTombstoned:      neutral.ErrDeleted,
	// The v1 append answers a wrong expected revision in its result; a node
	// that reports it as a rich error detail instead gives this code.
	kurrentdb.ErrorCodeStreamRevisionConflict: neutral.ErrWrongRevision,
}

// names are what package kurrentdb declares that the adapter uses.
var names = official.Names{
	Start: kurrentdb.Start{}, End: kurrentdb.End{}, NoStream: kurrentdb.NoStream{}, Any: kurrentdb.Any{},
	Revision: kurrentdb.Revision, Backwards: kurrentdb.Backwards, ContentTypeJson: kurrentdb.ContentTypeJson,
	EventFilterType: kurrentdb.EventFilterType, StreamFilterType: kurrentdb.StreamFilterType,
	ExcludeSystemEventsFilter:   kurrentdb.ExcludeSystemEventsFilter,
	SubscriptionSettingsDefault: kurrentdb.SubscriptionSettingsDefault,
	PerEvent: official.PerEvent((*kurrentdb.ReadStream).Recv, (*kurrentdb.Subscription).Recv, (*kurrentdb.PersistentSubscription).Recv,
		(*kurrentdb.PersistentSubscription).Ack, (*kurrentdb.PersistentSubscription).Nack),
}
