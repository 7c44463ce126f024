package neutral

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A client's warnings of one call site are logged at warn once every
// ClientLogEvery, the repeats at debug, and the next warning counts them;
// other call sites, and what is not a warning, are not held back.
func TestClientLog_a_repeated_warning_is_logged_once_every_ClientLogEvery(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
	now := time.Unix(0, 0)
	log := clientLog(l, func() time.Time { return now })
	at := func(d time.Duration) { now = time.Unix(0, 0).Add(d) }
	log("error", "error when reading server features: %v", "unavailable") // warn
	at(time.Second)
	log("error", "error when reading server features: %v", "unavailable") // debug
	at(2 * time.Second)
	log("error", "error when reading server features: %v", "unavailable")                               // debug
	log("error", "error when reading server features: %v", "refused")                                   // another message: warn, after 2 repeats
	log("error", "error when reading server features: %v", "refused")                                   // debug
	log("warn", "discovery failed: %v", "no node")                                                      // another site: warn
	log("info", "connected to %s", "node")                                                              // debug
	log("error", "read: %v", "context canceled")                                                        // debug
	log("warn", "unexpected exception: %v", "rpc error: code = NotFound desc = group g does not exist") // debug: created
	log("warn", "unexpected exception: %v", "rpc error: code = AlreadyExists desc = group g exists")    // debug
	at(ClientLogEvery + time.Second)
	log("error", "error when reading server features: %v", "unavailable") // warn, after 1 repeat
	want := []string{
		`level=WARN msg="error when reading server features: unavailable"`,
		`level=DEBUG msg="error when reading server features: unavailable"`,
		`level=DEBUG msg="error when reading server features: unavailable"`,
		`level=WARN msg="error when reading server features: refused" repeats_since_last_warning=2`,
		`level=DEBUG msg="error when reading server features: refused"`,
		`level=WARN msg="discovery failed: no node"`,
		`level=DEBUG msg="connected to node"`,
		`level=DEBUG msg="read: context canceled"`,
		`level=DEBUG msg="unexpected exception: rpc error: code = NotFound desc = group g does not exist"`,
		`level=DEBUG msg="unexpected exception: rpc error: code = AlreadyExists desc = group g exists"`,
		`level=WARN msg="error when reading server features: unavailable" repeats_since_last_warning=1`,
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %s\nwant %s", i+1, got[i], want[i])
		}
	}
}
