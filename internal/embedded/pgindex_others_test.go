package embedded_test

import (
	"context"
	"testing"
)

// The event trigger the embedded server installs fires on every CREATE
// TABLE in the database, by any client: it takes FerretDB's tables only,
// and a table of another tool (or a user's) with a column _jsonb that is
// not jsonb, or outside FerretDB's schemas, is created as it would be
// without it, and left without an index.
func TestStart_on_PostgreSQL_leaves_the_tables_of_other_clients_alone(t *testing.T) {
	_, conn := pgServer(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `CREATE TABLE public.othertool_other (id int, _jsonb text)`); err != nil {
		t.Fatalf("a table of another client, with a text column named _jsonb: %v", err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE public.othertool_json (id int, _jsonb json)`); err != nil {
		t.Fatalf("a table of another client, with a json column named _jsonb: %v", err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE public.othertool_jsonb (id int, _jsonb jsonb)`); err != nil {
		t.Fatalf("a table of another client, with a jsonb column named _jsonb: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename LIKE 'othertool_%'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d indexes on the tables of another client (%v), want none", n, err)
	}
}
