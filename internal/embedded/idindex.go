package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // FerretDB's SQLite driver, already linked
)

// FerretDB 1.24's SQLite backend finds a document by _id with the
// expression _ferretdb_sjson->'$._id' (internal/backends/sqlite/metadata/
// metadata.go, IDColumn, used by collection.go's Query and UpdateAll), but
// indexes _id on _ferretdb_sjson->"_id" (metadata/registry.go,
// indexesCreate). SQLite uses an index on an expression only for that
// expression as written, so no query of FerretDB's uses its _id index:
// every find, update and delete by _id reads and parses every row of the
// collection's table (EXPLAIN QUERY PLAN: SCAN), a cost that grows with the
// collection.
//
// The embedded server therefore adds, to each collection's table, the index
// its queries can use: on _ferretdb_sjson->'$._id'. FerretDB creates a
// table when a collection is first written, so a keeper looks for tables
// without it every idIndexEvery, and once when asked ([Server.IndexIDs]).
// The index is SQLite's alone: FerretDB neither lists nor needs it, and it
// goes with the table when the collection is dropped. Uniqueness stays
// with FerretDB's own _id index.

// idIndexEvery is how often the keeper looks for tables without the index.
const idIndexEvery = 100 * time.Millisecond

// idIndexSuffix names the index the keeper adds to a table.
const idIndexSuffix = "_projector_id"

// idIndexer adds the _id lookup index to the tables of the SQLite files in
// a data dir.
type idIndexer struct {
	dir    string
	logger *slog.Logger
	mu     sync.Mutex
	dbs    map[string]openFile // by file name
}

// openFile is a connection to a database file, and the file it opened: a
// database dropped and made again is a new file under the same name.
type openFile struct {
	db   *sql.DB
	file os.FileInfo
}

func newIDIndexer(dir string, logger *slog.Logger) *idIndexer {
	return &idIndexer{dir: dir, logger: logger, dbs: map[string]openFile{}}
}

// keep indexes the tables every idIndexEvery until ctx ends, then closes
// its connections.
func (x *idIndexer) keep(ctx context.Context) {
	defer x.close()
	t := time.NewTicker(idIndexEvery)
	defer t.Stop()
	for {
		if err := x.indexAll(ctx); err != nil && ctx.Err() == nil {
			x.logger.Debug("embedded: indexing _id lookups", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// indexAll adds the index to every table of every database file that lacks
// it.
func (x *idIndexer) indexAll(ctx context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	files, err := filepath.Glob(filepath.Join(x.dir, "*.sqlite"))
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		if err := x.indexFile(ctx, f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(f), err))
		}
	}
	return errors.Join(errs...)
}

// indexFile adds the index to the tables of the collections of database
// file f.
func (x *idIndexer) indexFile(ctx context.Context, f string) error {
	db, err := x.open(f)
	if err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, `SELECT c.table_name FROM _ferretdb_collections c WHERE NOT EXISTS
		(SELECT 1 FROM sqlite_master m WHERE m.type = 'index' AND m.name = c.table_name || ?)`, idIndexSuffix)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil // a database FerretDB has not set up yet
		}
		return err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range tables {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (_ferretdb_sjson->'$._id')`, t+idIndexSuffix, t)
		if _, err := db.ExecContext(ctx, q); err != nil {
			if strings.Contains(err.Error(), "no such table") {
				continue // dropped meanwhile
			}
			return fmt.Errorf("table %s: %w", t, err)
		}
	}
	return nil
}

// open returns a connection to database file f, the file now under that
// name.
func (x *idIndexer) open(f string) (*sql.DB, error) {
	now, err := os.Stat(f)
	if err != nil {
		return nil, err
	}
	if o, ok := x.dbs[f]; ok {
		if os.SameFile(o.file, now) {
			return o.db, nil
		}
		o.db.Close() // the database was dropped: its file is gone
		delete(x.dbs, f)
	}
	db, err := sql.Open("sqlite", "file:"+f+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	x.dbs[f] = openFile{db: db, file: now}
	return db, nil
}

func (x *idIndexer) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for f, o := range x.dbs {
		o.db.Close()
		delete(x.dbs, f)
	}
}
