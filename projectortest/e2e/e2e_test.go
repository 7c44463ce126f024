package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/revgate/projector/app"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest/e2e"
)

type opened struct{ By string }
type closed struct{}

func registry() *projector.Registry {
	r := projector.NewRegistry()
	projector.Register[opened](r, "door.opened")
	projector.Register[closed](r, "door.closed")
	return r
}

// door is a door's read model: open or not.
type door struct {
	Open bool `bson:"open"`
}

// doorsConfig is a binary of one projection, a document per door stream.
func doorsConfig() app.Config {
	doors := projector.New[door]("doors", projector.StreamSuffix("door/"))
	projector.Create(doors, func(opened) (door, error) { return door{Open: true}, nil })
	projector.On(doors, func(d door, _ closed) (door, error) { d.Open = false; return d, nil })
	return app.Config{Name: "doors", Registry: registry(), Dial: kurrent.Dial, Projections: []app.Projection{{Definition: doors, Reads: app.StreamPrefix("door/")}}}
}

func TestServers_append_returns_the_events_as_the_engine_receives_them(t *testing.T) {
	servers := e2e.StartServers(t, e2e.Options{})
	first := servers.Append(t, registry(), "door/1", opened{By: "ann"}, closed{})
	more := servers.AppendWithMetadata(t, registry(), "door/1", []byte(`{"by":"test"}`), opened{By: "bob"})
	evs := append(first, more...)
	for i, ev := range evs {
		if ev.StreamID != "door/1" || ev.StreamRevision != uint64(i) || ev.ID == "" || ev.Created.IsZero() || ev.Payload == nil {
			t.Fatalf("event %d: %+v", i, ev)
		}
		if i > 0 && ev.Position <= evs[i-1].Position {
			t.Fatalf("positions not ascending: %d then %d", evs[i-1].Position, ev.Position)
		}
	}
	if evs[0].Payload != (opened{By: "ann"}) || evs[2].Payload != (opened{By: "bob"}) || string(evs[2].Metadata) != `{"by":"test"}` {
		t.Fatalf("payloads or metadata: %+v", evs)
	}
	if servers.Head() != evs[2].Position {
		t.Fatalf("head %d, want the last event's position %d", servers.Head(), evs[2].Position)
	}
	// An upcaster that reads the event's position sees it as the engine
	// does: the payloads are decoded once the positions are known.
	withPosition := registry()
	type stamped struct{ At uint64 }
	projector.Register[stamped](withPosition, "door.stamped",
		projector.Upcast("door.stamped", func(e projector.Event) (stamped, error) { return stamped{At: e.Position}, nil }))
	for _, ev := range servers.Append(t, withPosition, "door/2", stamped{}, stamped{}) {
		if ev.Position == 0 || ev.Payload != (stamped{At: ev.Position}) {
			t.Fatalf("event at %d decoded as %+v: the upcaster saw another position", ev.Position, ev.Payload)
		}
	}
}

func TestStartCommand_runs_a_command_line_and_stops_it_as_SIGTERM_would(t *testing.T) {
	c := doorsConfig()

	servers := e2e.StartServers(t, e2e.Options{})
	db := servers.Database(t)
	evs := servers.Append(t, registry(), "door/7", opened{By: "ann"}, closed{})
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
	cmd.WaitCheckpoint(t, db, "doors", servers.Head())
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, cmd.Stderr())
	}
	var got door
	head, found, err := mongostore.New(db).Load(context.Background(), "doors", "7", 0, &got)
	if rev := head.Revision; err != nil || !found || rev != evs[1].StreamRevision || got.Open {
		t.Fatalf("door 7: %+v at %+v (found %v, %v)", got, head, found, err)
	}

	// A command that ends by itself: its status, and WaitCheckpoint gives up.
	bad := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--on-failure", "sometimes")
	if code := bad.Wait(t, 2*time.Minute); code != 2 || !strings.Contains(bad.Stderr(), `--on-failure "sometimes"`) {
		t.Fatalf("exit %d\n%s", code, bad.Stderr())
	}
	if err := e2e.WaitCheckpoint(db, "doors", servers.Head()+1, bad.Done()); err == nil || !strings.Contains(err.Error(), "ended before the checkpoint") {
		t.Fatalf("WaitCheckpoint on an ended command: %v", err)
	}
}

