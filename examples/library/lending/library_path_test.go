package lending_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
	"github.com/revgate/projector/projectortest/e2e"
	"github.com/revgate/projector/retry"
	"github.com/revgate/projector/subscription"

	"example.com/library/lending"
)

// project runs the loans projection until ctx is done: the library path, for
// a program that wires the parts itself instead of using package app.
func project(ctx context.Context, db *mongo.Database, esdbURI string, logger *slog.Logger) error {
	client, err := kurrent.Dial(esdbURI, logger)
	if err != nil {
		return err
	}
	defer client.Close()
	store := mongostore.New(db)
	engine, err := projector.NewEngine(store, lending.Registry(), []projector.Definition{lending.NewLoans()},
		projector.WithRetry(retry.Default()), projector.WithLogger(logger))
	if err != nil {
		return err
	}
	// Once, before the first event: the indexes the projections ask for, and
	// the inbox (with its check for transactions) of an Inbox projection.
	if err := engine.Prepare(ctx); err != nil {
		return err
	}
	source, err := subscription.NewAll(client, subscription.AllOptions{StreamPrefixes: []string{lending.LoanStreams}})
	if err != nil {
		return err
	}
	// The runner gives the engine the source's stream reader (the client):
	// it tells a late event from one that is gone or routed elsewhere, and
	// lets catch-up fold a stream at once, writing each document once.
	runner, err := projector.NewRunner("loans", engine, source, store, projector.WithWorkers(4))
	if err != nil {
		return err
	}
	return runner.Run(ctx) // until ctx is done; the checkpoint is kept in projector_checkpoints
}

func TestLibraryPath_a_runner_wired_by_hand_projects_the_loans(t *testing.T) {
	servers := e2e.StartServers(t, e2e.Options{MongoURI: os.Getenv("MONGO_URI")})
	db := servers.Database(t)
	at := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	events := servers.Append(t, lending.Registry(), lending.LoanStream("L1"),
		lending.BookCheckedOut{LoanID: "L1", BookID: "B1", Member: lending.Member{ID: "M1"}, At: at, Due: at.Add(21 * 24 * time.Hour)},
		lending.FineCharged{LoanID: "L1", MemberID: "M1", Cents: 150},
		lending.BookReturned{LoanID: "L1", MemberID: "M1", At: at.Add(30 * 24 * time.Hour)})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- project(ctx, db, servers.ESDBURI(), slog.New(slog.DiscardHandler)) }()
	patient := retry.Policy{InitialDelay: 20 * time.Millisecond, Multiplier: 2, MaxDelay: 500 * time.Millisecond, MaxRetries: -1, MaxElapsed: 2 * time.Minute}
	if err := projector.WaitForPosition(context.Background(), mongostore.New(db), "loans", servers.Head(), patient); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := projectortest.CheckDocument(context.Background(), mongostore.New(db), lending.NewLoans(), "L1", events); err != nil {
		t.Fatal(err)
	}
}
