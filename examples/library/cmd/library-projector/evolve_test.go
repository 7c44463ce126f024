package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/projectortest/e2e"

	"example.com/library/lending"
)

// asStored returns a loan's life as the library wrote it before v2: each
// checkout in the v1 shape, and each fee under its old name, as the event
// store keeps them (type and JSON).
func asStored(t *testing.T, life []any) []any {
	t.Helper()
	out := make([]any, len(life))
	for i, e := range life {
		typ, payload := "", any(nil)
		switch e := e.(type) {
		case lending.BookCheckedOut:
			typ, payload = lending.TypeCheckedOutV1, lending.BookCheckedOutV1{LoanID: e.LoanID, BookID: e.BookID, MemberID: e.Member.ID, At: e.At, Due: e.Due}
		case lending.FineCharged:
			typ, payload = lending.TypeFinedOld, e
		default:
			out[i] = e
			continue
		}
		data, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = projector.Event{Type: typ, Data: data}
	}
	return out
}

// The library's log holds both forms: loans from before v2 (their checkouts
// in the v1 shape, their fees under the old name) and loans since. It
// projects into the same documents as a log written entirely in v2, each
// the fold of its events; and a rebuild from the mixed log gives them again.
func TestLibraryProjector_a_log_of_v1_and_v2_events_projects_as_one_written_in_v2(t *testing.T) {
	mongoURI := os.Getenv("MONGO_URI")
	mixed, current := e2e.StartServers(t, e2e.Options{MongoURI: mongoURI}), e2e.StartServers(t, e2e.Options{MongoURI: mongoURI})
	mixedDB, currentDB := mixed.Database(t), current.Database(t)
	traffic := lending.Traffic(5, 30, 5)
	streams := slices.Sorted(func(yield func(string) bool) {
		for s := range traffic {
			if !yield(s) {
				return
			}
		}
	})
	folds := map[string][]projector.Event{} // the mixed log's events, decoded
	old := 0
	for i, stream := range streams {
		current.Append(t, lending.Registry(), stream, traffic[stream]...)
		life := traffic[stream]
		if i%2 == 0 { // half the loans were written before v2
			life, old = asStored(t, life), old+1
		}
		folds[stream] = mixed.Append(t, lending.Registry(), stream, life...)
	}
	for _, s := range []struct {
		servers *e2e.Servers
		db      *mongo.Database
	}{{mixed, mixedDB}, {current, currentDB}} {
		cmd := e2e.StartCommand(t, config(), "run", "--esdb", s.servers.ESDBURI(), "--mongo", s.servers.MongoURI(), "--database", s.db.Name(), "--http", "")
		for _, name := range []string{"loans", "member_loans", "desk_stats"} {
			cmd.WaitCheckpoint(t, s.db, name, s.servers.Head())
		}
		if code := cmd.Stop(t); code != 0 {
			t.Fatalf("exit %d\n%s", code, cmd.Stderr())
		}
	}

	ctx := context.Background()
	sameDocuments(t, mixedDB, currentDB, lending.NewLoans(), streamIDs(streams))
	sameDocuments(t, mixedDB, currentDB, lending.NewMembers(), []string{"M000", "M001", "M002", "M003", "M004"})
	sameDocuments(t, mixedDB, currentDB, lending.NewDeskStats(), []string{lending.DeskStatsID})
	var stats lending.DeskStats
	projector.ReadDocument(ctx, mongostore.New(mixedDB), lending.NewDeskStats(), lending.DeskStatsID, &stats)
	if stats.CheckedOut != len(streams) || old == 0 {
		t.Fatalf("desk stats %+v from %d loans (%d of them in v1): every checkout counts, v1 ones too", stats, len(streams), old)
	}

	// A rebuild from the mixed log: readers switch to a collection whose
	// every document is the fold of its events.
	var out, errOut bytes.Buffer
	if code := config().Run(ctx, []string{"rebuild", "loans", "--esdb", mixed.ESDBURI(), "--mongo", mixed.MongoURI(), "--database", mixedDB.Name()}, nil, &out, &errOut); code != 0 {
		t.Fatalf("rebuild: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	store := mongostore.New(mixedDB)
	active, err := store.ActiveCollection(ctx, "loans", "loans")
	if err != nil || !strings.HasPrefix(active, "loans_r") {
		t.Fatalf("readers use %q (%v) after the rebuild", active, err)
	}
	for _, stream := range streams {
		id := strings.TrimPrefix(stream, lending.LoanStreams)
		if err := projectortest.CheckDocument(ctx, store, lending.NewLoans().InCollection(active), id, folds[stream]); err != nil {
			t.Error(err)
		}
	}
}

func streamIDs(streams []string) []string {
	ids := make([]string, len(streams))
	for i, s := range streams {
		ids[i] = strings.TrimPrefix(s, lending.LoanStreams)
	}
	return ids
}

// sameDocuments checks that the documents ids of p are the same, state and
// revision, in databases a and b, and that there are some.
func sameDocuments[S any](t *testing.T, a, b *mongo.Database, p *projector.Projection[S], ids []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		var x, y S
		foundX, revX, errX := projector.ReadDocument(ctx, mongostore.New(a), p, id, &x)
		foundY, revY, errY := projector.ReadDocument(ctx, mongostore.New(b), p, id, &y)
		if errX != nil || errY != nil || !foundX || !foundY {
			t.Fatalf("%s/%s: found %v, %v (%v, %v)", p.Name(), id, foundX, foundY, errX, errY)
		}
		if revX != revY || !reflect.DeepEqual(x, y) {
			t.Errorf("%s/%s differs:\n mixed log %+v at revision %d\n v2 log    %+v at revision %d", p.Name(), id, x, revX, y, revY)
		}
	}
}
