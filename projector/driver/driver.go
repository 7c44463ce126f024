// Package driver defines what the projector engine needs of a document
// store: the interfaces a store implements (package mongostore is one), as
// package database/sql/driver does for database/sql. A projection author
// never uses it; the engine calls it.
//
// A store keeps one document per projection document id: the projection's
// state plus what the engine owns. Under the revision gate that is the
// stream revision of the last event applied ([Store]); under the other
// idempotency strategies it is a [Meta], and every write is conditional on
// its version ([GuardedStore]). Every write touches one document and is
// conditional, so no transaction is needed, except for the inbox strategy
// ([InboxStore]).
package driver

import (
	"context"
	"errors"
	"time"
)

// ErrDuplicate is what a store returns when an insert finds the document
// there already (or an inbox finds the event's record).
var ErrDuplicate = errors.New("document exists")

// ErrUnencodable is what a store returns, wrapped, when it cannot store a
// document's state: the state does not encode (its encoder fails or
// panics), encodes a field the engine owns, is larger than the server
// takes, or the server refuses it as it is (a key it does not take, a
// value it does not store, its validator). Nothing is written. The engine takes it as the failure of the
// event whose step gave that state, under the projection's failure policy:
// the other documents go on. A bulk write (WriteMany, PutGuardedMany)
// reports such a document as not written, and writes the others.
var ErrUnencodable = errors.New("the store cannot store the document's state")

// Store is the document store the revision gate reads and writes. Every
// document holds one projection state plus its [Head]: the revision of the
// last event applied to it, and the stream that feeds it.
type Store interface {
	// Load reads document id of collection when its revision is at least
	// minRevision, decoding the state into state (a pointer; nil reads only
	// the head). found is false when there is no such document.
	Load(ctx context.Context, collection, id string, minRevision uint64, state any) (head Head, found bool, err error)
	// Insert creates document id with head and state; ErrDuplicate when it
	// exists.
	Insert(ctx context.Context, collection, id string, head Head, state any) error
	// Update replaces the state and head of document id, only if its
	// revision is from; matched reports whether it was.
	Update(ctx context.Context, collection, id string, from uint64, head Head, state any) (matched bool, err error)
	// Delete removes document id, only if its revision is from; matched
	// reports whether it did.
	Delete(ctx context.Context, collection, id string, from uint64) (matched bool, err error)
	// EnsureIndexes creates the indexes, if missing.
	EnsureIndexes(ctx context.Context, collection string, indexes []Index) error
}

// Head is what a document under the revision gate holds of the events
// applied to it: the stream revision of the last one, and the stream that
// feeds it ("" for a document written before the stream was recorded).
// Deleted marks a document whose stream was deleted, kept for its readers
// under the mark-deleted policy; the next write without it clears it.
// Write is the token of the write that last wrote the document, where the
// store keeps one ("" otherwise): a write whose Head has one writes that
// token, else a new one. A replay tells by it whether its write took.
type Head struct {
	Revision uint64
	Stream   string
	Deleted  bool
	Write    string
}

// Index is a secondary index a projection asks for, for its readers.
type Index struct {
	// Keys are field names, ascending; a "-" prefix makes one descending.
	Keys   []string
	Unique bool
}

// BatchStore is what batched catch-up needs of the store: one read for many
// documents and unordered bulk writes, each still conditional on the revision
// it starts from. A store without it gets its events one at a time.
type BatchStore interface {
	Store
	// LoadMany reads the documents of ids that exist, decoding each state
	// into a value from newState.
	LoadMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]Loaded, error)
	// WriteMany applies writes, in any order; ok[i] reports whether writes[i]
	// took effect (an insert found no document, a replace found its From).
	WriteMany(ctx context.Context, collection string, writes []Write) (ok []bool, err error)
}

// Loaded is a document as LoadMany read it.
type Loaded struct {
	Revision uint64
	Stream   string
	State    any
	// Cached: from the store's cache of what it read or wrote, not from the
	// server, so possibly out of date. A write from it is conditional on
	// Revision and misses if so; the engine does not count events
	// duplicates on a cached document's word alone.
	Cached bool
}

// Write is one document write of a batch: an insert at Revision, or a
// replace from revision From to Revision, of a document fed by Stream.
type Write struct {
	ID       string
	Insert   bool
	From     uint64
	Revision uint64
	Stream   string
	State    any
}

