package app

import (
	"testing"
	"time"

	"github.com/revgate/projector/internal/segment"
	"github.com/revgate/projector/mongostore"
)

// A rebuild in segments last had a process when its latest lease not
// released expired, or when it began: a lease its holder released (a clean
// stop) is no handover in progress, and does not put off saying it was
// interrupted.
func TestRebuildQuietSince_counts_leases_held_not_released(t *testing.T) {
	began := time.Unix(1700000000, 0)
	building := "threads_r1700000000"
	name := func(k int) string { return segment.LeaseName(rebuildGroup(building), k, 4) }
	expired, released := began.Add(time.Hour), began.Add(2*time.Hour)
	leases := map[string]mongostore.Lease{
		name(0):       {Name: name(0), Holder: "rebuild host/1/ab", Expires: expired},
		name(1):       {Name: name(1), Holder: "", Expires: released},
		"other lease": {Name: "other lease", Holder: "run host/2/cd", Expires: released.Add(time.Hour)},
	}
	if got := rebuildQuietSince(leases, "threads", building); !got.Equal(expired) {
		t.Errorf("quiet since %v, want %v (the lease held, not the one released, nor another's)", got, expired)
	}
	if got := rebuildQuietSince(nil, "threads", building); !got.Equal(began) {
		t.Errorf("with no leases, quiet since %v, want when it began, %v", got, began)
	}
}
