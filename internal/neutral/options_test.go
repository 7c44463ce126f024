package neutral_test

import (
	"strings"
	"testing"

	"github.com/revgate/projector/internal/neutral"
)

// The server takes one filter: two settings of one kind, one of which would
// replace the other and leave its streams or types out unsaid, are refused.
func TestAllOptions_two_filters_of_one_kind_are_refused(t *testing.T) {
	cases := []struct {
		name string
		o    neutral.AllOptions
		want string
	}{
		{"stream prefixes and regex", neutral.AllOptions{StreamPrefixes: []string{"order/"}, StreamRegex: "^ward/"}, "StreamPrefixes or by StreamRegex, not both"},
		{"type prefixes and regex", neutral.AllOptions{EventTypePrefixes: []string{"pharmacy."}, EventTypeRegex: "^ward"}, "EventTypePrefixes or by EventTypeRegex, not both"},
		{"streams and types", neutral.AllOptions{StreamPrefixes: []string{"order/"}, EventTypeRegex: "^ward"}, "by stream or by event type, not both"},
	}
	for _, c := range cases {
		if _, err := c.o.ServerFilter(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
	for _, o := range []neutral.AllOptions{{StreamPrefixes: []string{"order/", "ward/"}}, {StreamRegex: "^(order|ward)/"}, {EventTypeRegex: "^pharmacy\\."}, {}} {
		if _, err := o.ServerFilter(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}
