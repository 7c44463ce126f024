package mongostore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
)

func TestZZExp(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Database(t)
	coll := db.Collection("exp")
	have := 0
	for _, n := range []int{200, 2000, 20000} {
		var docs []any
		for i := have; i < n; i++ {
			docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprint(i)}, {Key: "revision", Value: int64(0)}, {Key: "status", Value: "x"}})
		}
		for i := 0; i < len(docs); i += 500 {
			if _, err := coll.InsertMany(ctx, docs[i:min(i+500, len(docs))]); err != nil {
				t.Fatal(err)
			}
		}
		have = n
		var ids []string
		for i := range 50 {
			ids = append(ids, fmt.Sprint(i*(n/50)))
		}
		tt := time.Now()
		cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
		if err != nil {
			t.Fatal(err)
		}
		var got []bson.Raw
		if err := cur.All(ctx, &got); err != nil {
			t.Fatal(err)
		}
		t.Logf("n=%d $in: %d docs %v", n, len(got), time.Since(tt))
		s := mongostore.New(db)
		tt = time.Now()
		m, err := s.LoadMany(ctx, "exp", ids, func() any { return new(bson.Raw) })
		t.Logf("n=%d LoadMany: %d docs %v %v", n, len(m), time.Since(tt), err)
	}
}
