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
// in every find, update and delete whose filter is {_id: value}, but
// indexes _id on _ferretdb_sjson->"_id" (Registry.indexesCreate), which
// SQLite does not take for the other: each of them reads the whole table.
// So writing one document costs a pass over its collection, and a
// projection slows as its read model grows (100 replaces by _id: 0.48 s in
// a collection of 1,000 documents, 17 s in one of 50,000; 25 ms at 50,000
// with an index on byIDExpr).
//
// The server gives each collection's table an index on byIDExpr itself:
// every table in the data dir before FerretDB opens it, and, while it
// runs, the table of each collection created since, once its database's
// files hold indexFrom bytes (below that a pass costs little). FerretDB
// does not know the index (listIndexes and collStats leave it out); SQLite
// keeps it up to date and drops it with its table. Its name, the table's
// and byIDSuffix, is none FerretDB gives an index (<table>_<name>).
//
// While FerretDB runs, the server opens a database's file with a
// connection of its own as rarely and as briefly as it can: once for each
// new collection, never for a small database (such as the tests' many).
// It cannot do without: FerretDB's registry, which orders its own
// connections, is not reachable from outside, and a database FerretDB
// drops while another connection has its file open leaves that
// connection's write-ahead log behind, for a new database of the same
// name, made before that connection closes, to read as its own.
const (
	byIDExpr    = `_ferretdb_sjson->'$._id'`
	byIDSuffix  = "$projector_by_id"
	sqliteExt   = ".sqlite"
	indexFrom   = 1 << 20
	indexEvery  = time.Second
	indexWithin = 30 * time.Second // one round of looking, at most
	indexAgain  = time.Minute      // after a database failed a round
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

// indexTables gives the tables of the collections of database db (its
// file in dir) the index on byIDExpr, those named in only (all with nil),
// and returns the keys of the collections whose table has it. It opens
// the file only if it exists, and logs each index it makes.
func indexTables(ctx context.Context, dir, db string, only map[string]bool, log *slog.Logger) ([]string, error) {
	file := filepath.Join(dir, db+sqliteExt)
	before, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	conn, err := sql.Open("sqlite", "file:"+file+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(1)
	done, err := createIndexes(ctx, conn, db, only, log)
	err = errors.Join(err, conn.Close())
	if after, serr := os.Stat(file); serr != nil || !os.SameFile(before, after) {
		log.Warn("embedded: a database was dropped while the server indexed its _id lookups: a database made again under its name meanwhile may read the dropped one's log",
			"database", db)
	}
	return done, err
}

// createIndexes is indexTables on the connection conn to db's file.
func createIndexes(ctx context.Context, conn *sql.DB, db string, only map[string]bool, log *slog.Logger) ([]string, error) {
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
		var n int
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?`, tbl+byIDSuffix).Scan(&n); err != nil {
			return done, fmt.Errorf("collection %s: %w", t.name, err)
		}
		if n == 0 {
			began := time.Now()
			q := fmt.Sprintf(`CREATE INDEX %q ON %q (%s)`, tbl+byIDSuffix, tbl, byIDExpr)
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return done, fmt.Errorf("collection %s: %w", t.name, err)
			}
			log.Info("embedded: indexed FerretDB's lookups by _id", "database", db, "collection", t.name, "took", time.Since(began))
		}
		done = append(done, t.key)
	}
	return done, nil
}

// databases lists the databases of dir, by their files: FerretDB's
// listDatabases reads every page of each to size it.
func databases(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*"+sqliteExt))
	dbs := make([]string, len(files))
	for i, f := range files {
		dbs[i] = strings.TrimSuffix(filepath.Base(f), sqliteExt)
	}
	return dbs, err
}

// indexDir indexes the tables of every database in dir, and returns the
// keys of the collections whose table has the index. FerretDB must not
// have the files open yet. It logs what it cannot index, and goes on.
func indexDir(ctx context.Context, dir string, log *slog.Logger) map[string]bool {
	seen := map[string]bool{}
	dbs, err := databases(dir)
	if err != nil {
		log.Warn("embedded: listing the data dir to index _id lookups", "err", err)
	}
	for _, db := range dbs {
		done, err := indexTables(ctx, dir, db, nil, log)
		if err != nil {
			log.Warn("embedded: indexing _id lookups", "database", db, "err", err)
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
	// later holds the databases that failed a round, and when to try them
	// again.
	later map[string]time.Time
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
			x.round(rctx)
			cancel()
		}
	}
}

// round indexes the collections it has not seen, and forgets those gone.
func (x *idIndexer) round(ctx context.Context) {
	dbs, err := databases(x.dir)
	if err != nil {
		x.log.Warn("embedded: listing the data dir to index _id lookups", "err", err)
		return
	}
	listed := map[string]bool{}
	for _, db := range dbs {
		if time.Now().Before(x.later[db]) {
			continue
		}
		if err := x.database(ctx, db, listed); err != nil {
			if ctx.Err() == nil {
				x.later[db] = time.Now().Add(indexAgain)
				x.log.Warn("embedded: indexing _id lookups; trying again in a minute", "database", db, "err", err)
			}
			continue
		}
	}
	for k := range x.seen {
		if !listed[k] {
			delete(x.seen, k) // dropped (or in a database that failed: looked at again)
		}
	}
}

// database indexes the collections of database db that it has not seen,
// if db's files hold indexFrom bytes, and adds the keys of its collections
// to listed.
func (x *idIndexer) database(ctx context.Context, db string, listed map[string]bool) error {
	specs, err := x.client.Database(db).ListCollectionSpecifications(ctx, bson.D{})
	if err != nil {
		return err
	}
	only := map[string]bool{}
	for _, s := range specs {
		k := collectionKey(db, s.Name, uuidOf(s.UUID))
		listed[k] = true
		if !x.seen[k] {
			only[s.Name] = true
		}
	}
	if len(only) == 0 || sizeOf(filepath.Join(x.dir, db+sqliteExt)) < indexFrom {
		return nil
	}
	done, err := indexTables(ctx, x.dir, db, only, x.log)
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
	x := &idIndexer{dir: dir, client: client, log: log, seen: seen, later: map[string]time.Time{}}
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
