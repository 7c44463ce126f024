package kurrent_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/projector"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Main(m)) }

// The acceptance suite of the sources, on KurrentDB-Client-Go against the
// esdbtest double, addressed with the kurrentdb:// scheme.
func TestSources_on_KurrentDB_Client_Go(t *testing.T) { sourcetest.Run(t, kit) }

// kit is what the acceptance suite needs of this package. The double's
// esdb:// URIs are dialed as kurrentdb://, the scheme this client adds.
var kit = sourcetest.Kit{
	Name: "KurrentDB-Client-Go v1.1.2",
	Dial: func(uri string) (sourcetest.Client, error) {
		c, err := kurrent.Dial(kurrentScheme(uri), nil)
		if err != nil {
			return nil, err
		}
		return client{c}, nil
	},
}

// kurrentScheme rewrites an esdb:// connection string as kurrentdb://.
func kurrentScheme(uri string) string {
	if rest, ok := strings.CutPrefix(uri, "esdb://"); ok {
		return "kurrentdb://" + rest
	}
	return uri
}

// client is a kurrent.Client as the suite uses it.
type client struct{ *kurrent.Client }

func (c client) All(o neutral.AllOptions) (sourcetest.AllSource, error) {
	src, err := kurrent.NewAll(c.Client, o)
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (c client) Stream(stream string, o neutral.StreamOptions) (projector.OrderedSource, error) {
	src, err := kurrent.NewStream(c.Client, stream, o)
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (c client) Persistent(g sourcetest.Group) (sourcetest.PersistentSource, error) {
	settings := kurrentdb.SubscriptionSettingsDefault()
	settings.ResolveLinkTos = g.ResolveLinks
	settings.StartFrom = kurrentdb.Start{}
	settings.ConsumerStrategyName = kurrentdb.ConsumerStrategyRoundRobin
	src, err := kurrent.NewPersistent(c.Client, kurrent.PersistentOptions{
		Stream: kurrent.AllStreams, Group: g.Name, BufferSize: g.BufferSize,
		CreateAll: &kurrentdb.PersistentAllSubscriptionOptions{
			Settings: &settings, StartFrom: kurrentdb.Start{},
			Filter: &kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: g.StreamPrefixes},
		},
	})
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (c client) Append(ctx context.Context, stream string, expected int64, events ...sourcetest.Event) (uint64, error) {
	var want kurrentdb.StreamState
	switch expected {
	case sourcetest.NoStream:
		want = kurrentdb.NoStream{}
	case sourcetest.AnyRevision:
		want = kurrentdb.Any{}
	default:
		if expected < 0 {
			return 0, errors.New("append: bad expected revision")
		}
		want = kurrentdb.Revision(uint64(expected))
	}
	data := make([]kurrentdb.EventData, len(events))
	for i, e := range events {
		data[i] = kurrentdb.EventData{EventID: e.ID, EventType: e.Type, ContentType: kurrentdb.ContentTypeJson, Data: e.Data, Metadata: e.Metadata}
	}
	var position uint64
	err := c.Do(ctx, func(cl *kurrentdb.Client) error {
		r, err := cl.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{StreamState: want}, data...)
		if err == nil {
			position = r.CommitPosition
		}
		return err
	})
	return position, err
}
