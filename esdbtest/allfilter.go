package esdbtest

import "strings"

// hiddenFromAll reports whether $all reads and subscriptions leave a stream's
// events out: the node's own bookkeeping, as EventFilter.DefaultAllFilter
// lists it ($epoch-information, and the checkpoint and parked-message
// streams of persistent subscriptions to $all). Such events still count as
// scanned for the checkpoints of filtered subscriptions.
func hiddenFromAll(stream string) bool {
	if stream == "$epoch-information" {
		return true
	}
	const prefix = "$persistentsubscription-$all::"
	if !strings.HasPrefix(stream, prefix) {
		return false
	}
	rest := stream[len(prefix):]
	return strings.HasSuffix(rest, "-checkpoint") || strings.HasSuffix(rest, "-parked")
}
