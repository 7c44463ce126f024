package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"github.com/revgate/projector/app"

	"example.com/library/lending"
)

// seed appends the lives of sample loans to an EventStoreDB, for trying the
// projector before the library's own write side is there. A loan already in
// the store is left as it is, so seeding twice appends nothing new.
func seed(ctx context.Context, inv app.Invocation) error {
	fs := inv.FlagSet("--esdb URI [--loans N] [--members M] [--seed S]")
	uri := fs.String("esdb", "", "EventStoreDB connection string, e.g. esdb://localhost:2113?tls=false (required)")
	loans := fs.Int("loans", 50, "loans to append")
	members := fs.Int("members", 10, "members the loans are spread over")
	from := fs.Uint64("seed", 1, "seed of the sample traffic")
	if err := inv.Parse(fs); err != nil {
		return err
	}
	if *uri == "" || *loans < 1 || *members < 1 {
		fmt.Fprintln(inv.Stderr, "--esdb is required, --loans and --members must be >= 1")
		return app.ErrUsage
	}
	cfg, err := kurrentdb.ParseConnectionString(*uri)
	if err != nil {
		return err
	}
	cfg.Logger = kurrentdb.NoopLogging()
	client, err := kurrentdb.NewClient(cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	traffic := lending.Traffic(*from, *loans, *members)
	streams := make([]string, 0, len(traffic))
	for s := range traffic {
		streams = append(streams, s)
	}
	slices.Sort(streams)
	appended, kept := 0, 0
	for _, stream := range streams {
		var events []kurrentdb.EventData
		for _, e := range traffic[stream] {
			name, data, err := lending.Registry().Encode(e)
			if err != nil {
				return err
			}
			events = append(events, kurrentdb.EventData{EventID: uuid.New(), EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: data})
		}
		_, err := client.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.NoStream{}}, events...)
		var e *kurrentdb.Error
		switch {
		case errors.As(err, &e) && (e.Code() == kurrentdb.ErrorCodeWrongExpectedVersion || e.Code() == kurrentdb.ErrorCodeStreamRevisionConflict):
			kept++
		case err != nil:
			return fmt.Errorf("append to %s: %w", stream, err)
		default:
			appended += len(events)
		}
	}
	fmt.Fprintf(inv.Stdout, "appended %d events of %d loans; %d loans were there already\n", appended, len(streams)-kept, kept)
	return nil
}
