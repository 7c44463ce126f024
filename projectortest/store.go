package projectortest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
)

// acceptanceState is the state the store suite writes.
type acceptanceState struct {
	Name  string   `bson:"name"`
	Count int      `bson:"count"`
	Tags  []string `bson:"tags"`
	Note  *string  `bson:"note,omitempty"`
}

// head is the head of the suite's documents at rev.
func head(rev uint64) driver.Head { return driver.Head{Revision: rev, Stream: "docs-1"} }

// sameHead compares heads but for their write tokens, which a store may or
// may not keep.
func sameHead(h, want driver.Head) bool {
	h.Write, want.Write = "", ""
	return h == want
}

// TestStore is the acceptance suite of the [driver.Store] role: run it
// against every implementation. open returns a store on an empty database.
func TestStore(t *testing.T, open func(t *testing.T) driver.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	note := "gift"
	su := storeSuite{ctx: ctx, open: open, first: acceptanceState{Name: "first", Count: 1, Tags: []string{"a"}, Note: &note}}

	t.Run("load_of_a_missing_document_finds_nothing", su.loadOfAMissingDocument)
	t.Run("insert_then_load_round_trips_state_and_revision", su.insertThenLoad)
	t.Run("load_below_the_minimum_revision_finds_nothing", su.loadBelowTheMinimumRevision)
	t.Run("second_insert_is_a_duplicate", su.secondInsert)
	t.Run("update_from_another_revision_matches_nothing", su.updateFromAnotherRevision)
	t.Run("a_write_token_given_is_kept_where_the_store_keeps_tokens", su.writeTokens)
	t.Run("update_replaces_the_state_and_drops_fields_left_out", su.updateReplacesTheState)
	t.Run("an_update_that_changes_nothing_still_matches", su.updateThatChangesNothing)
	t.Run("indexes_are_created_once_and_enforced", su.indexes)
}

// storeSuite is what the cases of [TestStore] share: the suite's deadline,
// how to open a store on an empty database, and the document they insert.
type storeSuite struct {
	ctx   context.Context
	open  func(t *testing.T) driver.Store
	first acceptanceState
}

// loadOfAMissingDocument checks that a load of a document that is not there
// finds nothing.
func (su storeSuite) loadOfAMissingDocument(t *testing.T) {
	s := su.open(t)
	var st acceptanceState
	if _, found, err := s.Load(su.ctx, "docs", "nope", 0, &st); err != nil || found {
		t.Fatalf("found=%v err=%v", found, err)
	}
}

// insertThenLoad checks that a document inserted loads with its state and
// revision, and its head alone.
func (su storeSuite) insertThenLoad(t *testing.T) {
	s := su.open(t)
	if err := s.Insert(su.ctx, "docs", "d1", head(3), su.first); err != nil {
		t.Fatal(err)
	}
	var st acceptanceState
	h, found, err := s.Load(su.ctx, "docs", "d1", 0, &st)
	if err != nil || !found || !sameHead(h, head(3)) || !reflect.DeepEqual(st, su.first) {
		t.Fatalf("head=%+v found=%v err=%v state=%+v", h, found, err, st)
	}
	h, found, err = s.Load(su.ctx, "docs", "d1", 3, nil)
	if err != nil || !found || !sameHead(h, head(3)) {
		t.Fatalf("head only: %+v found=%v err=%v", h, found, err)
	}
}

// loadBelowTheMinimumRevision checks that a load that asks for a revision
// above the document's finds nothing.
func (su storeSuite) loadBelowTheMinimumRevision(t *testing.T) {
	s := su.open(t)
	if err := s.Insert(su.ctx, "docs", "d1", head(3), su.first); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.Load(su.ctx, "docs", "d1", 4, nil); err != nil || found {
		t.Fatalf("found=%v err=%v", found, err)
	}
}

// secondInsert checks that a second insert of a document fails with
// [driver.ErrDuplicate].
func (su storeSuite) secondInsert(t *testing.T) {
	s := su.open(t)
	if err := s.Insert(su.ctx, "docs", "d1", head(0), su.first); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(su.ctx, "docs", "d1", head(0), su.first); !errors.Is(err, driver.ErrDuplicate) {
		t.Fatalf("err = %v, want ErrDuplicate", err)
	}
}

