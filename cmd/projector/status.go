package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/revgate/projector/subscription"
)

// projectionStatus is one line of "projector status".
type projectionStatus struct {
	Projection string `json:"projection"`
	// Checkpoint is the stored position; nil before the first store.
	Checkpoint *uint64   `json:"checkpoint"`
	Updated    time.Time `json:"updatedAt,omitzero"`
	// Head is the position of the last event in $all; nil without --esdb.
	Head *uint64 `json:"head,omitempty"`
	// Behind is how many events of $all follow the checkpoint, counted up to
	// 10000 (BehindAtLeast is then true); nil without --esdb.
	Behind        *int `json:"behind,omitempty"`
	BehindAtLeast bool `json:"behindAtLeast,omitempty"`
	// Collection is the collection readers use; Rebuilding, one a rebuild
	// in progress fills, with its checkpoint.
	Collection        string  `json:"collection"`
	Rebuilding        string  `json:"rebuilding,omitempty"`
	RebuildCheckpoint *uint64 `json:"rebuildCheckpoint,omitempty"`
	// Group and Parked describe a persistent subscription group (--group).
	Group  string `json:"group,omitempty"`
	Parked *int64 `json:"parked,omitempty"`
	// ParkedHere counts the events parked in projector_parked (--on-failure
	// park) and not replayed yet.
	ParkedHere  int       `json:"parkedEvents"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var esdbURI, mongoURI, database, dataDir, projections, group string
	var connectTimeout time.Duration
	var asJSON, showParked bool
	fs := newFlags("status", "status [flags]  (flags also as PROJECTOR_<FLAG>)", stderr)
	fs.StringVar(&esdbURI, "esdb", "", "EventStoreDB connection string, for the head and the lag (optional)")
	fs.StringVar(&mongoURI, "mongo", "", "MongoDB URI; empty opens the embedded server's data under --data-dir")
	fs.StringVar(&database, "database", "projector", "database of the read models and checkpoints")
	fs.StringVar(&dataDir, "data-dir", "projector-data", "data of the embedded Mongo-wire server")
	fs.StringVar(&projections, "projections", "", "comma-separated projections (default: all)")
	fs.StringVar(&group, "group", "", "the persistent subscription group the projector runs with --group, for its parked events")
	fs.DurationVar(&connectTimeout, "connect-timeout", 10*time.Second, "how long to wait for each server to answer")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	fs.BoolVar(&showParked, "parked", false, "list the parked events (projection, stream@revision, type, when, attempts, error)")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if connectTimeout <= 0 {
		fmt.Fprintln(stderr, "--connect-timeout must be > 0")
		return errUsage
	}
	defs, _, err := selectProjections(projections)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return errUsage
	}
	var client *subscription.Client
	if esdbURI != "" {
		if client, err = subscription.Dial(esdbURI, nil); err != nil {
			return err
		}
		defer client.Close()
	}
	store, err := openStore(ctx, mongoURI, dataDir, database, connectTimeout, nil)
	if err != nil {
		return err
	}
	defer store.close()
	stored, err := store.Checkpoints(ctx)
	if err != nil {
		return err
	}
	var cl *esdb.Client
	var head uint64
	if client != nil {
		if err := probeESDB(ctx, client, connectTimeout); err != nil {
			return err
		}
		if cl, err = client.ESDB(); err != nil {
			return err
		}
		hctx, cancel := context.WithTimeout(ctx, connectTimeout)
		err = client.Do(hctx, func(cl *esdb.Client) error { head, err = lastPosition(hctx, cl); return err })
		cancel()
		if err != nil {
			return fmt.Errorf("reading the head of $all: %w", err)
		}
	}

	var lines []projectionStatus
	for _, def := range defs {
		st := projectionStatus{Projection: def.Name()}
		colls, err := store.CollectionsOf(ctx, def.Name())
		if err != nil {
			return err
		}
		st.Collection = colls.Active
		if st.Collection == "" {
			st.Collection = def.Collection()
		}
		if colls.Building != "" {
			st.Rebuilding = colls.Building
			if b := stored[colls.Building].Checkpoint; b != nil {
				pos := b.Position
				st.RebuildCheckpoint = &pos
			}
		}
		cp := stored[st.Collection]
		if cp.Checkpoint != nil {
			pos := cp.Checkpoint.Position
			st.Checkpoint, st.Updated = &pos, cp.Updated
		}
		st.LastError, st.LastErrorAt = cp.LastError, cp.LastErrorAt
		parked, err := store.Parked(ctx, def.Name())
		if err != nil {
			return err
		}
		st.ParkedHere = len(parked)
		if cl != nil {
			h := head
			st.Head = &h
			behind := 0
			switch {
			case cp.Checkpoint == nil:
				err = client.Do(ctx, func(cl *esdb.Client) error { behind, err = countAfterStart(ctx, cl, connectTimeout); return err })
			case cp.Checkpoint.Position < head:
				lctx, cancel := context.WithTimeout(ctx, connectTimeout)
				err = client.Do(lctx, func(cl *esdb.Client) error { behind, err = countAfter(lctx, cl, *cp.Checkpoint); return err })
				cancel()
			}
			if err != nil {
				return fmt.Errorf("counting the events after %s's checkpoint: %w", def.Name(), err)
			}
			st.Behind, st.BehindAtLeast = &behind, behind >= lagCap
			if group != "" {
				gctx, cancel := context.WithTimeout(ctx, connectTimeout)
				var info *esdb.PersistentSubscriptionInfo
				err := client.Do(gctx, func(cl *esdb.Client) error {
					var err error
					info, err = cl.GetPersistentSubscriptionInfoToAll(gctx, group+"-"+def.Name(), esdb.GetPersistentSubscriptionOptions{})
					return err
				})
				cancel()
				if err != nil {
					return fmt.Errorf("group %s-%s: %w", group, def.Name(), err)
				}
				st.Group = info.GroupName
				if info.Stats != nil {
					parked := info.Stats.ParkedMessagesCount
					st.Parked = &parked
				}
			}
		}
		lines = append(lines, st)
	}
	if showParked {
		for _, def := range defs {
			parked, err := store.Parked(ctx, def.Name())
			if err != nil {
				return err
			}
			for _, p := range parked {
				fmt.Fprintf(stdout, "%s\t%s@%d\t%s\t%s\t%d attempts\t%s\n", p.Projection, p.Stream, p.Revision, p.Type, optT(p.ParkedAt), p.Attempts, p.Error)
			}
		}
		return nil
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(lines)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECTION\tCOLLECTION\tCHECKPOINT\tSTORED AT\tHEAD\tBEHIND (EVENTS)\tPARKED\tGROUP (PARKED)\tREBUILDING\tLAST ERROR")
	for _, s := range lines {
		rebuilding := "-"
		if s.Rebuilding != "" {
			rebuilding = fmt.Sprintf("%s at %s", s.Rebuilding, optU(s.RebuildCheckpoint, "start"))
		}
		group := "-"
		if s.Group != "" {
			group = fmt.Sprintf("%s (%s)", s.Group, optI(s.Parked))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.Projection, s.Collection, optU(s.Checkpoint, "none"), optT(s.Updated),
			optU(s.Head, "?"), behindText(s), s.ParkedHere, group, rebuilding, errText(s))
	}
	return tw.Flush()
}

// countAfterStart counts the events of $all, up to lagCap.
func countAfterStart(ctx context.Context, cl *esdb.Client, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := cl.ReadAll(ctx, esdb.ReadAllOptions{From: esdb.Start{}}, lagCap)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	n := 0
	for {
		if _, err := s.Recv(); err != nil {
			if err == io.EOF {
				return n, nil
			}
			return 0, err
		}
		n++
	}
}

func optU(v *uint64, none string) string {
	if v == nil {
		return none
	}
	return strconv.FormatUint(*v, 10)
}

func optI(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func optT(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func behindText(s projectionStatus) string {
	switch {
	case s.Behind == nil:
		return "?"
	case s.BehindAtLeast:
		return fmt.Sprintf(">=%d", *s.Behind)
	}
	return strconv.Itoa(*s.Behind)
}

func errText(s projectionStatus) string {
	if s.LastError == "" {
		return "-"
	}
	return fmt.Sprintf("%s: %s", optT(s.LastErrorAt), s.LastError)
}
