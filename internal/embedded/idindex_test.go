package embedded_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	_ "modernc.org/sqlite"

	"github.com/revgate/projector/internal/embedded"
)

// lookupByID is how FerretDB 1.24's SQLite backend finds a document by
// _id, in its finds, updates and deletes (metadata.IDColumn,
// internal/backends/sqlite/collection.go: "WHERE %s = ?").
const lookupByID = `SELECT _ferretdb_sjson FROM %q WHERE _ferretdb_sjson->'$._id' = ?`

// plan returns SQLite's plan of FerretDB's lookup by _id in the table of
// collection coll of database db, through a connection it closes before it
// returns (the test drops databases).
func plan(t *testing.T, dir, db, coll string) string {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+filepath.Join(dir, db+".sqlite")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var table string
	if err := conn.QueryRow(`SELECT table_name FROM _ferretdb_collections WHERE name = ?`, coll).Scan(&table); err != nil {
		t.Fatalf("table of %s.%s: %v", db, coll, err)
	}
	rows, err := conn.Query("EXPLAIN QUERY PLAN "+fmt.Sprintf(lookupByID, table), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(steps, "; ")
}

// waitIndexed waits until FerretDB's lookup by _id in db.coll searches an
// index, and fails the test if it does not within 30 s.
func waitIndexed(t *testing.T, dir, db, coll string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := plan(t, dir, db, coll)
		if strings.Contains(p, "USING INDEX") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s.%s: FerretDB's lookup by _id still reads the whole table 30 s after its creation: %s", db, coll, p)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// start starts a server on dir, closed as the test ends.
func start(t *testing.T, dir string) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func connect(t *testing.T, s *embedded.Server) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// big is how many documents insert makes a database larger than the size
// from which the server indexes a new collection's table (1 MiB).
const big = 3000

// insert inserts n documents of some 500 bytes each.
func insert(t *testing.T, coll *mongo.Collection, n int) {
	t.Helper()
	pad := strings.Repeat("x", 500)
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: fmt.Sprintf("doc-%d", i)}, {Key: "n", Value: i}, {Key: "pad", Value: pad}}
	}
	if _, err := coll.InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
}

func TestStart_indexes_the_lookup_by_id_of_a_collection_created_while_it_runs(t *testing.T) {
	dir := t.TempDir()
	c := connect(t, start(t, dir))
	ctx := context.Background()
	orders := c.Database("shop").Collection("orders")
	insert(t, orders, big)
	if p := plan(t, dir, "shop", "orders"); strings.Contains(p, "USING INDEX") {
		// FerretDB's own _id index is on another expression: were it
		// used, the server would have nothing to add.
		t.Logf("FerretDB's lookup searched an index at once: %s", p)
	}
	waitIndexed(t, dir, "shop", "orders")

	byIDStillRight(t, orders)

	// A collection dropped and created again under its name is a new
	// table, indexed in its turn.
	if err := orders.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	insert(t, orders, 10)
	waitIndexed(t, dir, "shop", "orders")

	// A small database is left alone: a pass over its tables costs little,
	// and each look at its file is a chance to meet a drop.
	insert(t, c.Database("tiny").Collection("notes"), 10)
	time.Sleep(3500 * time.Millisecond) // three of the server's rounds
	if p := plan(t, dir, "tiny", "notes"); strings.Contains(p, "USING INDEX") {
		t.Fatalf("the server indexed a database of 10 documents: %s", p)
	}
}

func TestStart_indexes_the_collections_in_its_data_dir_before_it_serves(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Start(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// A database too small for the server to index while it runs.
	insert(t, connect(t, s).Database("ledger").Collection("accounts"), 50)
	s.Close()
	if p := plan(t, dir, "ledger", "accounts"); strings.Contains(p, "USING INDEX") {
		t.Fatalf("indexed while the server ran: %s", p)
	}

	s, err = embedded.Start(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p := plan(t, dir, "ledger", "accounts"); !strings.Contains(p, "USING INDEX") {
		t.Fatalf("as the server starts, FerretDB's lookup by _id reads the whole table: %s", p)
	}
	var got struct{ N int }
	if err := connect(t, s).Database("ledger").Collection("accounts").FindOne(context.Background(), bson.D{{Key: "_id", Value: "doc-49"}}).Decode(&got); err != nil || got.N != 49 {
		t.Fatalf("find by _id after the restart: %v, %+v", err, got)
	}
}

// A database dropped and created again under its name, over and over, each
// time after the server indexed it, keeps what is written to it: the
// server's own connections to its file must not leave the dropped
// database's log for the new one to read.
func TestStart_a_database_dropped_and_made_again_keeps_its_documents(t *testing.T) {
	dir := t.TempDir()
	c := connect(t, start(t, dir))
	ctx := context.Background()
	for round := range 5 {
		db := c.Database("again")
		insert(t, db.Collection("items"), big+round)
		waitIndexed(t, dir, "again", "items")
		if n, err := db.Collection("items").CountDocuments(ctx, bson.D{}); err != nil || n != int64(big+round) {
			t.Fatalf("round %d: %d documents, %v; want %d", round, n, err, big+round)
		}
		if err := db.Drop(ctx); err != nil {
			t.Fatalf("round %d: drop: %v", round, err)
		}
	}
}

// The server's index has a name FerretDB gives none: a collection's own
// index named like it, made before or after, is no conflict.
func TestStart_indexes_beside_a_users_index_of_the_same_name(t *testing.T) {
	dir := t.TempDir()
	c := connect(t, start(t, dir))
	ctx := context.Background()
	named := mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}, Options: options.Index().SetName("projector_by_id")}
	before := c.Database("yard").Collection("before")
	if _, err := before.Indexes().CreateOne(ctx, named); err != nil {
		t.Fatal(err)
	}
	insert(t, before, big)
	waitIndexed(t, dir, "yard", "before")
	after := c.Database("yard").Collection("after")
	insert(t, after, 10)
	waitIndexed(t, dir, "yard", "after")
	if _, err := after.Indexes().CreateOne(ctx, named); err != nil {
		t.Fatalf("an index named projector_by_id after the server's: %v", err)
	}
}

// byIDStillRight checks, on coll of big documents (insert), that reads and
// writes by _id find the same documents with the server's index, and that
// FerretDB lists its own indexes only.
func byIDStillRight(t *testing.T, orders *mongo.Collection) {
	t.Helper()
	ctx := context.Background()
	r, err := orders.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "doc-42"}}, bson.D{{Key: "n", Value: -42}})
	if err != nil || r.MatchedCount != 1 {
		t.Fatalf("replace by _id: %v, %+v", err, r)
	}
	var got struct{ N int }
	if err := orders.FindOne(ctx, bson.D{{Key: "_id", Value: "doc-42"}}).Decode(&got); err != nil || got.N != -42 {
		t.Fatalf("find by _id: %v, %+v", err, got)
	}
	if d, err := orders.DeleteOne(ctx, bson.D{{Key: "_id", Value: "doc-7"}}); err != nil || d.DeletedCount != 1 {
		t.Fatalf("delete by _id: %v, %+v", err, d)
	}
	if n, err := orders.CountDocuments(ctx, bson.D{}); err != nil || n != big-1 {
		t.Fatalf("count: %d, %v; want %d", n, err, big-1)
	}
	specs, err := orders.Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 || specs[0].Name != "_id_" {
		t.Fatalf("listIndexes: %+v, want FerretDB's _id_ alone", specs)
	}
}