// updateFromAnotherRevision checks that an update from a revision the
// document is not at matches nothing, and leaves it as it was.
func (su storeSuite) updateFromAnotherRevision(t *testing.T) {
	s := su.open(t)
	if err := s.Insert(su.ctx, "docs", "d1", head(2), su.first); err != nil {
		t.Fatal(err)
	}
	matched, err := s.Update(su.ctx, "docs", "d1", 1, head(2), acceptanceState{Name: "stale"})
	if err != nil || matched {
		t.Fatalf("matched=%v err=%v", matched, err)
	}
	var st acceptanceState
	if h, _, _ := s.Load(su.ctx, "docs", "d1", 0, &st); h.Revision != 2 || !reflect.DeepEqual(st, su.first) {
		t.Fatalf("document changed: %+v %+v", h, st)
	}
}

// writeTokens checks that a store that keeps write tokens keeps the one a
// write gives, and makes a new one for a write that gives none; it is
// skipped on a store that keeps none.
func (su storeSuite) writeTokens(t *testing.T) {
	s := su.open(t)
	if err := s.Insert(su.ctx, "docs", "d1", head(0), su.first); err != nil {
		t.Fatal(err)
	}
	h, _, err := s.Load(su.ctx, "docs", "d1", 0, nil)
	if err != nil || h.Write == "" {
		t.Skipf("the store keeps no write tokens (%v): a replay cut short after its write is applied again", err)
	}
	given := head(0)
	given.Write = "replay-token-1"
	if matched, err := s.Update(su.ctx, "docs", "d1", 0, given, su.first); err != nil || !matched {
		t.Fatalf("matched=%v err=%v", matched, err)
	}
	if h, _, err := s.Load(su.ctx, "docs", "d1", 0, nil); err != nil || h.Write != given.Write {
		t.Fatalf("token %q after a write that gave %q (err %v)", h.Write, given.Write, err)
	}
	if matched, err := s.Update(su.ctx, "docs", "d1", 0, head(0), su.first); err != nil || !matched {
		t.Fatalf("matched=%v err=%v", matched, err)
	}
	if h, _, err := s.Load(su.ctx, "docs", "d1", 0, nil); err != nil || h.Write == given.Write || h.Write == "" {
		t.Fatalf("token %q after a write that gave none: want a new one (err %v)", h.Write, err)
	}
}

// updateReplacesTheState checks that an update replaces the whole state:
// fields left out are gone.
func (su storeSuite) updateReplacesTheState(t *testing.T) {
	s := su.open(t)
	if err := s.Insert(su.ctx, "docs", "d1", head(0), su.first); err != nil {
		t.Fatal(err)
	}
	next := acceptanceState{Name: "second", Count: 2, Tags: []string{}}
	matched, err := s.Update(su.ctx, "docs", "d1", 0, head(1), next)
	if err != nil || !matched {
		t.Fatalf("matched=%v err=%v", matched, err)
	}
	var st acceptanceState
	if h, _, _ := s.Load(su.ctx, "docs", "d1", 1, &st); !sameHead(h, head(1)) || !reflect.DeepEqual(st, next) {
		t.Fatalf("head=%+v state=%+v, want %+v", h, st, next)
	}
}

// updateThatChangesNothing checks that an update that changes nothing still
// matches.
func (su storeSuite) updateThatChangesNothing(t *testing.T) {
	s := su.open(t)
	if err := s.Insert(su.ctx, "docs", "d1", head(5), su.first); err != nil {
		t.Fatal(err)
	}
	matched, err := s.Update(su.ctx, "docs", "d1", 5, head(5), su.first)
	if err != nil || !matched {
		t.Fatalf("matched=%v err=%v: a no-op update must count as matched", matched, err)
	}
}

// indexes checks that indexes ensured twice are created once, and a unique
// one is enforced.
func (su storeSuite) indexes(t *testing.T) {
	s := su.open(t)
	idx := []projector.Index{{Keys: []string{"name"}, Unique: true}, {Keys: []string{"count", "-name"}}}
	for range 2 {
		if err := s.EnsureIndexes(su.ctx, "docs", idx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Insert(su.ctx, "docs", "d1", head(0), su.first); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(su.ctx, "docs", "d2", head(0), su.first); err == nil {
		t.Fatal("a second document with the same unique name was accepted")
	}
}
