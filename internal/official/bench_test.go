package official

import (
	"reflect"
	"testing"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/internal/neutral"
)

// fakeRead stands for a client's *ReadStream: Recv hands one event.
type fakeRead struct{ re *kurrentdb.ResolvedEvent }

func (f *fakeRead) Recv() (*kurrentdb.ResolvedEvent, error) { return f.re, nil }

// fakeGroup stands for a client's *PersistentSubscription.
type fakeGroup struct{}

func (*fakeGroup) Recv() *kurrentdb.PersistentSubscriptionEvent                         { return nil }
func (*fakeGroup) Ack(...*kurrentdb.ResolvedEvent) error                                { return nil }
func (*fakeGroup) Nack(string, kurrentdb.NackAction, ...*kurrentdb.ResolvedEvent) error { return nil }

// What the adapter costs an event, on top of the client: a read's Recv and
// the event in the neutral package's terms; a group's Ack.
func BenchmarkPerEvent(b *testing.B) {
	s, err := shapes["kurrentdb"]()
	if err != nil {
		b.Fatal(err)
	}
	calls := PerEvent((*fakeRead).Recv, (*kurrentdb.Subscription).Recv, (*fakeGroup).Recv, (*fakeGroup).Ack, (*fakeGroup).Nack)
	rec := recordedOfClient(s, "cart-c1", 4, 1234).Interface().(*kurrentdb.RecordedEvent)
	re := &kurrentdb.ResolvedEvent{Event: rec}
	b.Run("read", func(b *testing.B) {
		next := calls.readNext(reflect.ValueOf(&fakeRead{re}))
		b.ReportAllocs()
		for b.Loop() {
			v, err := next()
			if err != nil || s.resolvedOf(v) == nil {
				b.Fatal(err)
			}
		}
	})
	// The same, typed, as an adapter written for this client alone
	// converts it: what reflection adds.
	b.Run("read-typed", func(b *testing.B) {
		f := &fakeRead{re}
		b.ReportAllocs()
		for b.Loop() {
			re, err := f.Recv()
			if err != nil || typedResolved(re) == nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ack", func(b *testing.B) {
		ack, _ := calls.settle(reflect.ValueOf(&fakeGroup{}))
		r := &neutral.Resolved{Handle: re}
		b.ReportAllocs()
		for b.Loop() {
			if err := ack(r.Handle); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func typedResolved(re *kurrentdb.ResolvedEvent) *neutral.Resolved {
	if re == nil {
		return nil
	}
	return &neutral.Resolved{Event: typedRecorded(re.Event), Link: typedRecorded(re.Link), Commit: re.Commit, Handle: re}
}

func typedRecorded(e *kurrentdb.RecordedEvent) *neutral.Recorded {
	if e == nil {
		return nil
	}
	return &neutral.Recorded{
		ID: e.EventID, Type: e.EventType, Stream: e.StreamID, Revision: e.EventNumber,
		Commit: e.Position.Commit, Prepare: e.Position.Prepare, Created: e.CreatedDate, Data: e.Data, Metadata: e.UserMetadata,
	}
}
