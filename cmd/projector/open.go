package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/revgate/projector/internal/embedded"
	"github.com/revgate/projector/mongostore"
)

// parseWithEnv parses a command's flags, then fills the flags not given from
// PROJECTOR_<FLAG>.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	return envFlags(fs)
}

// parseNamed is parseWithEnv for a command that takes a NAME before or after
// its flags; name is "" when none was given.
func parseNamed(fs *flag.FlagSet, args []string) (string, error) {
	name := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", err
		}
		return "", errUsage
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		return "", errUsage
	}
	return name, envFlags(fs)
}

func envFlags(fs *flag.FlagSet) error {
	if err := fromEnv(fs, "PROJECTOR_"); err != nil {
		fmt.Fprintln(fs.Output(), err)
		return errUsage
	}
	return nil
}

// openedStore is a store on the MongoDB a command was given, or on the
// embedded server it started.
type openedStore struct {
	*mongostore.Store
	uri      string
	embedded *embedded.Server // nil on a MongoDB given by URI
}

// openStore opens database on the MongoDB at mongoURI or, when it is empty,
// on the embedded server with its data under dataDir (its logs to logger, nil
// for none). close closes both.
func openStore(ctx context.Context, mongoURI, dataDir, database string, timeout time.Duration, logger *slog.Logger) (*openedStore, error) {
	o := &openedStore{uri: mongoURI}
	if mongoURI == "" {
		srv, err := embedded.Start(embedded.Config{Dir: dataDir, Logger: logger})
		if err != nil {
			return nil, err
		}
		o.embedded, o.uri = srv, srv.URI()
	}
	store, err := mongostore.Open(ctx, o.uri, database, timeout)
	if err != nil {
		o.close()
		return nil, err
	}
	o.Store = store
	return o, nil
}

func (o *openedStore) close() {
	if o.Store != nil {
		o.Store.Close(context.Background())
	}
	if o.embedded != nil {
		o.embedded.Close()
	}
}
