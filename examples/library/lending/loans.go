package lending

import (
	"errors"
	"time"

	"github.com/revgate/projector/projector"
)

// Loan is the read model of one loan: what the desk shows for it.
type Loan struct {
	BookID     string     `bson:"bookId"`
	MemberID   string     `bson:"memberId"`
	Status     string     `bson:"status"` // "out" or "returned"
	Due        time.Time  `bson:"due"`
	Renewals   int        `bson:"renewals"`
	FineCents  int64      `bson:"fineCents"`
	ReturnedAt *time.Time `bson:"returnedAt,omitempty"`
}

// MaxRenewals is how many times a loan may be renewed.
const MaxRenewals = 3

// ErrTooManyRenewals: a renewal past MaxRenewals, or of a returned book.
var ErrTooManyRenewals = errors.New("loan cannot be renewed")

// NewLoans returns the loans projection: one document per loan stream,
// under the revision gate (the default strategy).
func NewLoans() *projector.Projection[Loan] {
	p := projector.New[Loan]("loans", projector.StreamSuffix(LoanStreams)).RoutesByEnvelope().
		WithIndex(projector.Index{Keys: []string{"memberId", "status"}})
	projector.Create(p, func(e BookCheckedOut) (Loan, error) {
		return Loan{BookID: e.BookID, MemberID: e.Member.ID, Status: "out", Due: e.Due.UTC().Truncate(time.Millisecond)}, nil
	})
	projector.On(p, func(l Loan, e LoanRenewed) (Loan, error) {
		if l.Status != "out" || l.Renewals >= MaxRenewals {
			return l, ErrTooManyRenewals
		}
		l.Due, l.Renewals = e.Due.UTC().Truncate(time.Millisecond), l.Renewals+1
		return l, nil
	})
	projector.On(p, func(l Loan, e FineCharged) (Loan, error) {
		l.FineCents += e.Cents
		return l, nil
	})
	projector.On(p, func(l Loan, e BookReturned) (Loan, error) {
		at := e.At.UTC().Truncate(time.Millisecond)
		l.Status, l.ReturnedAt = "returned", &at
		return l, nil
	})
	return p
}
