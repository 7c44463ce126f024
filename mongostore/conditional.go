package mongostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/revgate/projector/projector/driver"
)

// Every read and write of a projection document that depends on what the
// document holds (its revision, its version) goes through this file, so that
// its cost does not grow with the collection on any server:
//
//   - On MongoDB the condition is in the filter, beside the _id, and the
//     server finds the document through its _id index and checks the
//     condition atomically with the write.
//   - FerretDB 1.24's SQLite backend, the embedded default, turns a filter
//     into SQL only when it is {_id: <string>} alone
//     (internal/backends/sqlite/collection.go, Query); any other filter,
//     {_id, revision} included, reads and decodes every document of the
//     collection for each statement (internal/handler/msg_update.go: Query,
//     then FilterIterator). There the store asks for the document by _id
//     and checks the condition itself, then writes by _id. That is no
//     weaker than FerretDB's own conditional update, which also selects
//     the document and then writes it by _id, unconditionally
//     (internal/handler/common/update.go, UpdateDocument, then UpdateAll):
//     on FerretDB, one engine writes a document at a time
//     ([Capabilities].AtomicConditionalWrites).

// cond is a condition on one integer field of a document besides its _id:
// equal to n, or, with atLeast, n or more.
type cond struct {
	field   string // dotted for a field of a subdocument
	n       int64
	atLeast bool
}

// filter is the condition as a filter on document id.
func (c cond) filter(id string) bson.D {
	var v any = c.n
	if c.atLeast {
		v = bson.D{{Key: "$gte", Value: c.n}}
	}
	return bson.D{{Key: fieldID, Value: id}, {Key: c.field, Value: v}}
}

// holds reports whether the condition holds on doc.
func (c cond) holds(doc bson.Raw) bool {
	v, err := doc.LookupErr(strings.Split(c.field, ".")...)
	if err != nil {
		return false
	}
	n, ok := v.AsInt64OK()
	return ok && (n == c.n || c.atLeast && n > c.n)
}

// checksItself reports whether the store checks conditions itself on this
// server (FerretDB), filtering on _id alone.
func (s *Store) checksItself(ctx context.Context) bool { return s.bulkLimits(ctx).byID }

// byID is the filter on document id alone.
func byID(id string) bson.D { return bson.D{{Key: fieldID, Value: id}} }

// findIf reads document id when c holds on it; found is false otherwise.
// A projection in opts must keep c's field.
func (s *Store) findIf(ctx context.Context, coll *mongo.Collection, id string, c cond, opts ...options.Lister[options.FindOneOptions]) (doc bson.Raw, found bool, err error) {
	itself := s.checksItself(ctx)
	filter := c.filter(id)
	if itself {
		filter = byID(id)
	}
	raw, err := coll.FindOne(ctx, filter, opts...).Raw()
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case itself && !c.holds(raw):
		return nil, false, nil
	}
	return raw, true, nil
}

// replaceIf replaces document id with doc when c holds on it, and reports
// whether it did.
func (s *Store) replaceIf(ctx context.Context, coll *mongo.Collection, id string, c cond, doc any) (bool, error) {
	if !s.checksItself(ctx) {
		res, err := coll.ReplaceOne(ctx, c.filter(id), doc)
		return err == nil && res.MatchedCount == 1, refusal(err)
	}
	if _, ok, err := s.findIf(ctx, coll, id, c, options.FindOne().SetProjection(bson.D{{Key: c.field, Value: 1}})); !ok || err != nil {
		return false, err
	}
	res, err := coll.ReplaceOne(ctx, byID(id), doc)
	return err == nil && res.MatchedCount == 1, refusal(err)
}

// refusedCodes are the codes of a server's write error for a document it
// will not store as it is: BadValue (FerretDB: a key with '.' or a leading
// '$', an infinite number), InvalidBSON, DollarPrefixedFieldName,
// EmptyFieldName, DottedFieldName, DocumentValidationFailure (the
// collection's validator), BSONObjectTooLarge, and a document an update
// makes too large.
var refusedCodes = []int{2, 22, 52, 56, 57, 121, 10334, 17419, 17420}

// refusal is err, a write of one document's error, wrapping
// driver.ErrUnencodable where the server refused the document itself
// (refusedCodes): writing it again gives the same.
func refusal(err error) error {
	var we mongo.WriteException
	if errors.As(err, &we) && we.WriteConcernError == nil &&
		slices.ContainsFunc(we.WriteErrors, func(e mongo.WriteError) bool { return slices.Contains(refusedCodes, e.Code) }) {
		return fmt.Errorf("%w: %w", driver.ErrUnencodable, err)
	}
	return err
}

// deleteIf removes document id when c holds on it, and reports whether it
// did.
func (s *Store) deleteIf(ctx context.Context, coll *mongo.Collection, id string, c cond) (bool, error) {
	filter := c.filter(id)
	if s.checksItself(ctx) {
		if _, ok, err := s.findIf(ctx, coll, id, c, options.FindOne().SetProjection(bson.D{{Key: c.field, Value: 1}})); !ok || err != nil {
			return false, err
		}
		filter = byID(id)
	}
	res, err := coll.DeleteOne(ctx, filter)
	return err == nil && res.DeletedCount == 1, err
}

// replacement is one conditional replace of a bulk write: doc carries a
// write token ([fieldWrite]) no other write has.
type replacement struct {
	id  string
	c   cond
	doc bson.Raw
}