// Meta is what a guarded document holds besides its state: how the engine
// knows which events it has applied. The store keeps it in fields of its own.
type Meta struct {
	// Version counts the writes; every write is conditional on it.
	Version int64
	// Revisions: last revision applied per source stream (RevisionMap).
	Revisions map[string]uint64
	// Position: global position of the last event applied (GlobalPosition),
	// and Prepare its prepare position where that is below Position (an
	// event of a transaction written by the legacy TCP API; 0 otherwise).
	Position uint64
	Prepare  uint64
	// Handled: the last events applied, oldest first (HandledIDs); Evicted:
	// the highest position among those that left the window, and
	// EvictedPrepare its prepare position where that is below it (as
	// Prepare is Position's).
	Handled        []Handled
	Evicted        uint64
	EvictedPrepare uint64
	// Replayed is the parked event last replayed into the document: the
	// replay's write sets it with its change, and later writes keep it.
	Replayed string
}

// Handled is an event a HandledIDs window remembers: its id, its commit
// position, and its prepare position where that is below it (an event of
// a transaction written by the legacy TCP API; 0 otherwise).
type Handled struct {
	ID       string
	Position uint64
	Prepare  uint64
}

// GuardedStore is what the strategies other than the revision gate need of
// the store: whole-document reads and version-conditional writes.
type GuardedStore interface {
	// LoadGuarded reads document id with its meta, decoding the state into
	// state; found is false when there is none.
	LoadGuarded(ctx context.Context, collection, id string, state any) (Meta, bool, error)
	// PutGuarded writes state and meta (meta.Version is the new version) if
	// the stored version is expected (-1: only if there is no document);
	// written is false otherwise.
	PutGuarded(ctx context.Context, collection, id string, expected int64, meta Meta, state any) (written bool, err error)
}

// GuardedBatchStore is what batched catch-up needs of the store for
// versioned documents: one read for many documents and a bulk write, each
// write still conditional on the version its document was read at. A store
// without it gets the events of versioned documents one at a time.
type GuardedBatchStore interface {
	GuardedStore
	// LoadGuardedMany reads the documents of ids that exist, with their
	// meta, decoding each state into a value from newState.
	LoadGuardedMany(ctx context.Context, collection string, ids []string, newState func() any) (map[string]Guarded, error)
	// PutGuardedMany applies puts, in any order; ok[i] reports whether
	// puts[i] took effect (the stored version was its Expected).
	PutGuardedMany(ctx context.Context, collection string, puts []Put) (ok []bool, err error)
}

// Guarded is a versioned document as LoadGuardedMany read it.
type Guarded struct {
	Meta  Meta
	State any
	// Cached: from the store's cache, as for [Loaded]: a put from it is
	// conditional on its version and misses if another writer moved it.
	Cached bool
}

// Put is one write of a versioned document: if its stored version is
// Expected (-1: only if there is no document), it becomes State with Meta
// (Meta.Version is the new version).
type Put struct {
	ID       string
	Expected int64
	Meta     Meta
	State    any
}

// InboxStore is what the inbox strategy needs: transactions and an inbox
// collection.
type InboxStore interface {
	GuardedStore
	// Transactions reports whether the server runs multi-document
	// transactions.
	Transactions(ctx context.Context) (bool, error)
	// EnsureInbox creates the inbox collection of projection with a TTL of
	// retention on its records.
	EnsureInbox(ctx context.Context, projection string, retention time.Duration) error
	// InTransaction runs fn in a transaction; fn's store calls take its ctx.
	InTransaction(ctx context.Context, fn func(ctx context.Context) error) error
	// Receive records event id in projection's inbox; ErrDuplicate when it is
	// there already.
	Receive(ctx context.Context, projection, eventID string) error
}

type holdBackKey struct{}

// HoldBack returns ctx marked so that a store may hold back the batch
// writes made under it: a GuardedBatchStore's PutGuardedMany may keep the
// documents in memory, checked against the document as the store keeps it,
// and the next LoadGuardedMany under such a context reads them from there.
// Such a store has a method Flush(ctx, collections ...string) error that
// writes what it holds back of those collections, and writes a document it
// holds back before any other read or write of it. A runner marks the batches it handles behind the head, and
// flushes before it stores a checkpoint and before it says it has caught
// up, so that a checkpoint covers only what is written.
func HoldBack(ctx context.Context) context.Context {
	return context.WithValue(ctx, holdBackKey{}, true)
}

// HeldBack reports whether ctx lets a store hold writes back ([HoldBack]).
func HeldBack(ctx context.Context) bool { v, _ := ctx.Value(holdBackKey{}).(bool); return v }
