// Package lending is the lending desk of a library, as a team would write it
// for the projector: its events, and three read models kept by the
// projector's command line (see cmd/library-projector).
//
// Every loan is a stream, "loan/<loan id>": a book is checked out, maybe
// renewed, fined, and returned.
package lending

import (
	"time"

	"github.com/revgate/projector/projector"
)

// LoanStreams starts the name of every loan's stream; the rest is its id.
const LoanStreams = "loan/"

// LoanStream is the stream of loan id.
func LoanStream(id string) string { return LoanStreams + id }

// Event type names, as stored in the event store.
const (
	TypeCheckedOut = "library.book-checked-out.v2"
	TypeRenewed    = "library.loan-renewed.v1"
	TypeFined      = "library.fee-charged.v1"
	TypeReturned   = "library.book-returned.v1"
)

// Older forms, which the log keeps for ever: a checkout named its member by
// id alone until v2, and a fee was a fine.
const (
	TypeCheckedOutV1 = "library.book-checked-out.v1"
	TypeFinedOld     = "library.fine-charged.v1"
)

// BookCheckedOut starts a loan.
type BookCheckedOut struct {
	LoanID string    `json:"loanId"`
	BookID string    `json:"bookId"`
	Member Member    `json:"member"`
	At     time.Time `json:"at"`
	Due    time.Time `json:"due"`
}

// Member is who borrows a book: an id until v2 of BookCheckedOut.
type Member struct {
	ID string `json:"id"`
}

// BookCheckedOutV1 is the shape of a checkout before v2.
type BookCheckedOutV1 struct {
	LoanID   string    `json:"loanId"`
	BookID   string    `json:"bookId"`
	MemberID string    `json:"memberId"`
	At       time.Time `json:"at"`
	Due      time.Time `json:"due"`
}

// CheckedOutV2 turns a v1 checkout into today's: a pure function, run on
// every v1 event as it is decoded.
func CheckedOutV2(e BookCheckedOutV1) (BookCheckedOut, error) {
	return BookCheckedOut{LoanID: e.LoanID, BookID: e.BookID, Member: Member{ID: e.MemberID}, At: e.At, Due: e.Due}, nil
}

// LoanRenewed moves a loan's due date.
type LoanRenewed struct {
	LoanID   string    `json:"loanId"`
	MemberID string    `json:"memberId"`
	Due      time.Time `json:"due"`
}

// FineCharged charges the member for a late or damaged book.
type FineCharged struct {
	LoanID   string `json:"loanId"`
	MemberID string `json:"memberId"`
	Cents    int64  `json:"cents"`
}

// BookReturned ends a loan.
type BookReturned struct {
	LoanID   string    `json:"loanId"`
	MemberID string    `json:"memberId"`
	At       time.Time `json:"at"`
}

// MemberOf is the member a loan event concerns: every event of a loan carries
// it, so that a read model of members sees the whole loan.
func (e BookCheckedOut) MemberOf() string { return e.Member.ID }
func (e LoanRenewed) MemberOf() string    { return e.MemberID }
func (e FineCharged) MemberOf() string    { return e.MemberID }
func (e BookReturned) MemberOf() string   { return e.MemberID }

// Registry binds the event type names to their Go types, and the older
// forms to today's: a projection sees only today's types.
func Registry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[BookCheckedOut](r, TypeCheckedOut, projector.Upcast(TypeCheckedOutV1, CheckedOutV2))
	projector.Register[LoanRenewed](r, TypeRenewed)
	projector.Register[FineCharged](r, TypeFined, projector.Renamed(TypeFinedOld))
	projector.Register[BookReturned](r, TypeReturned)
	return r
}