// replaceMany replaces documents conditionally, in any order, and reports
// which replacements took: in bulk commands of the store's size, each
// statement filtered as findIf says (on FerretDB, a command's documents
// are checked just before it). When the server matched fewer than it was
// sent, a read of the documents' write tokens tells which took.
func (s *Store) replaceMany(ctx context.Context, coll *mongo.Collection, reps []replacement) ([]bool, error) {
	limits := s.bulkLimits(ctx)
	ok := make([]bool, len(reps))
	all := make([]int, len(reps))
	for i := range reps {
		all[i] = i
	}
	for chunk := range slices.Chunk(all, limits.replaces) {
		if limits.byID {
			var err error
			if chunk, err = s.holding(ctx, coll, reps, chunk); err != nil {
				return nil, err
			}
		}
		if len(chunk) == 0 {
			continue
		}
		models := make([]mongo.WriteModel, len(chunk))
		for j, i := range chunk {
			filter := reps[i].c.filter(reps[i].id)
			if limits.byID {
				filter = byID(reps[i].id)
			}
			models[j] = mongo.NewReplaceOneModel().SetFilter(filter).SetReplacement(reps[i].doc)
		}
		res, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		var bw mongo.BulkWriteException
		switch {
		case errors.As(err, &bw) && bw.WriteConcernError == nil:
			// The server refused some of the documents (see refusal): the
			// others may have taken, which their tokens tell.
		case err != nil:
			return nil, fmt.Errorf("mongostore: write %d documents of %s: %w", len(chunk), coll.Name(), err)
		case int(res.MatchedCount) == len(chunk):
			for _, i := range chunk {
				ok[i] = true
			}
			continue
		}
		if err := s.tookByToken(ctx, coll, reps, chunk, ok); err != nil {
			return nil, err
		}
	}
	return ok, nil
}

// holding returns the replacements of chunk whose condition holds on the
// document as the server has it now: the store's own check, where the
// server cannot take the condition in its filter.
func (s *Store) holding(ctx context.Context, coll *mongo.Collection, reps []replacement, chunk []int) ([]int, error) {
	ids := make([]string, len(chunk))
	fields := bson.D{}
	for j, i := range chunk {
		ids[j] = reps[i].id
		if !slices.ContainsFunc(fields, func(e bson.E) bool { return e.Key == reps[i].c.field }) {
			fields = append(fields, bson.E{Key: reps[i].c.field, Value: 1})
		}
	}
	now, err := s.findEach(ctx, coll, ids, fields)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, i := range chunk {
		if doc, found := now[reps[i].id]; found && reps[i].c.holds(doc) {
			out = append(out, i)
		}
	}
	return out, nil
}

// tookByToken sets ok[i] for the replacements of chunk whose document holds
// their write token: another writer's has another.
func (s *Store) tookByToken(ctx context.Context, coll *mongo.Collection, reps []replacement, chunk []int, ok []bool) error {
	ids := make([]string, len(chunk))
	for j, i := range chunk {
		ids[j] = reps[i].id
	}
	now, err := s.findMany(ctx, coll, ids, bson.D{{Key: fieldWrite, Value: 1}})
	if err != nil {
		return err
	}
	for _, i := range chunk {
		doc, found := now[reps[i].id]
		ok[i] = found && tokenOf(doc) == tokenOf(reps[i].doc)
	}
	return nil
}

// findMany reads the documents of ids that exist (with projection, if not
// nil) by id: with one $in query on MongoDB, one query per id on FerretDB
// (findEach).
func (s *Store) findMany(ctx context.Context, coll *mongo.Collection, ids []string, projection bson.D) (map[string]bson.Raw, error) {
	if s.bulkLimits(ctx).byID {
		return s.findEach(ctx, coll, ids, projection)
	}
	out := make(map[string]bson.Raw, len(ids))
	for chunk := range slices.Chunk(ids, 1000) {
		opts := options.Find()
		if projection != nil {
			opts.SetProjection(projection)
		}
		cur, err := coll.Find(ctx, bson.D{{Key: fieldID, Value: bson.D{{Key: "$in", Value: chunk}}}}, opts)
		if err != nil {
			return nil, fmt.Errorf("mongostore: read %d documents of %s: %w", len(chunk), coll.Name(), err)
		}
		for cur.Next(ctx) {
			if id, ok := cur.Current.Lookup(fieldID).StringValueOK(); ok {
				out[id] = slices.Clone(cur.Current)
			}
		}
		err = cur.Err()
		cur.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("mongostore: read %d documents of %s: %w", len(chunk), coll.Name(), err)
		}
	}
	return out, nil
}

// findEach reads the documents of ids that exist one _id at a time, a few
// at once: on FerretDB a query on one _id uses its index, while $in reads
// the whole collection.
func (s *Store) findEach(ctx context.Context, coll *mongo.Collection, ids []string, projection bson.D) (map[string]bson.Raw, error) {
	out := make(map[string]bson.Raw, len(ids))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(byIDReaders)
	for _, id := range ids {
		g.Go(func() error {
			opts := options.FindOne()
			if projection != nil {
				opts.SetProjection(projection)
			}
			raw, err := coll.FindOne(gctx, byID(id), opts).Raw()
			if errors.Is(err, mongo.ErrNoDocuments) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("mongostore: read %s/%s: %w", coll.Name(), id, err)
			}
			mu.Lock()
			out[id] = raw
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
