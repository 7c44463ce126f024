// Package dbname names the databases tests make on a shared Mongo server.
package dbname

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
)

var (
	seq = atomic.Int64{}
	// unsafe are the runs of characters a database name may not hold
	// (MongoDB refuses /\. "$ and more; a subtest's "#01" and "v1.2" among
	// them) or that read badly in one.
	unsafe = regexp.MustCompile(`[^a-zA-Z0-9]+`)
)

// ForTest returns a database name for the test named test, unique in this
// process and apart from other processes' (it has the process id): a
// letter, the process id, a sequence number, and the end of the test's name
// in lower case, letters and digits only, at most 64 characters in all.
func ForTest(test string) string {
	name := strings.Trim(strings.ToLower(unsafe.ReplaceAllString(test, "_")), "_")
	if len(name) > 40 {
		name = strings.TrimLeft(name[len(name)-40:], "_")
	}
	return fmt.Sprintf("t%d_%d_%s", os.Getpid()%100000, seq.Add(1), name)
}
