// Package embedmongo puts an embedded MongoDB wire-protocol server into a
// projector binary: FerretDB, in the process, on SQLite files under a data
// directory. A binary that sets it as [app.Config.Embedded] runs without
// --mongo, which is how one tries projections on a laptop with nothing
// installed:
//
//	app.Main(app.Config{
//		Registry:    registry,
//		Dial:        kurrent.Dial,
//		Projections: projections,
//		Embedded:    embedmongo.Start,
//	})
//
// It adds FerretDB and its SQLite and PostgreSQL drivers to the binary
// (17.5 MB of the example's 45 MB binary, 12 MB once stripped; see the
// README); a binary that does not import this package has none of it, and
// needs --mongo.
//
// FerretDB is not MongoDB: it has no transactions or change streams, its
// conditional updates are not atomic across processes, and its updates are
// far slower. It is for trying things and for tests, not for production read
// models.
package embedmongo

import (
	"context"
	"log/slog"
	"strings"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/internal/embedded"
)

var _ app.EmbeddedMongo = Start

// Start starts FerretDB on SQLite files under dir (created if missing, kept
// across runs), listening on a free port of the loopback interface. Its own
// warnings and errors go to logger; its notes on every connection, and its
// dumps of the wire messages of commands it refused (the driver's
// endSessions on every disconnect, which FerretDB does not implement), do
// not.
func Start(dir string, logger *slog.Logger) (app.EmbeddedServer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return embedded.Start(embedded.Config{Dir: dir, Logger: slog.New(quiet{logger.Handler()})})
}

// quiet passes on FerretDB's warnings and errors, without its wire dumps,
// nor its warning that a connection it is done with could not be given a
// deadline (it unblocks a read of a connection closed already, as the
// server or a client ends: nothing is lost).
type quiet struct{ slog.Handler }

func (q quiet) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && q.Handler.Enabled(ctx, l)
}

func (q quiet) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "Response header:") || strings.HasPrefix(r.Message, "Response message:") ||
		strings.HasPrefix(r.Message, "Request header:") || strings.HasPrefix(r.Message, "Request message:") ||
		strings.HasPrefix(r.Message, "Failed to set deadline:") {
		return nil
	}
	return q.Handler.Handle(ctx, r)
}

func (q quiet) WithAttrs(attrs []slog.Attr) slog.Handler { return quiet{q.Handler.WithAttrs(attrs)} }
func (q quiet) WithGroup(name string) slog.Handler       { return quiet{q.Handler.WithGroup(name)} }
