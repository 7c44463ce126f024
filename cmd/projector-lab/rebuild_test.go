package main_test

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

func checkCarts(t *testing.T, store *mongostore.Store, collection string, carts map[string][]projector.Event) {
	t.Helper()
	p := cart.NewDetailsProjection().InCollection(collection)
	for id, evs := range carts {
		if err := projectortest.CheckDocument(context.Background(), store, p, id, evs); err != nil {
			t.Error(err)
		}
	}
}

func TestRebuild_fills_a_new_collection_while_run_serves_then_switches_and_run_follows(t *testing.T) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 20, 6, carts)
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name()}

	live := startBinary(t, append([]string{"run", "--http", "", "--checkpoint-interval", "100ms", "--projections", cart.DetailsName}, common...)...)
	waitCheckpoint(t, live, store, srv.Head())

	out, errOut, code := runBinary(t, 2*time.Minute, append([]string{"rebuild", cart.DetailsName}, common...)...)
	m := regexp.MustCompile(`rebuilt cart_details: 120 events in \S+, \d+ events/s \(120 applied, 0 already applied, 0 skipped, 0 parked, 0 held; \d+ folds of a document from its streams' history\); readers now use (cart_details_r\d+) \(the previous collection cart_details is kept\)`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("rebuild: exit %d\n%s\n%s", code, out, errOut)
	}
	rebuilt := m[1]
	checkCarts(t, store, rebuilt, carts)
	if got, _ := store.ActiveCollection(context.Background(), cart.DetailsName, cart.DetailsName); got != rebuilt {
		t.Fatalf("active collection %q, want %q", got, rebuilt)
	}

	// The live projector follows the switch: new events land in the new collection.
	appendCarts(t, client, 20, 5, 6, carts)
	waitCheckpointOf(t, live, store, rebuilt, srv.Head())
	checkCarts(t, store, rebuilt, carts)
	if code := live.terminate(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, live.stderr.String())
	}
	if !strings.Contains(live.stderr.String(), "following it") {
		t.Fatalf("run did not log the switch:\n%s", live.stderr.String())
	}
}

func TestRebuild_interrupted_resumes_when_run_again(t *testing.T) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 600, 10, carts)
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--workers", "1"}

	// Interrupted as soon as it has stored a checkpoint, well before the head.
	first := startBinary(t, append([]string{"rebuild", cart.DetailsName}, common...)...)
	deadline := time.Now().Add(time.Minute)
	for {
		c, _ := store.CollectionsOf(context.Background(), cart.DetailsName)
		if c.Building != "" {
			if cp, _ := store.LoadCheckpoint(context.Background(), c.Building); cp != nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of the rebuild:\n%s", first.stderrText())
		}
		time.Sleep(5 * time.Millisecond)
	}
	first.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-first.done:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGINT")
	}
	if code := first.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(first.stderr.String(), "run it again to resume") {
		t.Fatalf("interrupted: exit %d\n%s", code, first.stderr.String())
	}
	c, _ := store.CollectionsOf(context.Background(), cart.DetailsName)
	if c.Building == "" || c.Active != "" {
		t.Fatalf("after the interruption: %+v, want a rebuild in progress and readers unmoved", c)
	}
	cp, _ := store.LoadCheckpoint(context.Background(), c.Building)
	if cp == nil || cp.Position >= srv.Head() {
		t.Fatalf("checkpoint of the interrupted rebuild: %v (head %d)", cp, srv.Head())
	}
	status, _, _ := runBinary(t, 20*time.Second, append([]string{"status", "--projections", cart.DetailsName}, common[:len(common)-2]...)...)
	if !strings.Contains(status, c.Building+" at "+cp.String()) {
		t.Fatalf("status does not show the rebuild in progress:\n%s", status)
	}

	out, errOut, code := runBinary(t, 2*time.Minute, append([]string{"rebuild", cart.DetailsName}, common...)...)
	if code != 0 || !strings.Contains(out, "resuming the rebuild of cart_details into "+c.Building) || !strings.Contains(out, "readers now use "+c.Building) {
		t.Fatalf("second rebuild: exit %d\n%s\n%s", code, out, errOut)
	}
	checkCarts(t, store, c.Building, carts)
}

// A group that run --group fed the projection with, in this database,
// stops a rebuild; in another database, which never ran with it (another
// deployment on the same event store), the rebuild notes the group on
// stderr and goes on.
func TestRebuild_refuses_a_projection_fed_by_a_persistent_group(t *testing.T) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 3, 4, carts)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name()}
	p := startBinary(t, append([]string{"run", "--http", "", "--group", "projector", "--projections", cart.DetailsName}, common...)...)
	waitCartsAtFold(t, store, carts, p)
	if code := p.terminate(t); code != 0 {
		t.Fatalf("run --group: exit %d\n%s", code, p.stderrText())
	}
	_, errOut, code := runBinary(t, 20*time.Second, append([]string{"rebuild", cart.DetailsName}, common...)...)
	if code != 1 || !strings.Contains(errOut, `group "projector-cart_details" feeds cart_details`) || !strings.Contains(errOut, "catch-up projectors only") {
		t.Fatalf("rebuild of a projection run with --group in its database: exit %d: %s", code, errOut)
	}

	other := mongotest.Database(t)
	out, errOut, code := runBinary(t, 2*time.Minute, "rebuild", cart.DetailsName, "--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", other.Name())
	m := regexp.MustCompile(`readers now use (cart_details_r\d+)`).FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(errOut, `group "projector-cart_details" on the event store was never run with this database`) {
		t.Fatalf("rebuild in another database: exit %d\n%s\n%s", code, out, errOut)
	}
	checkCarts(t, mongostore.New(other), m[1], carts)
}

