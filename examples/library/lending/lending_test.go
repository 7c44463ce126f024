package lending_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/projectortest/e2e"

	"example.com/library/lending"
)

// Each projection is exactly-once under the deliveries a real subscription
// makes: every event up to three times, shuffled, from eight workers; the
// kit compares each document with the pure fold of its events.
func TestProjections_are_exactly_once_under_duplicated_shuffled_delivery(t *testing.T) {
	servers := e2e.StartServers(t, e2e.Options{MongoURI: os.Getenv("MONGO_URI")})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	traffic := lending.Traffic(1, 40, 6)
	delivery := projectortest.Delivery{Shuffle: true, Seed: 1}

	t.Run("loans", func(t *testing.T) {
		store := mongostore.New(servers.Database(t))
		rep, err := projectortest.Prove(ctx, store, lending.Registry(), lending.NewLoans(), traffic, delivery)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Documents != 40 || rep.Duplicates == 0 {
			t.Fatalf("%v: want 40 documents and some duplicates", rep)
		}
	})
	t.Run("members", func(t *testing.T) {
		store := mongostore.New(servers.Database(t))
		rep, err := projectortest.Prove(ctx, store, lending.Registry(), lending.NewMembers(), traffic, delivery)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Documents != 6 || rep.Duplicates == 0 {
			t.Fatalf("%v: want 6 documents and some duplicates", rep)
		}
	})
	t.Run("desk stats", func(t *testing.T) {
		store := mongostore.New(servers.Database(t))
		rep, err := projectortest.Prove(ctx, store, lending.Registry(), lending.NewDeskStats(), traffic, delivery)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Documents != 1 || rep.Duplicates == 0 {
			t.Fatalf("%v: want 1 document and some duplicates", rep)
		}
	})
}

func TestLoans_a_fourth_renewal_is_refused(t *testing.T) {
	p := lending.NewLoans()
	reg := lending.Registry()
	log := projectortest.NewLog(reg)
	id := "L1"
	evs, err := log.Append(lending.LoanStream(id),
		lending.BookCheckedOut{LoanID: id, Member: lending.Member{ID: "M1"}},
		lending.LoanRenewed{LoanID: id}, lending.LoanRenewed{LoanID: id}, lending.LoanRenewed{LoanID: id})
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Fold(evs...)
	if err != nil || l.Renewals != lending.MaxRenewals {
		t.Fatalf("three renewals: %+v, %v", l, err)
	}
	more, _ := log.Append(lending.LoanStream(id), lending.LoanRenewed{LoanID: id})
	if _, err := p.Fold(append(evs, more...)...); !errors.Is(err, lending.ErrTooManyRenewals) {
		t.Fatalf("a fourth renewal: %v, want ErrTooManyRenewals", err)
	}
}
