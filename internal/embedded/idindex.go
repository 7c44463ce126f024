package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	_ "modernc.org/sqlite" // FerretDB's SQLite driver, registered as "sqlite"
)

// FerretDB's SQLite backend finds a document by _id with the expression
// byIDExpr (metadata.IDColumn in its internal/backends/sqlite/metadata),
// in every find, update and delete by _id, but indexes _id on
// _ferretdb_sjson->"_id" (Registry.indexesCreate), which SQLite does not
// take for the other: each of them reads the whole table. So writing one
// document costs a pass over its collection, and a projection slows as
// its read model grows (100 replaces by _id: 0.48 s in a collection of
// 1,000 documents, 17 s in one of 50,000; 25 ms at 50,000 with an index
// on byIDExpr).
//
// The server gives each collection's table an index on byIDExpr itself:
// the tables in the data dir before FerretDB opens them, and a new
// collection's within indexEvery of when it is listed. FerretDB does not
// know the index (listIndexes does not show it); SQLite keeps it up to
// date and drops it with its table.
const (
	byIDExpr    = `_ferretdb_sjson->'$._id'`
	byIDSuffix  = "_projector_by_id"
	sqliteExt   = ".sqlite"
	indexEvery  = time.Second
	indexWithin = 30 * time.Second // one round of looking, at most
)

// indexTables gives the tables of the collections of one SQLite file the
// index on byIDExpr, those named in only (all with nil), and returns the
// collections whose table has it. It opens the file only if it exists,
// and holds its connection for as short as it can: a database FerretDB
// drops while another connection has its file open leaves that
// connection's write-ahead log behind, for a new database of the same
// name to read.
func indexTables(ctx context.Context, file string, only map[string]bool) ([]string, error) {
	db, err := sql.Open("sqlite", "file:"+file+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, `SELECT name, table_name FROM _ferretdb_collections`)
	if err != nil {
		return nil, err
	}
	tables := map[string]string{}
	for rows.Next() {
		var name, table string
		if err := rows.Scan(&name, &table); err != nil {
			rows.Close()
			return nil, err
		}
		if only == nil || only[name] {
			tables[name] = table
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	var done []string
	for name, table := range tables {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (%s)`, table+byIDSuffix, table, byIDExpr)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return done, fmt.Errorf("collection %s: %w", name, err)
		}
		done = append(done, name)
	}
	return done, nil
}

// indexDir indexes the tables of every SQLite file in dir; FerretDB must
// not have them open yet. It logs what it cannot index, and goes on.
func indexDir(ctx context.Context, dir string, log *slog.Logger) {
	files, err := filepath.Glob(filepath.Join(dir, "*"+sqliteExt))
	if err != nil {
		log.Warn("embedded: listing the data dir to index _id lookups", "err", err)
		return
	}
	for _, f := range files {
		if _, err := indexTables(ctx, f, nil); err != nil {
			log.Warn("embedded: indexing _id lookups", "file", f, "err", err)
		}
	}
}

// idIndexer indexes the tables of the collections created while the
// server runs: it lists them through the server, and opens a database's
// file only when one of its collections is new to it.
type idIndexer struct {
	dir    string
	client *mongo.Client
	log    *slog.Logger
	// seen holds the collections whose table has the index, by the UUID
	// FerretDB gives each collection it creates (a collection dropped and
	// created again under its name is new), or by database and name.
	seen map[string]bool
}

// run looks every indexEvery until ctx ends.
func (x *idIndexer) run(ctx context.Context) {
	t := time.NewTicker(indexEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, indexWithin)
			if err := x.round(rctx); err != nil && ctx.Err() == nil {
				x.log.Debug("embedded: indexing _id lookups", "err", err)
			}
			cancel()
		}
	}
}

// round indexes the collections it has not seen.
func (x *idIndexer) round(ctx context.Context) error {
	dbs, err := x.client.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range dbs {
		if err := x.database(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("database %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// database indexes the collections of one database that it has not seen.
func (x *idIndexer) database(ctx context.Context, name string) error {
	specs, err := x.client.Database(name).ListCollectionSpecifications(ctx, bson.D{})
	if err != nil {
		return err
	}
	fresh := map[string]string{} // collection name -> key in seen
	for _, s := range specs {
		key := name + "\x00" + s.Name
		if s.UUID != nil {
			key = fmt.Sprintf("%x", s.UUID.Data)
		}
		if !x.seen[key] && !strings.HasPrefix(s.Name, "system.") {
			fresh[s.Name] = key
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	only := make(map[string]bool, len(fresh))
	for c := range fresh {
		only[c] = true
	}
	done, err := indexTables(ctx, filepath.Join(x.dir, name+sqliteExt), only)
	for _, c := range done {
		x.seen[fresh[c]] = true
	}
	return err
}

// startIndexing indexes the tables of the collections created from now
// on, until ctx ends; wait returns once it has stopped.
func startIndexing(ctx context.Context, dir, uri string, log *slog.Logger) (wait func(), err error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(indexWithin))
	if err != nil {
		return nil, err
	}
	x := &idIndexer{dir: dir, client: client, log: log, seen: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.run(ctx)
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = client.Disconnect(dctx)
	}()
	return func() { <-done }, nil
}
