package subscription_test

import (
	"os"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/sourcetest"
	"github.com/revgate/projector/subscription"
	"github.com/revgate/projector/subscription/esdbv4"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Main(m)) }

// kit is what the acceptance suite needs of the EventStore-Client-Go v4
// adapter.
var kit = sourcetest.Kit{
	Name: "EventStore-Client-Go v4",
	Dial: func(uri string) (sourcetest.Client, error) {
		c, err := esdbv4.Dial(uri, nil)
		if err != nil {
			return nil, err
		}
		return sourcetest.Sources(c), nil
	},
}

// dial returns a client on uri, closed when the test ends.
func dial(t *testing.T, uri string) *subscription.Client {
	t.Helper()
	c, err := esdbv4.Dial(uri, nil)
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
