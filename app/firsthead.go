package app

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// lookAtFirstHead looks once at each projection's collection when its
// runner first reaches the head of a log that has events, until ctx is
// done, and warns of what a projection misconfigured leaves there:
//   - no document at all: its filter may name none of its streams
//     (Category("animals") for streams "animal-<id>"), or its router may
//     route none of the events it reads;
//   - a document whose id begins with a separator ("-a1"): a router's
//     stream prefix without its own ("animal" for "animal-a1").
//
// Both are silent otherwise: the projection is caught up, ready, and its
// read model empty or keyed wrong.
func (s *session) lookAtFirstHead(ctx context.Context, head *headSampler) {
	looked := make([]bool, len(s.slots))
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for left := len(s.slots); left > 0; {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		at, _ := head.read()
		for i, sl := range s.slots {
			r := sl.cur.Load()
			if looked[i] || r == nil || at == 0 || !sl.CaughtUp() || runsElsewhere(sl) {
				continue
			}
			looked[i], left = true, left-1
			s.lookAt(ctx, sl, r.Name(), at)
		}
	}
}

// lookAt warns of what collection coll of slot sl holds, once its runner
// reached the head (at) of the log: see lookAtFirstHead.
func (s *session) lookAt(ctx context.Context, sl *slot, coll string, at uint64) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var doc struct {
		ID any `bson:"_id"`
	}
	err := s.store.Database().Collection(coll).FindOne(ctx, bson.D{}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&doc)
	st := sl.Stats()
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		s.logger.Warn("caught up with the head of $all, and the projection's collection has no document: "+
			"if its events are in the log, its filter does not name their streams or types, or its router routes none of them",
			"projection", sl.name, "collection", coll, "reads", sl.projection.Reads.String(), "head", at,
			"read", st.Events, "routed_nowhere", st.Unrouted)
	case err != nil:
		s.logger.Debug("looking at the projection's collection at the head", "projection", sl.name, "err", err)
	default:
		s.logger.Debug("looked at the projection's collection at the head: it has documents", "projection", sl.name, "collection", coll)
		if id, ok := doc.ID.(string); ok && id != "" && strings.ContainsAny(id[:1], "-:/.") {
			s.logger.Warn("a document id begins with a separator: is the stream prefix of the projection's router missing its own "+
				"(StreamSuffix(\"animal\") for streams \"animal-a1\" gives ids \"-a1\")?",
				"projection", sl.name, "collection", coll, "document", id)
		}
	}
}
