package esdbv4

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/revgate/projector/internal/neutral"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// envelope is the event the engine handles for re, a delivery the client
// read, as the adapter maps it: the event, or the original of a link.
func envelope(re *esdb.ResolvedEvent) (projector.Event, error) {
	r := resolved(re)
	if r == nil {
		return projector.Event{}, errors.New("nil event")
	}
	return neutral.Envelope(r.Event, r.Link, r.Commit)
}

func testRecorded(stream string, rev, commit uint64) *esdb.RecordedEvent {
	return &esdb.RecordedEvent{
		EventID:      uuid.MustParse("6f9619ff-8b86-d011-b42d-00c04fc964ff"),
		EventType:    "ShoppingCartOpened",
		ContentType:  "application/json",
		StreamID:     stream,
		EventNumber:  rev,
		Position:     esdb.Position{Commit: commit, Prepare: commit},
		CreatedDate:  time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC),
		Data:         []byte(`{"shoppingCartId":"c1"}`),
		UserMetadata: []byte(`{"requestId":"r1"}`),
	}
}

func TestEnvelope_of_a_plain_event(t *testing.T) {
	e, err := envelope(&esdb.ResolvedEvent{Event: testRecorded("shopping_cart-c1", 4, 1234)})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != "6f9619ff-8b86-d011-b42d-00c04fc964ff" || e.Type != "ShoppingCartOpened" || e.StreamID != "shopping_cart-c1" ||
		e.StreamRevision != 4 || e.Position != 1234 || string(e.Data) != `{"shoppingCartId":"c1"}` ||
		string(e.Metadata) != `{"requestId":"r1"}` || !e.Created.Equal(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)) || e.Payload != nil {
		t.Fatalf("envelope %+v", e)
	}
}

func TestEnvelope_of_a_link_is_its_original_event(t *testing.T) {
	link := testRecorded("$ce-shopping_cart", 99, 5000)
	e, err := envelope(&esdb.ResolvedEvent{Link: link, Event: testRecorded("shopping_cart-c1", 4, 1234)})
	if err != nil {
		t.Fatal(err)
	}
	if e.StreamID != "shopping_cart-c1" || e.StreamRevision != 4 || e.Position != 1234 {
		t.Fatalf("envelope %+v is not the original event", e)
	}
}

func TestEnvelope_of_a_dangling_link_is_an_error(t *testing.T) {
	_, err := envelope(&esdb.ResolvedEvent{Link: testRecorded("$ce-shopping_cart", 99, 5000)})
	if !errors.Is(err, subscription.ErrUnresolvedLink) {
		t.Fatalf("err = %v", err)
	}
	if _, err := envelope(nil); err == nil {
		t.Fatal("nil event accepted")
	}
}

func TestRedact_hides_the_password_of_any_connection_string(t *testing.T) {
	for in, want := range map[string]string{
		"esdb://admin:hunter2@localhost:2113?tls=false":            "esdb://admin:xxxxx@localhost:2113?tls=false",
		"mongodb://demo:hunter2@127.0.0.1:27017/?authSource=admin": "mongodb://demo:xxxxx@127.0.0.1:27017/?authSource=admin",
		"mongodb+srv://u:hunter2@cluster0.example.net/db":          "mongodb+srv://u:xxxxx@cluster0.example.net/db",
		"mongodb://127.0.0.1:27017/":                               "mongodb://127.0.0.1:27017/",
		"esdb://u:hun%20ter2@h1:2113,h2:2113?tls=false":            "esdb://u:xxxxx@h1:2113,h2:2113?tls=false",
	} {
		if got := neutral.Redact(in); got != want || strings.Contains(got, "hunter2") || strings.Contains(got, "hun%20ter2") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
