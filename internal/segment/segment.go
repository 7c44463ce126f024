// Package segment splits one projection's documents into a fixed number of
// segments, by a stable hash of the document id, so that several processes
// can share the projection: each runs the documents of the segments whose
// leases it holds. It has the hash, the rule that says how many segments
// each live process takes, the names of a segment's lease and checkpoint,
// and the two records in MongoDB that processes of a segmented projection
// share: how many segments it has (set once, by its first run), and which
// processes are alive (a heartbeat each).
package segment

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/revgate/projector/projector"
)

// Of is the segment of document id among n segments: FNV-1a (32 bits) of
// the id, modulo n. It is the same in every process and every version.
func Of(id string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// Share is how many of n segments the process of rank rank (its place among
// the p live processes' ids, sorted) takes: n/p, one more for the first n%p
// ranks. The shares of the p processes add up to n.
func Share(n, p, rank int) int {
	if p < 1 {
		return n
	}
	s := n / p
	if rank < n%p {
		s++
	}
	return s
}

// LeaseName is the name of the lease of segment k of n of projection.
func LeaseName(projection string, k, n int) string {
	return fmt.Sprintf("%s/segment-%d-of-%d", projection, k, n)
}

// IsLease reports whether lease is the name of a segment's lease of
// projection (LeaseName's, of any segment count).
func IsLease(projection, lease string) bool {
	return strings.HasPrefix(lease, projection+"/segment-")
}

// CheckpointName is the name of the checkpoint of segment k of n of the
// runner (named after its collection) named runner.
func CheckpointName(runner string, k, n int) string {
	return fmt.Sprintf("%s/segment-%d-of-%d", runner, k, n)
}

// IsCheckpoint reports whether name is the name of the checkpoint of
// runner or of one of its segments (CheckpointName's, of any count).
func IsCheckpoint(runner, name string) bool {
	return name == runner || strings.HasPrefix(name, runner+"/segment-")
}

// Rank is the place of member among members in taking segment k when it
// is free (rendezvous hashing: by FNV-1a of member and k, highest first):
// the process of rank r tries it once it has been free for r looks, so
// that processes looking for free segments at the same moment seldom try
// the same one. member counts as one of members.
func Rank(members []string, member string, k int) int {
	score := func(m string) uint32 {
		h := fnv.New32a()
		fmt.Fprintf(h, "%s\x00%d", m, k)
		return mix(h.Sum32())
	}
	mine, rank := score(member), 0
	for _, m := range members {
		if s := score(m); m != member && (s > mine || (s == mine && m < member)) {
			rank++
		}
	}
	return rank
}

// mix spreads the bits of an FNV hash, whose last bytes move its high
// bits little (MurmurHash3's finalizer).
func mix(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// Lowest is where a runner's n segments are, all together: the lowest, in
// $all's order (projector.Checkpoint.After), of their checkpoints (of gives the one
// stored under a name, nil when none), a segment without one counting from
// the runner's own (own, that of the runner before it was split, or of the
// rebuild it goes on from); nil when one has none at all.
func Lowest(runner string, n int, own *projector.Checkpoint, of func(name string) *projector.Checkpoint) *projector.Checkpoint {
	var low *projector.Checkpoint
	for k := range n {
		cp := of(CheckpointName(runner, k, n))
		if cp == nil {
			cp = own
		}
		if cp == nil {
			return nil
		}
		if low == nil || low.After(*cp) {
			low = cp
		}
	}
	return low
}
