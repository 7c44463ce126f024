package subscription_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Main(m)) }

// kit is what the acceptance suite needs of this package.
var kit = sourcetest.Kit{
	Name: "EventStore-Client-Go v4",
	Dial: func(uri string) (sourcetest.Client, error) {
		c, err := subscription.Dial(uri, nil)
		if err != nil {
			return nil, err
		}
		return client{c}, nil
	},
}

// client is a subscription.Client as the suite uses it.
type client struct{ *subscription.Client }

func (c client) All(o neutral.AllOptions) (sourcetest.AllSource, error) {
	src, err := subscription.NewAll(c.Client, o)
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (c client) Stream(stream string, o neutral.StreamOptions) (projector.OrderedSource, error) {
	src, err := subscription.NewStream(c.Client, stream, o)
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (c client) Persistent(g sourcetest.Group) (sourcetest.PersistentSource, error) {
	settings := esdb.SubscriptionSettingsDefault()
	settings.ResolveLinkTos = g.ResolveLinks
	settings.StartFrom = esdb.Start{}
	settings.ConsumerStrategyName = esdb.ConsumerStrategyRoundRobin
	src, err := subscription.NewPersistent(c.Client, subscription.PersistentOptions{
		Stream: subscription.AllStreams, Group: g.Name, BufferSize: g.BufferSize,
		CreateAll: &esdb.PersistentAllSubscriptionOptions{
			Settings: &settings, StartFrom: esdb.Start{},
			Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: g.StreamPrefixes},
		},
	})
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (c client) Append(ctx context.Context, stream string, expected int64, events ...sourcetest.Event) (uint64, error) {
	var want esdb.ExpectedRevision
	switch expected {
	case sourcetest.NoStream:
		want = esdb.NoStream{}
	case sourcetest.AnyRevision:
		want = esdb.Any{}
	default:
		if expected < 0 {
			return 0, errors.New("append: bad expected revision")
		}
		want = esdb.Revision(uint64(expected))
	}
	data := make([]esdb.EventData, len(events))
	for i, e := range events {
		data[i] = esdb.EventData{EventID: e.ID, EventType: e.Type, ContentType: esdb.ContentTypeJson, Data: e.Data, Metadata: e.Metadata}
	}
	var position uint64
	err := c.Do(ctx, func(cl *esdb.Client) error {
		r, err := cl.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: want}, data...)
		if err == nil {
			position = r.CommitPosition
		}
		return err
	})
	return position, err
}

// dial returns a client on uri, closed when the test ends.
func dial(t *testing.T, uri string) *subscription.Client {
	t.Helper()
	c, err := subscription.Dial(uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// cartsOnAll returns a $all source on c filtered to the carts.
func cartsOnAll(t *testing.T, c *subscription.Client) *subscription.All {
	t.Helper()
	src, err := subscription.NewAll(c, subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}, MaxSearchWindow: 8, CheckpointInterval: 2})
	if err != nil {
		t.Fatal(err)
	}
	return src
}
