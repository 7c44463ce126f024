package mongostore

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Capabilities are what the server can do that the engine's guarantees
// depend on.
type Capabilities struct {
	// Server names the server: "MongoDB 7.0.14", "FerretDB 1.24.2".
	Server string
	// AtomicConditionalWrites: an update with a filter on revision is a
	// compare-and-swap, so that competing consumers (several engines, in one
	// process or many) can share the documents. True on MongoDB. False on
	// FerretDB 1.24, whose updates select the document and then write it by
	// _id: concurrent updates with the same filter all match. One engine is
	// exact there all the same, because it writes the events of a document one
	// at a time.
	AtomicConditionalWrites bool
	// Transactions: multi-document transactions (a replica set or a sharded
	// cluster of MongoDB).
	Transactions bool
}

// Capabilities asks the server what it is.
func (s *Store) Capabilities(ctx context.Context) (Capabilities, error) {
	admin := s.db.Client().Database("admin")
	var info struct {
		Version         string `bson:"version"`
		FerretDBVersion string `bson:"ferretdbVersion"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return Capabilities{}, fmt.Errorf("mongostore: buildInfo: %w", err)
	}
	if v := info.FerretDBVersion; v != "" {
		if v == "unknown" { // embedded builds do not stamp a version
			return Capabilities{Server: "FerretDB"}, nil
		}
		return Capabilities{Server: "FerretDB " + v}, nil
	}
	var hello struct {
		SetName string `bson:"setName"`
		Msg     string `bson:"msg"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return Capabilities{}, fmt.Errorf("mongostore: hello: %w", err)
	}
	return Capabilities{
		Server:                  "MongoDB " + info.Version,
		AtomicConditionalWrites: true,
		Transactions:            hello.SetName != "" || hello.Msg == "isdbgrid",
	}, nil
}
