package subscription_test

import (
	"os"
	"testing"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/subscription"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Main(m)) }

// dial returns a client on uri, closed when the test ends: the KurrentDB
// adapter's, so that this package's tests link one official client (the
// acceptance suite runs on each adapter in the adapter's own package).
func dial(t *testing.T, uri string) *subscription.Client {
	t.Helper()
	c, err := kurrent.Dial(uri, nil)
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
