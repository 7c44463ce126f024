package projectortest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/retry"
)

// A test that forgot its store (a nil *mongostore.Store, as a helper that
// failed to open one may return), its registry or its projection gets one
// line that names what is missing, not a nil-pointer panic deep in the
// engine.
func TestProve_and_CheckDocument_name_what_is_nil(t *testing.T) {
	reg := projector.NewRegistry()
	projector.Register[readingTaken](reg, "ReadingTaken")
	p := projector.New[tagged]("tagged", projector.StreamSuffix("sensor-"))
	projector.On(p, func(s tagged, _ readingTaken) (tagged, error) { return s, nil })
	streams := map[string][]any{"sensor-1": {readingTaken{}}}
	ctx := context.Background()
	var nilStore *mongostore.Store
	for name, call := range map[string]func() error{
		"Prove, nil store": func() error {
			_, err := projectortest.Prove(ctx, nilStore, reg, p, streams, projectortest.Delivery{})
			return err
		},
		"Prove, nil registry": func() error {
			_, err := projectortest.Prove(ctx, mongostore.New(nil), nil, p, streams, projectortest.Delivery{})
			return err
		},
		"Prove, nil projection": func() error {
			_, err := projectortest.Prove[tagged](ctx, mongostore.New(nil), reg, nil, streams, projectortest.Delivery{})
			return err
		},
		"CheckDocument, nil projection": func() error {
			evs := projectortest.NewLog(reg).MustAppend(t, "sensor-1", readingTaken{})
			return projectortest.CheckDocument[tagged](ctx, mongostore.New(nil), nil, "1", evs)
		},
		"CheckDocument, nil store": func() error {
			evs := projectortest.NewLog(reg).MustAppend(t, "sensor-1", readingTaken{})
			return projectortest.CheckDocument(ctx, nilStore, p, "1", evs)
		},
		"WaitForRevision, nil store": func() error {
			return projector.WaitForRevision(ctx, nilStore, p.Collection(), "1", 0, retry.Policy{})
		},
		"WaitForPosition, nil store": func() error {
			return projector.WaitForPosition(ctx, nilStore, p.Collection(), 0, retry.Policy{})
		},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = call()
			}()
			if err == nil || !strings.Contains(err.Error(), "nil") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v; want one line that names what is nil", err)
			}
		})
	}
}
