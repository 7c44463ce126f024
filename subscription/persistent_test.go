package subscription_test

import (
	"strings"
	"testing"

	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/subscription"
)

// A group is created with one of the three consumer strategies both
// clients create; another name (which either client would panic on, in a
// goroutine of its own) is refused when the consumer is made.
func TestNewPersistent_refuses_a_consumer_strategy_the_clients_do_not_create(t *testing.T) {
	c, err := kurrent.Dial("esdb://127.0.0.1:1?tls=false", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := func(s subscription.ConsumerStrategy) subscription.PersistentOptions {
		return subscription.PersistentOptions{Stream: subscription.AllStreams, Group: "g", Create: &subscription.GroupSettings{Strategy: s}}
	}
	for _, s := range []subscription.ConsumerStrategy{"PinnedByCorrelation", "pinned"} {
		if _, err := subscription.NewPersistent(c, opts(s)); err == nil || !strings.Contains(err.Error(), `consumer strategy "`+string(s)+`"`) {
			t.Errorf("%s: err %v, want the strategy refused", s, err)
		}
	}
	for _, s := range []subscription.ConsumerStrategy{"", subscription.RoundRobin, subscription.DispatchToSingle, subscription.Pinned} {
		if _, err := subscription.NewPersistent(c, opts(s)); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}
