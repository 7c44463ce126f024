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
	TypeCheckedOut = "library.book-checked-out.v1"
	TypeRenewed    = "library.loan-renewed.v1"
	TypeFined      = "library.fine-charged.v1"
	TypeReturned   = "library.book-returned.v1"
)

// BookCheckedOut starts a loan.
type BookCheckedOut struct {
	LoanID   string    `json:"loanId"`
	BookID   string    `json:"bookId"`
	MemberID string    `json:"memberId"`
	At       time.Time `json:"at"`
	Due      time.Time `json:"due"`
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

// Member is the member a loan event concerns: every event of a loan carries
// it, so that a read model of members sees the whole loan.
func (e BookCheckedOut) Member() string { return e.MemberID }
func (e LoanRenewed) Member() string    { return e.MemberID }
func (e FineCharged) Member() string    { return e.MemberID }
func (e BookReturned) Member() string   { return e.MemberID }

// Registry binds the event type names to their Go types.
func Registry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[BookCheckedOut](r, TypeCheckedOut)
	projector.Register[LoanRenewed](r, TypeRenewed)
	projector.Register[FineCharged](r, TypeFined)
	projector.Register[BookReturned](r, TypeReturned)
	return r
}
