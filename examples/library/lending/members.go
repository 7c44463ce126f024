package lending

import (
	"strings"

	"github.com/revgate/projector/projector"
)

// MemberLoans is the read model of one member, fed by all their loans.
type MemberLoans struct {
	Out        int   `bson:"out"`
	Borrowed   int   `bson:"borrowed"`
	Renewals   int   `bson:"renewals"`
	FinesCents int64 `bson:"finesCents"`
}

// NewMembers returns the members projection: one document per member, fed
// by many loan streams, each gated on its own revision (RevisionMap).
func NewMembers() *projector.Projection[MemberLoans] {
	byMember := func(ev projector.Event) (string, bool) {
		m, ok := ev.Payload.(interface{ MemberOf() string })
		if !ok || !strings.HasPrefix(ev.StreamID, LoanStreams) {
			return "", false
		}
		return m.MemberOf(), true
	}
	p := projector.New[MemberLoans]("member_loans", byMember).Idempotency(projector.RevisionMap())
	projector.On(p, func(m MemberLoans, _ BookCheckedOut) (MemberLoans, error) {
		m.Out, m.Borrowed = m.Out+1, m.Borrowed+1
		return m, nil
	})
	projector.On(p, func(m MemberLoans, _ LoanRenewed) (MemberLoans, error) {
		m.Renewals++
		return m, nil
	})
	projector.On(p, func(m MemberLoans, e FineCharged) (MemberLoans, error) {
		m.FinesCents += e.Cents
		return m, nil
	})
	projector.On(p, func(m MemberLoans, _ BookReturned) (MemberLoans, error) {
		m.Out--
		return m, nil
	})
	return p
}