// rebuild takes --on-failure: a history with an event that run parked (a
// domain error in the middle of a cart) stops a rebuild under block, with
// one line and exit 1, readers staying on the old collection; under park it
// rebuilds past it, every document the fold without it, and the event is
// parked once.
func TestRebuild_takes_on_failure_and_rebuilds_past_a_parked_event(t *testing.T) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 3, 5, carts)
	id := "cart001"
	ghost := cart.ProductItemRemovedFromShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "ghost", Quantity: 1}}
	late := cart.ProductItemAddedToShoppingCart{ShoppingCartID: id, ProductItem: cart.ProductItem{ProductID: "late", Quantity: 2}}
	for _, ev := range []any{ghost, late} {
		name, data, _ := cart.Registry().Encode(ev)
		if _, err := client.AppendToStream(context.Background(), cart.StreamID(id), kurrentdb.AppendToStreamOptions{},
			kurrentdb.EventData{EventID: uuid.New(), EventType: name, ContentType: kurrentdb.ContentTypeJson, Data: data, Metadata: cartMeta}); err != nil {
			t.Fatal(err)
		}
	}
	name, _, _ := cart.Registry().Encode(late)
	carts[id] = append(carts[id], projector.Event{Type: name, StreamID: cart.StreamID(id), StreamRevision: uint64(len(carts[id]) + 1), Payload: late})
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name()}

	p := startBinary(t, append([]string{"run", "--http", "", "--on-failure", "park", "--checkpoint-interval", "100ms", "--projections", cart.DetailsName}, common...)...)
	waitCheckpoint(t, p, store, srv.Head())
	if code := p.terminate(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, p.stderrText())
	}
	checkCarts(t, store, cart.DetailsName, carts)

	out, errOut, code := runBinary(t, 2*time.Minute, append([]string{"rebuild", cart.DetailsName}, common...)...)
	if code != 1 || !strings.Contains(errOut, "ghost") || !strings.Contains(errOut, "rebuild stops at an event that fails for good under --on-failure block") || !strings.Contains(errOut, "--on-failure hold or park") || strings.Contains(out, "readers now use") {
		t.Fatalf("rebuild under block: exit %d, want 1, the failure and what goes past it\n%s\n%s", code, out, errOut)
	}
	if got, _ := store.ActiveCollection(context.Background(), cart.DetailsName, cart.DetailsName); got != cart.DetailsName {
		t.Fatalf("readers moved to %q after a failed rebuild", got)
	}
	// status says that the rebuild stopped, and why, and exits 3: a stopped
	// rebuild is not one in progress.
	out, errOut, code = runBinary(t, time.Minute, append([]string{"status", "--projections", cart.DetailsName}, common...)...)
	if code != 3 || !strings.Contains(out, "stopped (below)") || !strings.Contains(out, "the rebuild of "+cart.DetailsName+" into ") ||
		!strings.Contains(out, "ghost") || !strings.Contains(errOut, "its rebuild into ") {
		t.Fatalf("status after the failed rebuild: exit %d, want 3 and the rebuild's error\n%s\n%s", code, out, errOut)
	}

	out, errOut, code = runBinary(t, 2*time.Minute, append([]string{"rebuild", cart.DetailsName, "--on-failure", "park"}, common...)...)
	m := regexp.MustCompile(`readers now use (cart_details_r\d+)`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("rebuild --on-failure park: exit %d\n%s\n%s", code, out, errOut)
	}
	checkCarts(t, store, m[1], carts)
	// The error the first attempt recorded for the build is over: status no
	// longer shows it.
	cps, err := store.Checkpoints(context.Background())
	if err != nil || cps[m[1]].LastError != "" {
		t.Errorf("the rebuilt collection's record: %+v (%v), want no error left", cps[m[1]], err)
	}
	// Each build has its record of the ghost removal: the run's (the
	// collection the rebuild replaced) and the rebuild's, which is the one
	// replay-parked replays now.
	parked, err := store.Parked(context.Background(), cart.DetailsName)
	builds := map[string]bool{}
	for _, pe := range parked {
		if pe.StreamID != cart.StreamID(id) || pe.StreamRevision != 5 {
			t.Fatalf("parked %+v, want only the ghost removal", pe)
		}
		builds[pe.Collection] = true
	}
	if err != nil || len(parked) != 2 || !builds[cart.DetailsName] || !builds[m[1]] {
		t.Fatalf("parked %+v (%v), want the ghost removal once in %s and once in %s", parked, err, cart.DetailsName, m[1])
	}
}
