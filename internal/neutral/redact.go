package neutral

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Redact returns uri with its password replaced by "xxxxx". It takes any
// scheme: esdb://, esdb+discover://, kurrentdb://, kurrent://, kdb:// (and
// their +discover forms), mongodb://, and strings that net/url cannot parse,
// such as a cluster's comma-separated hosts.
func Redact(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.User == nil {
		if at := strings.LastIndex(uri, "@"); at >= 0 {
			if scheme := strings.Index(uri, "://"); scheme >= 0 && scheme < at {
				return uri[:scheme+3] + "xxxxx" + uri[at:]
			}
		}
		return uri
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Scrub removes the password of uri from msg (a client's parse error may
// quote it).
func Scrub(msg, uri string) string {
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return msg
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return msg
	}
	if _, pass, found := strings.Cut(rest[:at], ":"); found && pass != "" {
		msg = strings.ReplaceAll(msg, pass, "xxxxx")
	}
	return msg
}

// ClientLog adapts an official client's logging callback to l: errors and
// warnings at warn level (except those of a cancelled call, and a server's
// answers the sources expect: a group or stream not found, a group that
// exists already, which they act on and report themselves), the rest at
// debug. Both clients' LoggingFunc are functions of this type.
//
// A client retrying a server that is down says the same thing ten times a
// second: a warning of one call site (its format) is logged at warn once
// every [ClientLogEvery], the repeats of the same message in between at
// debug, and the next warning says how many there were. A message that
// differs from the last one of its call site at warn is a warning.
func ClientLog(l *slog.Logger) func(level string, format string, args ...any) {
	return clientLog(l, time.Now)
}

// ClientLogEvery is how often [ClientLog] logs the warnings of one call site
// of a client at warn level.
const ClientLogEvery = 10 * time.Second

// expected reports whether a client's error message is one the sources
// expect and act on (see ClientLog).
func expected(msg string) bool {
	for _, s := range []string{"context canceled", "code = NotFound", "code = AlreadyExists"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func clientLog(l *slog.Logger, now func() time.Time) func(level string, format string, args ...any) {
	type site struct {
		last     time.Time
		msg      string // the last one at warn
		repeated int
	}
	var mu sync.Mutex
	sites := map[string]*site{}
	return func(level string, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if (level != "warn" && level != "error") || expected(msg) {
			l.Log(context.Background(), slog.LevelDebug, msg)
			return
		}
		mu.Lock()
		s := sites[format]
		if s == nil {
			s = &site{}
			sites[format] = s
		}
		t := now()
		quiet := !s.last.IsZero() && t.Sub(s.last) < ClientLogEvery && msg == s.msg
		repeated := s.repeated
		if quiet {
			s.repeated++
		} else {
			s.last, s.msg, s.repeated = t, msg, 0
		}
		mu.Unlock()
		switch {
		case quiet:
			l.Log(context.Background(), slog.LevelDebug, msg)
		case repeated > 0:
			l.Log(context.Background(), slog.LevelWarn, msg, "repeats_since_last_warning", repeated)
		default:
			l.Log(context.Background(), slog.LevelWarn, msg)
		}
	}
}
