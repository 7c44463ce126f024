package projector

import "context"

// Store is the document store the gate reads and writes: MongoDB in
// mongostore. Every document holds one projection state plus the revision of
// the last event applied to it.
type Store interface {
	// Load reads document id of collection when its revision is at least
	// minRevision, decoding the state into state (a pointer; nil reads only
	// the revision). found is false when there is no such document.
	Load(ctx context.Context, collection, id string, minRevision uint64, state any) (revision uint64, found bool, err error)
	// Insert creates document id at revision with state; ErrDuplicate when it
	// exists.
	Insert(ctx context.Context, collection, id string, revision uint64, state any) error
	// Update replaces the state of document id and sets its revision to
	// revision, only if its revision is from; matched reports whether it was.
	Update(ctx context.Context, collection, id string, from, revision uint64, state any) (matched bool, err error)
	// EnsureIndexes creates the indexes, if missing.
	EnsureIndexes(ctx context.Context, collection string, indexes []Index) error
}

// Index is a secondary index a projection asks for, for its readers.
type Index struct {
	// Keys are field names, ascending; a "-" prefix makes one descending.
	Keys   []string
	Unique bool
}
