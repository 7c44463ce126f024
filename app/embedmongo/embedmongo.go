// Package embedmongo puts an embedded MongoDB wire-protocol server into a
// projector binary: FerretDB, in the process, on SQLite files under a data
// directory. A binary that sets it as [app.Config.Embedded] runs without
// --mongo, which is how one tries projections on a laptop with nothing
// installed:
//
//	app.Main(app.Config{
//		Registry:    registry,
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
	"log/slog"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/internal/embedded"
)

var _ app.EmbeddedMongo = Start

// Start starts FerretDB on SQLite files under dir (created if missing, kept
// across runs), listening on a free port of the loopback interface, with its
// own logs to logger.
func Start(dir string, logger *slog.Logger) (app.EmbeddedServer, error) {
	return embedded.Start(embedded.Config{Dir: dir, Logger: logger})
}
