package embedded_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/internal/embedded"
	"github.com/revgate/projector/internal/mongotest"
)

// lookupByIDPG is how FerretDB 1.24's PostgreSQL backend finds a document
// by _id, in its finds, updates and deletes (filterEqual in
// internal/backends/postgresql/query.go: `%s->%s @> %s`, with the key and
// the value as parameters).
const lookupByIDPG = `SELECT _jsonb FROM %s WHERE _jsonb->$1 @> $2`

// pgServer starts a server on a PostgreSQL database of its own, and returns
// it with a connection to that database; both end with the test. It skips
// the test where no PostgreSQL is given (make test gives one).
func pgServer(t *testing.T) (*embedded.Server, *pgx.Conn) {
	t.Helper()
	pg := os.Getenv(mongotest.EnvPostgres)
	if pg == "" {
		t.Skip(mongotest.EnvPostgres + " is not set: no PostgreSQL for FerretDB's PostgreSQL backend (make test sets it)")
	}
	url, drop, err := mongotest.PostgresDatabase(pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	s, err := embedded.Start(embedded.Config{PostgresURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	conn, err := pgx.Connect(context.Background(), strings.Replace(url, "pool_max_conns=200", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return s, conn
}

// pgPlan returns PostgreSQL's plan of FerretDB's lookup by _id in the
// table of collection coll of database db, as FerretDB runs it: a prepared
// statement, run often enough for PostgreSQL to settle on a plan. small:
// the table is small enough for a pass over it to cost less than the index,
// and PostgreSQL is told to use an index it can.
func pgPlan(t *testing.T, conn *pgx.Conn, db, coll string, small bool) string {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET enable_seqscan = %t", !small)); err != nil {
		t.Fatal(err)
	}
	var table string
	q := fmt.Sprintf(`SELECT _jsonb->>'table' FROM %s WHERE _jsonb->>'_id' = $1`, pgx.Identifier{db, "_ferretdb_database_metadata"}.Sanitize())
	if err := conn.QueryRow(ctx, q, coll).Scan(&table); err != nil {
		t.Fatalf("table of %s.%s: %v", db, coll, err)
	}
	lookup := fmt.Sprintf(lookupByIDPG, pgx.Identifier{db, table}.Sanitize())
	if _, err := conn.Prepare(ctx, "lookup", "EXPLAIN "+lookup); err != nil {
		t.Fatal(err)
	}
	defer conn.Deallocate(ctx, "lookup")
	var steps []string
	for i := range 8 { // past PostgreSQL's five custom plans
		steps = steps[:0]
		rows, err := conn.Query(ctx, "lookup", "_id", fmt.Sprintf(`"doc-%d"`, i))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var step string
			if err := rows.Scan(&step); err != nil {
				t.Fatal(err)
			}
			steps = append(steps, strings.TrimSpace(step))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(steps, "; ")
}

func TestStart_on_PostgreSQL_indexes_the_lookup_by_id_of_every_collection(t *testing.T) {
	s, conn := pgServer(t)
	c := connect(t, s)
	ctx := context.Background()
	orders := c.Database("shop").Collection("orders")
	insert(t, orders, big)
	if p := pgPlan(t, conn, "shop", "orders", false); !strings.Contains(p, "Index") {
		t.Fatalf("FerretDB's lookup by _id reads the whole table: %s", p)
	}

	byIDStillRight(t, orders)

	// A collection dropped and created again is a new table, indexed too;
	// an index of the user's on it is no conflict.
	if err := orders.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	insert(t, orders, 10)
	if _, err := orders.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if p := pgPlan(t, conn, "shop", "orders", true); !strings.Contains(p, "Index") {
		t.Fatalf("a collection made again: FerretDB's lookup by _id reads the whole table: %s", p)
	}

	// A second server on the same database finds the trigger there.
	var log bytes.Buffer
	again, err := embedded.Start(embedded.Config{PostgresURL: conn.Config().ConnString(), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if strings.Contains(log.String(), "_id") {
		t.Fatalf("a second server on the database: %s", log.String())
	}
}
