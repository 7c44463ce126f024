package mongotest

import (
	"context"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Writes counts the documents a client sends the server to write, by
// collection: each statement of its insert and update commands.
type Writes struct {
	mu sync.Mutex
	n  map[string]int
}

// Of returns how many documents of collection were sent to be written.
func (w *Writes) Of(collection string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[collection]
}

func (w *Writes) started(_ context.Context, e *event.CommandStartedEvent) {
	field := map[string]string{"insert": "documents", "update": "updates"}[e.CommandName]
	if field == "" {
		return
	}
	coll, _ := e.Command.Lookup(e.CommandName).StringValueOK()
	n := 1 // sent as a document sequence, outside the command's body
	if arr, ok := e.Command.Lookup(field).ArrayOK(); ok {
		if vals, err := arr.Values(); err == nil && len(vals) > 0 {
			n = len(vals)
		}
	}
	w.mu.Lock()
	w.n[coll] += n
	w.mu.Unlock()
}

// CountedDatabase returns a new, empty database for the test, as Database
// does, through a client of its own whose writes are counted.
func CountedDatabase(tb testing.TB) (*mongo.Database, *Writes) {
	tb.Helper()
	name := Database(tb).Name()
	w := &Writes{n: map[string]int{}}
	client, err := mongo.Connect(options.Client().ApplyURI(URI(tb)).SetMonitor(&event.CommandMonitor{Started: w.started}))
	if err != nil {
		tb.Fatalf("mongotest: %v", err)
	}
	tb.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client.Database(name), w
}