// A projection that stops at an event that fails for good, while the
// command goes on: WaitCheckpoint gives up soon after, with the error the
// projection recorded, instead of waiting out its two minutes.
func TestWaitCheckpoint_gives_up_on_a_projection_stopped_at_a_failing_event(t *testing.T) {
	doors := strictDoors()
	// Another projection, which goes on: the command runs on.
	visits := projector.New[strictDoor]("visits", projector.StreamSuffix("door/"))
	projector.Create(visits, func(opened) (strictDoor, error) { return strictDoor{Open: true}, nil })
	projector.On(visits, func(d strictDoor, _ closed) (strictDoor, error) { d.Open = false; return d, nil })
	c := app.Config{Name: "doors", Registry: registry(), Dial: kurrent.Dial, Projections: []app.Projection{
		{Definition: doors, Reads: app.StreamPrefix("door/")}, {Definition: visits, Reads: app.StreamPrefix("door/")}}}
	servers := e2e.StartServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "door/8", opened{By: "ann"}, closed{}, closed{})
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
	began := time.Now()
	err := e2e.WaitCheckpoint(db, "doors", servers.Head(), cmd.Done())
	if err == nil || !strings.Contains(err.Error(), "the door is closed already") || !strings.Contains(err.Error(), "stopped short of position") {
		t.Fatalf("WaitCheckpoint: %v, want the projection's error", err)
	}
	if took := time.Since(began); took >= time.Minute {
		t.Fatalf("WaitCheckpoint gave up after %v, want soon after the projection stopped", took)
	}
	select {
	case <-cmd.Done():
		t.Fatalf("the command ended: %s", cmd.Stderr())
	default:
	}
}

// A command that ends because its one projection stopped at an event that
// fails for good: WaitCheckpoint says so with where the checkpoint is and the
// error the projection recorded, read after the command ended.
func TestWaitCheckpoint_on_a_command_that_ended_says_why_its_projection_stopped(t *testing.T) {
	doors := strictDoors()
	c := app.Config{Name: "doors", Registry: registry(), Dial: kurrent.Dial, Projections: []app.Projection{{Definition: doors, Reads: app.StreamPrefix("door/")}}}
	servers := e2e.StartServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "door/9", opened{By: "ann"}, closed{}, closed{})
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "")
	if code := cmd.Wait(t, 2*time.Minute); code == 0 {
		t.Fatalf("exit 0, want the blocked projection to end the command\n%s", cmd.Stderr())
	}
	err := e2e.WaitCheckpoint(db, "doors", servers.Head(), cmd.Done())
	if err == nil || !strings.Contains(err.Error(), "ended before the checkpoint") || !strings.Contains(err.Error(), "its last error: ") ||
		!strings.Contains(err.Error(), "the door is closed already") || strings.Contains(err.Error(), "<nil>") {
		t.Fatalf("WaitCheckpoint: %v, want where the checkpoint is and the projection's error", err)
	}
}

type strictDoor struct {
	Open bool `bson:"open"`
}

// strictDoors is a projection of doors whose closing of a closed door
// fails for good.
func strictDoors() *projector.Projection[strictDoor] {
	doors := projector.New[strictDoor]("doors", projector.StreamSuffix("door/"))
	projector.Create(doors, func(opened) (strictDoor, error) { return strictDoor{Open: true}, nil })
	projector.On(doors, func(d strictDoor, _ closed) (strictDoor, error) {
		if !d.Open {
			return d, errors.New("the door is closed already")
		}
		d.Open = false
		return d, nil
	})
	return doors
}

