// Command testferretdb runs FerretDB on a PostgreSQL server for the tests, in
// a process of its own: built without -race, it serves every test process of
// a run several times faster than a FerretDB embedded in each of them, where
// the race detector watches its code too. scripts/with-postgres --ferretdb
// starts it and points MONGO_URI at it.
//
//	go run ./scripts/testferretdb postgres://postgres@127.0.0.1:5432/postgres
//
// It creates a database of its own on that server, prints the connection
// string of the Mongo-wire server on its first line, and serves until
// SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/revgate/projector/internal/embedded"
	"github.com/revgate/projector/internal/mongotest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testferretdb:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 {
		return fmt.Errorf("usage: testferretdb POSTGRES_URL")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	url, drop, err := mongotest.PostgresDatabase(os.Args[1])
	if err != nil {
		return fmt.Errorf("%s: %w", os.Args[1], err)
	}
	defer drop()
	srv, err := embedded.Start(embedded.Config{PostgresURL: url})
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Println(srv.URI())
	<-ctx.Done()
	return nil
}
