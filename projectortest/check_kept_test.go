package projectortest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

type tagged struct {
	Meta map[string]any
}

// A state with a map of any holding a slice: BSON reads it back as bson.A,
// which differs from the fold only in what BSON keeps. Prove says so
// (ErrMismatch), and where, without a panic in comparing values of two
// types.
func TestProve_a_map_of_any_holding_a_slice_is_told_not_panicked_on(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[readingTaken](reg, "ReadingTaken")
	p := projector.New[tagged]("tagged", projector.StreamSuffix("sensor-"))
	projector.On(p, func(s tagged, e readingTaken) (tagged, error) {
		s.Meta = map[string]any{"tags": []string{"a", "b"}}
		return s, nil
	})
	streams := map[string][]any{"sensor-1": {readingTaken{"1", time.Time{}}}}
	store := mongostore.New(mongotest.Database(t))
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Prove panicked: %v", r)
			}
		}()
		_, err = projectortest.Prove(context.Background(), store, reg, p, streams, projectortest.Delivery{Seed: 4, MaxTimes: 1})
	}()
	if !errors.Is(err, projectortest.ErrMismatch) || !strings.Contains(err.Error(), "state.Meta[tags] is not kept as it is") {
		t.Fatalf("err = %v", err)
	}
}
