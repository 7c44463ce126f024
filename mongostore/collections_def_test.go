package mongostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
)

// A projection renamed (InCollection keeps its collection, "tickets") and
// rebuilt under its new name leaves the old name's record, whose def is
// the same collection. ActiveCollection by def (what WaitForRevision and
// WaitForPosition use) takes the one switched last, not the old name's,
// whose collection no longer moves.
func TestActiveCollection_by_def_takes_the_record_switched_last(t *testing.T) {
	ctx := context.Background()
	s := mongostore.New(mongotest.Database(t))
	for _, r := range []struct{ name, building string }{{"helpdesk", "tickets_r1"}, {"tickets", "tickets_r2"}} {
		if _, err := s.StartRebuild(ctx, r.name, r.building); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishRebuild(ctx, r.name, r.building, "tickets"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // switched at another millisecond, as BSON keeps it
	}
	byName, err := s.ActiveCollection(ctx, "tickets", "tickets")
	if err != nil {
		t.Fatal(err)
	}
	byDef, err := s.ActiveCollection(ctx, "", "tickets")
	if err != nil {
		t.Fatal(err)
	}
	if byDef != byName {
		t.Fatalf("by def: %s; by the projection's name: %s (the wait would read the collection of a record no projection uses)", byDef, byName)
	}
}
