package embedded

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// FerretDB's PostgreSQL backend stores a collection as a table of one jsonb
// column, _jsonb, and indexes _id with a btree on _jsonb->'_id'
// (metadata.Registry.indexesCreate); but its finds, updates and deletes
// whose filter is {_id: value} look the document up with containment,
// _jsonb->$1 @> $2 (filterEqual in internal/backends/postgresql/query.go),
// which a btree cannot serve: each reads the whole table, and writing one
// document costs a pass over its collection, as on SQLite (idindex.go).
//
// A GIN index with jsonb_path_ops on _jsonb->'_id' serves that lookup:
// PostgreSQL plans FerretDB's prepared statement with the key bound ('_id'),
// which matches the index's expression, and keeps that plan, the generic
// one (a pass over the table) costing more. The server gives every table
// FerretDB creates one, through an event trigger on CREATE TABLE that it
// installs in the database once; FerretDB does not know the index
// (listIndexes leaves it out), and PostgreSQL drops it with its table.
// The trigger takes only FerretDB's tables (a jsonb column _jsonb, in a
// schema with FerretDB's metadata table), and a failure to index one is a
// warning, never a failed CREATE TABLE. Tables made before the trigger
// existed are indexed when a server starts. An event trigger needs a superuser: without one, the server
// logs that lookups by _id read whole tables, and runs all the same.
const (
	pgTrigger = "projector_index_by_id"
	pgInstall = `
CREATE OR REPLACE FUNCTION projector_index_by_id() RETURNS event_trigger LANGUAGE plpgsql AS $f$
DECLARE r record;
BEGIN
  FOR r IN SELECT objid FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE TABLE' AND object_type = 'table' LOOP
    PERFORM projector_index_table(r.objid);
  END LOOP;
END $f$;
CREATE OR REPLACE FUNCTION projector_index_table(t oid) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t AND attname = '_jsonb' AND atttypid = 'jsonb'::regtype AND NOT attisdropped)
     AND EXISTS (SELECT 1 FROM pg_class c JOIN pg_class m ON m.relnamespace = c.relnamespace
                 WHERE c.oid = t AND m.relname = '_ferretdb_database_metadata')
     AND NOT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = t AND pg_get_indexdef(indexrelid) LIKE '%jsonb_path_ops%') THEN
    EXECUTE format('CREATE INDEX ON %s USING gin ((_jsonb -> ''_id'') jsonb_path_ops)', t::regclass);
  END IF;
EXCEPTION WHEN OTHERS THEN
  RAISE WARNING 'projector: no index of the lookups by _id on %: %', t::regclass, SQLERRM;
END $f$;`
	pgEventTrigger = `CREATE EVENT TRIGGER projector_index_by_id ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
  EXECUTE FUNCTION projector_index_by_id()`
	pgIndexExisting = `SELECT projector_index_table(c.oid) FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
  WHERE c.relkind = 'r' AND a.attname = '_jsonb' AND NOT a.attisdropped
    AND c.relnamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname IN ('pg_catalog', 'information_schema'))`
)

// pgIndexByID installs, in the database of url, the event trigger that
// gives every table FerretDB creates the index of its lookups by _id, and
// gives it to the tables already there. It is idempotent, and several
// servers may run it at once.
func pgIndexByID(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A pool's parser takes the pool_ settings FerretDB's URL may carry.
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// One server at a time: the functions are replaced (this version's),
	// the trigger made if missing, and the tables there indexed (those made
	// while an earlier pass failed, or before the trigger).
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1))`, pgTrigger); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext($1))`, pgTrigger)
	if _, err := conn.Exec(ctx, pgInstall); err != nil {
		return fmt.Errorf("installing the indexing functions: %w", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = $1)`, pgTrigger).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := conn.Exec(ctx, pgEventTrigger); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42501" {
				return fmt.Errorf("an event trigger needs a superuser: %w", err)
			}
			return err
		}
	}
	_, err = conn.Exec(ctx, pgIndexExisting)
	return err
}
