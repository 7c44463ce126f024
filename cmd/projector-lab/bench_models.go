package main

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
)

// benchModel is a read model bench measures: one of the cart's projections,
// and how its documents follow from the carts' lives.
type benchModel struct {
	name string // the --projection value
	// what the model is, for the report
	shape string
	def   func() projector.Definition
	// expect folds the lives into each document's state, as the projection
	// routes them: a document fed by many carts gets their events cart by
	// cart (its steps do not depend on how carts interleave).
	expect func(lives map[string][]projector.Event) (map[string]any, error)
	// decode reads a stored document into the projection's state.
	decode func(raw bson.Raw) (any, error)
	// revisions: the documents hold a stream revision (the gate), checked
	// against the last event of their stream.
	revisions bool
}

// benchModels are the read models bench can measure (--projection).
var benchModels = map[string]benchModel{
	"details": modelOf("details", "one document per cart stream, revision gate", cart.NewDetailsProjection, true),
	"client":  modelOf("client", "one document per client, fed by its carts, per-stream revision map", cart.NewClientSummaryProjection, false),
	"shop":    modelOf("shop", "one document fed by every cart, handled-ids window", cart.NewShopSummaryProjection, false),
}

func modelOf[S any](name, shape string, newP func() *projector.Projection[S], revisions bool) benchModel {
	return benchModel{
		name: name, shape: shape, revisions: revisions,
		def: func() projector.Definition { return newP() },
		expect: func(lives map[string][]projector.Event) (map[string]any, error) {
			p := newP()
			byDoc := map[string][]projector.Event{}
			for _, id := range slices.Sorted(maps.Keys(lives)) {
				for _, ev := range lives[id] {
					doc, ok, err := p.Route(ev)
					if err != nil {
						return nil, fmt.Errorf("%s at %d: %w", ev.StreamID, ev.StreamRevision, err)
					}
					if ok {
						byDoc[doc] = append(byDoc[doc], ev)
					}
				}
			}
			out := make(map[string]any, len(byDoc))
			for doc, evs := range byDoc {
				s, err := p.Fold(evs...)
				if err != nil {
					return nil, fmt.Errorf("document %s: %w", doc, err)
				}
				out[doc] = s
			}
			return out, nil
		},
		decode: func(raw bson.Raw) (any, error) {
			var s S
			err := bson.Unmarshal(raw, &s)
			return s, err
		},
	}
}

// benchExpected is what a model's documents must be after a catch-up of the
// lives: each document's state, and its collection.
type benchExpected struct {
	model      benchModel
	collection string
	docs       map[string]any
	lives      map[string][]projector.Event
}

func expectedOf(m benchModel, lives map[string][]projector.Event) (benchExpected, error) {
	docs, err := m.expect(lives)
	if err != nil {
		return benchExpected{}, fmt.Errorf("the fold of the %s projection: %w", m.name, err)
	}
	return benchExpected{model: m, collection: m.def().Collection(), docs: docs, lives: lives}, nil
}

// wrong returns how many of the model's documents in db differ from the
// fold of their events, are missing, or should not be there. It reads the
// collection in one scan (a query per _id took minutes at 20,000 carts on
// FerretDB) and decodes each document as the store does (the whole document
// into the state). Both sides go through BSON, so that what the store
// cannot tell apart (an empty map and none) compares equal. Under the
// revision gate, a document's revision must be its stream's last.
func (x benchExpected) wrong(ctx context.Context, db *mongo.Database) int {
	cur, err := db.Collection(x.collection).Find(ctx, bson.D{})
	if err != nil {
		return len(x.docs)
	}
	defer cur.Close(ctx)
	seen, wrong := 0, 0
	for cur.Next(ctx) {
		id, _ := cur.Current.Lookup("_id").StringValueOK()
		want, ok := x.docs[id]
		if !ok {
			wrong++
			continue
		}
		seen++
		got, err := x.model.decode(cur.Current)
		if err != nil || !sameBSON(x.model, got, want) {
			wrong++
			continue
		}
		if x.model.revisions {
			evs := x.lives[id]
			rev, _ := cur.Current.Lookup(mongostore.FieldRevision).AsInt64OK()
			if len(evs) == 0 || rev != int64(evs[len(evs)-1].StreamRevision) {
				wrong++
			}
		}
	}
	if cur.Err() != nil {
		return len(x.docs)
	}
	return wrong + len(x.docs) - seen
}

// sameBSON reports whether got (decoded from the store) equals want once
// want has been through BSON too.
func sameBSON(m benchModel, got, want any) bool {
	raw, err := bson.Marshal(want)
	if err != nil {
		return false
	}
	norm, err := m.decode(raw)
	return err == nil && reflect.DeepEqual(got, norm)
}

// floor is L: the documents the pure fold gives, written by unordered bulk
// inserts, in commands as large as the store's, into the projection's
// collection with its indexes: the read model A makes.
func (x benchExpected) floor(ctx context.Context, db *mongo.Database) error {
	ids := slices.Sorted(maps.Keys(x.docs))
	docs := make([]any, 0, len(ids))
	for _, id := range ids {
		raw, err := bson.Marshal(x.docs[id])
		if err != nil {
			return err
		}
		doc := bson.D{{Key: "_id", Value: id}}
		if x.model.revisions {
			evs := x.lives[id]
			doc = append(doc, bson.E{Key: mongostore.FieldRevision, Value: int64(evs[len(evs)-1].StreamRevision)})
		}
		elems, _ := bson.Raw(raw).Elements()
		for _, el := range elems {
			doc = append(doc, bson.E{Key: el.Key(), Value: el.Value()})
		}
		docs = append(docs, doc)
	}
	// As many to a command as the store sends: FerretDB takes 50 at a time.
	size := 1000
	if caps, err := mongostore.New(db).Capabilities(ctx); err != nil {
		return err
	} else if strings.HasPrefix(caps.Server, "FerretDB") {
		size = 50
	}
	// The same read model as A's: the projection's collection with its
	// indexes (A makes them too, in its time), which every insert keeps.
	if err := mongostore.New(db).EnsureIndexes(ctx, x.collection, x.model.def().Indexes()); err != nil {
		return err
	}
	coll := db.Collection(x.collection)
	for chunk := range slices.Chunk(docs, size) {
		if _, err := coll.InsertMany(ctx, chunk, options.InsertMany().SetOrdered(false)); err != nil {
			return err
		}
	}
	return nil
}
