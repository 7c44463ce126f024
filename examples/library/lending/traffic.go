package lending

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Traffic returns the lives of n loans over members members, seeded: a
// checkout, up to two renewals, maybe a fine, and, for most, a return. Loan
// i's stream is LoanStream(fmt.Sprintf("L%04d", i)). Tests and demos append
// them.
func Traffic(seed uint64, n, members int) map[string][]any {
	r := rand.New(rand.NewPCG(seed, 7))
	start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	out := make(map[string][]any, n)
	for i := range n {
		id := fmt.Sprintf("L%04d", i)
		member := fmt.Sprintf("M%03d", r.IntN(members))
		at := start.Add(time.Duration(i) * time.Hour)
		due := at.Add(21 * 24 * time.Hour)
		life := []any{BookCheckedOut{LoanID: id, BookID: fmt.Sprintf("B%05d", r.IntN(10000)), Member: Member{ID: member}, At: at, Due: due}}
		for range r.IntN(3) {
			due = due.Add(14 * 24 * time.Hour)
			life = append(life, LoanRenewed{LoanID: id, MemberID: member, Due: due})
		}
		if r.IntN(4) == 0 {
			life = append(life, FineCharged{LoanID: id, MemberID: member, Cents: int64(50 * (1 + r.IntN(10)))})
		}
		if r.IntN(5) > 0 {
			life = append(life, BookReturned{LoanID: id, MemberID: member, At: due.Add(-time.Duration(r.IntN(100)) * time.Hour)})
		}
		out[LoanStream(id)] = life
	}
	return out
}
