package neutral

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
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
// warnings at warn level (except those of a cancelled call), the rest at
// debug. Both clients' LoggingFunc are functions of this type.
func ClientLog(l *slog.Logger) func(level string, format string, args ...any) {
	return func(level string, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		lv := slog.LevelDebug
		if (level == "warn" || level == "error") && !strings.Contains(msg, "context canceled") {
			lv = slog.LevelWarn
		}
		l.Log(context.Background(), lv, msg)
	}
}