// A subtest's name may hold what a database name may not (a repeated name
// gets "#01", a version has a dot): each still gets a database it can
// write to.
func TestServers_Database_of_subtests_of_any_name(t *testing.T) {
	servers := e2e.StartServers(t, e2e.Options{})
	for _, name := range []string{"v1.2", "v1.2", "a$b \"c\"/d"} {
		t.Run(name, func(t *testing.T) {
			db := servers.Database(t)
			if _, err := db.Collection("c").InsertOne(context.Background(), map[string]string{"_id": "x"}); err != nil {
				t.Fatalf("database %q of %s: %v", db.Name(), t.Name(), err)
			}
		})
	}
}

// Servers start in subtests of any name, a repeated one ("#01") too.
func TestStartServers_in_subtests_of_a_repeated_name(t *testing.T) {
	for range 2 {
		t.Run("same", func(t *testing.T) {
			db := e2e.StartServers(t, e2e.Options{}).Database(t)
			if _, err := db.Collection("c").InsertOne(context.Background(), map[string]string{"_id": "x"}); err != nil {
				t.Fatalf("%s: %v", t.Name(), err)
			}
		})
	}
}

// WaitCheckpoint waits for a projection split into segments (run
// --segments): for every segment's checkpoint, since the projection has
// none of its own.
func TestWaitCheckpoint_of_a_projection_in_segments(t *testing.T) {
	c := doorsConfig()
	servers := e2e.StartServers(t, e2e.Options{})
	db := servers.Database(t)
	for _, id := range []string{"1", "2", "3", "4", "5", "6"} {
		servers.Append(t, registry(), "door/"+id, opened{By: "ann"}, closed{})
	}
	cmd := e2e.StartCommand(t, c, "run", "--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name(), "--http", "",
		"--segments", "4", "--lease", "2s", "--checkpoint-interval", "100ms")
	if err := e2e.WaitCheckpoint(db, "doors", servers.Head(), cmd.Done()); err != nil {
		t.Fatalf("%v\n%s", err, cmd.Stderr())
	}
	all, err := mongostore.New(db).Checkpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for k := range 4 {
		if cp := all[fmt.Sprintf("doors/segment-%d-of-4", k)].Checkpoint; cp == nil || cp.Position < servers.Head() {
			t.Errorf("segment %d at %v once WaitCheckpoint returned, want the head %d", k, cp, servers.Head())
		}
	}
	if code := cmd.Stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, cmd.Stderr())
	}
}

// After a rebuild, WaitCheckpoint on the projection's name waits for the
// checkpoint of the collection readers were switched to: the first
// collection's stops where the rebuild began.
func TestWaitCheckpoint_after_a_rebuild_waits_for_the_collection_readers_read(t *testing.T) {
	c := doorsConfig()
	servers := e2e.StartServers(t, e2e.Options{})
	db := servers.Database(t)
	servers.Append(t, registry(), "door/1", opened{By: "ann"}, closed{})
	args := []string{"--esdb", servers.ESDBURI(), "--mongo", servers.MongoURI(), "--database", db.Name()}
	first := e2e.StartCommand(t, c, append([]string{"run", "--http", ""}, args...)...)
	first.WaitCheckpoint(t, db, "doors", servers.Head())
	if code := first.Stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, first.Stderr())
	}
	if code := e2e.StartCommand(t, c, append([]string{"rebuild", "doors"}, args...)...).Wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("rebuild: exit %d", code)
	}
	active, err := mongostore.New(db).ActiveCollection(context.Background(), "doors", "doors")
	if err != nil || active == "doors" {
		t.Fatalf("active collection %q (%v): the rebuild switched none", active, err)
	}
	next := e2e.StartCommand(t, c, append([]string{"run", "--http", ""}, args...)...)
	servers.Append(t, registry(), "door/2", opened{By: "bob"})
	if err := e2e.WaitCheckpoint(db, "doors", servers.Head(), next.Done()); err != nil {
		t.Fatalf("WaitCheckpoint after the rebuild: %v", err)
	}
	var d door
	if err := db.Collection(active).FindOne(context.Background(), bson.D{{Key: "_id", Value: "2"}}).Decode(&d); err != nil || !d.Open {
		t.Errorf("door 2 in %s once WaitCheckpoint returned: %+v (%v)", active, d, err)
	}
	next.Stop(t)
}
