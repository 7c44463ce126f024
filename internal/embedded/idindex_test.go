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

// plan returns SQLite's plan for FerretDB's own lookup of a document by _id
// (internal/backends/sqlite/collection.go: WHERE _ferretdb_sjson->'$._id'
// = ?) on the table of collection coll of database db in dir.
func plan(t testing.TB, dir, db, coll string) string {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+filepath.Join(dir, db+".sqlite")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var table string
	if err := conn.QueryRow(`SELECT table_name FROM _ferretdb_collections WHERE name = ?`, coll).Scan(&table); err != nil {
		t.Fatalf("the table of %s: %v", coll, err)
	}
	rows, err := conn.Query(fmt.Sprintf(`EXPLAIN QUERY PLAN SELECT _ferretdb_sjson FROM %q WHERE _ferretdb_sjson->'$._id' = ?`, table), `"a"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	return strings.Join(out, "; ")
}

// startWithDocuments starts a server on dir and writes n documents into
// collection c of database d through the driver.
func startWithDocuments(t testing.TB, dir string, n int) (*embedded.Server, *mongo.Collection) {
	t.Helper()
	s, err := embedded.Start(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	client, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Disconnect(context.Background()) })
	coll := client.Database("d").Collection("c")
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: fmt.Sprintf("doc-%d", i)}, {Key: "n", Value: i}}
	}
	if _, err := coll.InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	return s, coll
}

// FerretDB's lookups by _id read every row of a collection's table on
// SQLite; with the index the server adds they search it, and finds and
// updates by _id still answer as before.
func TestIndexIDs_lets_a_lookup_by_id_search_the_table(t *testing.T) {
	dir := t.TempDir()
	s, coll := startWithDocuments(t, dir, 50)
	ctx := context.Background()
	if err := s.IndexIDs(ctx); err != nil {
		t.Fatal(err)
	}
	if p := plan(t, dir, "d", "c"); !strings.Contains(p, "USING INDEX") || !strings.Contains(p, "_projector_id") {
		t.Fatalf("plan of a lookup by _id: %s", p)
	}
	res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "doc-7"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 70}}}})
	if err != nil || res.MatchedCount != 1 {
		t.Fatalf("update by _id: %+v %v", res, err)
	}
	var got struct {
		N int `bson:"n"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "doc-7"}}).Decode(&got); err != nil || got.N != 70 {
		t.Fatalf("find by _id: %+v %v", got, err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "doc-7"}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("a second doc-7: %v, want a duplicate key error", err)
	}
}

// Without being asked, the server indexes a table FerretDB creates, within a
// bounded time; a collection dropped and made again is indexed again, and so
// is a database dropped and made again (a new file under the same name).
func TestServer_indexes_new_tables_by_itself(t *testing.T) {
	dir := t.TempDir()
	_, coll := startWithDocuments(t, dir, 3)
	waitIndexed := func() {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(plan(t, dir, "d", "c"), "_projector_id") {
			if time.Now().After(deadline) {
				t.Fatalf("not indexed after 20s: %s", plan(t, dir, "d", "c"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitIndexed()
	ctx := context.Background()
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "again"}}); err != nil {
		t.Fatal(err)
	}
	waitIndexed()
	if err := coll.Database().Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "once more"}}); err != nil {
		t.Fatal(err)
	}
	waitIndexed()
}
