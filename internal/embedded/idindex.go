package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
// every table in the data dir before FerretDB opens it, and, while it
// runs, the table of each collection created since, once its database's
// files hold indexFrom bytes (below that a pass costs little). FerretDB
// does not know the index (listIndexes does not show it); SQLite keeps it
// up to date and drops it with its table.
//
// The server opens a database's file for that with a connection of its
// own, as rarely and as briefly as it can: once for each new collection,
// and never for a small database (such as the tests' many). A database
// FerretDB drops while another connection has its file open leaves that
// connection's write-ahead log behind, for a new database of the same
// name, made before that connection closes, to read.
const (
	byIDExpr    = `_ferretdb_sjson->'$._id'`
	byIDSuffix  = "_projector_by_id"
	sqliteExt   = ".sqlite"
	indexFrom   = 1 << 20
	indexEvery  = time.Second
	indexWithin = 30 * time.Second // one round of looking, at most
)

// collectionKey names a collection in the indexer's set: by the UUID
// FerretDB gives each collection it creates (a collection dropped and
// created again under its name is another), or by database and name.
func collectionKey(db, name, uuid string) string {
	if uuid != "" {
		return uuid
	}
	return db + "\x00" + name
}

// indexTables gives the tables of the collections of database db (file
// in dir) the index on byIDExpr, those named in only (all with nil), and
// returns the keys of the collections whose table has it. It opens the
// file only if it exists.
func indexTables(ctx context.Context, dir, db string, only map[string]bool) ([]string, error) {
	conn, err := sql.Open("sqlite", "file:"+filepath.Join(dir, db+sqliteExt)+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	rows, err := conn.QueryContext(ctx, `SELECT name, table_name, settings FROM _ferretdb_collections`)
	if err != nil {
		return nil, err
	}
	type table struct{ name, key string }
	tables := map[string]table{}
	for rows.Next() {
		var name, tbl, settings string
		if err := rows.Scan(&name, &tbl, &settings); err != nil {
			rows.Close()
			return nil, err
		}
		var st struct {
			UUID string `json:"uuid"`
		}
		_ = json.Unmarshal([]byte(settings), &st) // no UUID: keyed by name
		if only == nil || only[name] {
			tables[tbl] = table{name, collectionKey(db, name, st.UUID)}
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	var done []string
	for tbl, t := range tables {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (%s)`, tbl+byIDSuffix, tbl, byIDExpr)
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return done, fmt.Errorf("collection %s: %w", t.name, err)
		}
		done = append(done, t.key)
	}
	return done, nil
}

// indexDir indexes the tables of every database in dir, and returns the
// keys of the collections whose table has the index. FerretDB must not
// have the files open yet. It logs what it cannot index, and goes on.
func indexDir(ctx context.Context, dir string, log *slog.Logger) map[string]bool {
	seen := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(dir, "*"+sqliteExt))
	if err != nil {
		log.Warn("embedded: listing the data dir to index _id lookups", "err", err)
		return seen
	}
	for _, f := range files {
		done, err := indexTables(ctx, dir, strings.TrimSuffix(filepath.Base(f), sqliteExt), nil)
		if err != nil {
			log.Warn("embedded: indexing _id lookups", "file", f, "err", err)
		}
		for _, k := range done {
			seen[k] = true
		}
	}
	return seen
}

// idIndexer indexes the tables of the collections created while the
// server runs: it lists them through the server, and opens a database's
// file only when one of its collections is new to it and the database is
// large enough.
type idIndexer struct {
	dir    string
	client *mongo.Client
	log    *slog.Logger
	seen   map[string]bool // collectionKey of those whose table has the index
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

// database indexes the collections of database db that it has not seen,
// if db's files hold indexFrom bytes.
func (x *idIndexer) database(ctx context.Context, db string) error {
	specs, err := x.client.Database(db).ListCollectionSpecifications(ctx, bson.D{})
	if err != nil {
		return err
	}
	only := map[string]bool{}
	for _, s := range specs {
		if !x.seen[collectionKey(db, s.Name, uuidOf(s.UUID))] {
			only[s.Name] = true
		}
	}
	if len(only) == 0 || sizeOf(filepath.Join(x.dir, db+sqliteExt)) < indexFrom {
		return nil
	}
	done, err := indexTables(ctx, x.dir, db, only)
	for _, k := range done {
		x.seen[k] = true
	}
	return err
}

// uuidOf is the UUID FerretDB gives a collection, as its settings hold it
// ("" if it has none).
func uuidOf(b *bson.Binary) string {
	if b == nil || len(b.Data) != 16 {
		return ""
	}
	d := b.Data
	return fmt.Sprintf("%x-%x-%x-%x-%x", d[0:4], d[4:6], d[6:8], d[8:10], d[10:16])
}

// sizeOf is the size of an SQLite database file and its write-ahead log.
func sizeOf(file string) int64 {
	var n int64
	for _, f := range []string{file, file + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// startIndexing indexes the tables of the collections created from now
// on (those not in seen), until ctx ends; wait returns once it has
// stopped.
func startIndexing(ctx context.Context, dir, uri string, seen map[string]bool, log *slog.Logger) (wait func(), err error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(indexWithin))
	if err != nil {
		return nil, err
	}
	x := &idIndexer{dir: dir, client: client, log: log, seen: seen}
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
