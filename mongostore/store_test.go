package mongostore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/grpc"

	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/internal/nettest"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projector/driver"
	"github.com/revgate/projector/projectortest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Main(m)) }

func TestStore_acceptance_on_the_test_server(t *testing.T) {
	t.Logf("server: %s", mongotest.Server(t))
	projectortest.TestStore(t, func(t *testing.T) driver.Store {
		return mongostore.New(mongotest.Database(t))
	})
}

func TestStore_acceptance_on_MongoDB_in_Docker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the Docker tier")
	}
	db := mongotest.Docker(t)
	n := 0
	projectortest.TestStore(t, func(t *testing.T) driver.Store {
		n++
		return mongostore.New(db.Client().Database(db.Name() + "_" + strings.Repeat("x", n)))
	})
}

type withID struct {
	ID   string `bson:"_id"`
	Name string `bson:"name"`
}

type withRevision struct {
	Revision int `bson:"revision"`
}

// panicky panics as it encodes.
type panicky struct{}

func (panicky) MarshalBSON() ([]byte, error) { panic("no encoding today") }

func TestStore_refuses_a_state_it_cannot_store(t *testing.T) {
	s := mongostore.New(mongotest.Database(t))
	ctx := context.Background()
	states := []any{
		withID{ID: "x", Name: "y"}, withRevision{Revision: 3}, // a field the engine owns
		struct{ N uint64 }{N: 1 << 63}, // no int64 holds it
		panicky{},                      // its encoder panics
		struct{ B []byte }{B: make([]byte, 16<<20)}, // more than MongoDB stores
	}
	if strings.HasPrefix(mongotest.Server(t), "FerretDB") {
		// What FerretDB refuses as it writes (MongoDB takes them all); a
		// NaN, at which it drops the connection, the store refuses itself,
		// also deep in the state.
		states = append(states, struct{ F float64 }{F: math.Inf(1)}, struct{ M map[string]int }{M: map[string]int{"jane.doe@example.com": 1}},
			struct{ Avg float64 }{Avg: math.NaN()}, struct{ Rooms []map[string]float64 }{Rooms: []map[string]float64{{"a": 1}, {"b": math.NaN()}}})
	}
	for _, st := range states {
		if err := s.Insert(ctx, "docs", "d1", driver.Head{}, st); !errors.Is(err, driver.ErrUnencodable) {
			t.Errorf("Insert %T: err = %v, want driver.ErrUnencodable", st, err)
		}
		if _, ok := st.(withRevision); ok {
			continue // a versioned document has no revision field
		}
		if _, err := s.PutGuarded(ctx, "guarded", "d1", -1, driver.Meta{}, st); !errors.Is(err, driver.ErrUnencodable) {
			t.Errorf("PutGuarded %T: err = %v, want driver.ErrUnencodable", st, err)
		}
	}
	if strings.HasPrefix(mongotest.Server(t), "FerretDB") {
		deep := struct{ Rooms []map[string]float64 }{Rooms: []map[string]float64{{"a": 1}, {"b": math.NaN()}}}
		if err := s.Insert(ctx, "docs", "d1", driver.Head{}, deep); err == nil || !strings.Contains(err.Error(), " rooms.1.b is NaN") {
			t.Errorf("a NaN deep in the state: err = %v, want it to name its path, rooms.1.b", err)
		}
	}
	// The store still writes: no connection was lost, and nothing refused
	// was written.
	if err := s.Insert(ctx, "docs", "d1", driver.Head{}, struct{ Avg float64 }{Avg: 2.5}); err != nil {
		t.Fatalf("a state it can store, after those: %v", err)
	}
}

type counted struct {
	N uint64 `bson:"n"`
}

func TestStore_bulk_writes_write_every_document_but_the_one_it_cannot_store(t *testing.T) {
	s := mongostore.New(mongotest.Database(t))
	ctx := context.Background()
	states := []counted{{N: 1}, {N: 1 << 63}, {N: 3}}
	var writes []driver.Write
	var puts []driver.Put
	for i, st := range states {
		id := fmt.Sprintf("d%d", i)
		writes = append(writes, driver.Write{ID: id, Insert: true, State: st})
		puts = append(puts, driver.Put{ID: id, Expected: -1, State: st})
	}
	ok, err := s.WriteMany(ctx, "gated", writes)
	if err != nil || !slices.Equal(ok, []bool{true, false, true}) {
		t.Errorf("WriteMany: ok %v, err %v; want [true false true], no error", ok, err)
	}
	ok, err = s.PutGuardedMany(ctx, "guarded", puts)
	if err != nil || !slices.Equal(ok, []bool{true, false, true}) {
		t.Errorf("PutGuardedMany: ok %v, err %v; want [true false true], no error", ok, err)
	}
	for _, coll := range []string{"gated", "guarded"} {
		for i, want := range []bool{true, false, true} {
			var got counted
			_, found, err := s.Load(ctx, coll, fmt.Sprintf("d%d", i), 0, &got)
			if coll == "guarded" {
				_, found, err = s.LoadGuarded(ctx, coll, fmt.Sprintf("d%d", i), &got)
			}
			if err != nil || found != want || (found && got != states[i]) {
				t.Errorf("%s/d%d: found %v (%+v), err %v; want found %v", coll, i, found, got, err, want)
			}
		}
	}
}

func TestConnect_bad_input_fails_fast_with_a_clear_error(t *testing.T) {
	cases := []struct {
		name, uri, want string
	}{
		{"not a URI", "localhost:27017", "invalid MongoDB URI"},
		{"unknown scheme", "postgres://localhost", "invalid MongoDB URI"},
		{"password is not echoed", "mongodb://user:s3cret@host:99999", "invalid MongoDB URI"},
		{"nobody listening", "mongodb://127.0.0.1:1/?connectTimeoutMS=200", "no MongoDB answered at 127.0.0.1:1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := mongostore.Connect(context.Background(), c.uri, 2*time.Second)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error shows the password: %v", err)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("took %v", took)
			}
		})
	}
}

// A host name that does not exist is said so at once, in one line, not
// after the connect timeout with the driver's description of its topology.
func TestConnect_a_host_that_does_not_exist_is_said_so_at_once(t *testing.T) {
	const host = "no-such-host.invalid"
	var dns *net.DNSError
	if _, err := net.LookupHost(host); !errors.As(err, &dns) || !dns.IsNotFound {
		t.Skipf("this machine's resolver does not say that %s does not exist (%v)", host, err)
	}
	start := time.Now()
	_, err := mongostore.Connect(context.Background(), "mongodb://"+host+":27017", 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "no MongoDB at "+host+":27017: no such host") || strings.Contains(err.Error(), "topology") {
		t.Fatalf("err = %v, want one line saying there is no such host", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %v, want it said before the connect timeout (20s)", took)
	}
}

func TestStore_capabilities_tell_FerretDB_from_MongoDB(t *testing.T) {
	s := mongostore.New(mongotest.Database(t))
	caps, err := s.Capabilities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ferret := strings.HasPrefix(mongotest.Server(t), "FerretDB")
	if strings.HasPrefix(caps.Server, "FerretDB") != ferret {
		t.Fatalf("capabilities say %q on %s", caps.Server, mongotest.Server(t))
	}
	if ferret && (caps.AtomicConditionalWrites || caps.Transactions) {
		t.Fatalf("FerretDB has neither atomic conditional writes nor transactions: %+v", caps)
	}
	if !ferret && !caps.AtomicConditionalWrites {
		t.Fatalf("MongoDB's conditional writes are atomic: %+v", caps)
	}
}

func TestCheckpoint_saved_loaded_and_only_moved_forward(t *testing.T) {
	ctx := context.Background()
	s := mongostore.New(mongotest.Database(t))
	if c, err := s.LoadCheckpoint(ctx, "sub"); err != nil || c != nil {
		t.Fatalf("none stored: %v %v", c, err)
	}
	steps := []struct{ save, want projector.Checkpoint }{
		{projector.Checkpoint{Position: 99, Prepare: 99}, projector.Checkpoint{Position: 99, Prepare: 99}},
		{projector.Checkpoint{Position: 1 << 40, Prepare: 1<<40 + 7}, projector.Checkpoint{Position: 1 << 40, Prepare: 1<<40 + 7}},
		{projector.Checkpoint{Position: 5}, projector.Checkpoint{Position: 1 << 40, Prepare: 1<<40 + 7}}, // not backwards
		{projector.Checkpoint{Position: 1 << 40, Prepare: 1<<40 + 7}, projector.Checkpoint{Position: 1 << 40, Prepare: 1<<40 + 7}},
		// Inside a legacy TCP transaction (one commit position): forward by
		// prepare position, never back.
		{projector.Checkpoint{Position: 1<<40 + 100, Prepare: 1<<40 + 80}, projector.Checkpoint{Position: 1<<40 + 100, Prepare: 1<<40 + 80}},
		{projector.Checkpoint{Position: 1<<40 + 100, Prepare: 1<<40 + 90}, projector.Checkpoint{Position: 1<<40 + 100, Prepare: 1<<40 + 90}},
		{projector.Checkpoint{Position: 1<<40 + 100, Prepare: 1<<40 + 70}, projector.Checkpoint{Position: 1<<40 + 100, Prepare: 1<<40 + 90}},
	}
	for i, st := range steps {
		if err := s.SaveCheckpoint(ctx, "sub", st.save); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got, err := s.LoadCheckpoint(ctx, "sub")
		if err != nil || got == nil || *got != st.want {
			t.Fatalf("step %d: loaded %v %v, want %v", i, got, err, st.want)
		}
	}
	if c, err := s.LoadCheckpoint(ctx, "other"); err != nil || c != nil {
		t.Fatalf("other name: %v %v", c, err)
	}
	if err := s.SaveCheckpoint(ctx, "sub", projector.Checkpoint{Position: 1 << 63}); err == nil {
		t.Fatal("a position past int64 was accepted")
	}
	if err := s.DeleteCheckpoint(ctx, "sub"); err != nil {
		t.Fatal(err)
	}
	if c, err := s.LoadCheckpoint(ctx, "sub"); err != nil || c != nil {
		t.Fatalf("after delete: %v %v", c, err)
	}
}

func TestCollections_a_rebuild_resumes_then_switches_readers(t *testing.T) {
	ctx := context.Background()
	s := mongostore.New(mongotest.Database(t))
	if got, err := s.ActiveCollection(ctx, "p", "p_docs"); err != nil || got != "p_docs" {
		t.Fatalf("no record: %q %v", got, err)
	}
	if got, err := s.StartRebuild(ctx, "p", "p_r1"); err != nil || got != "p_r1" {
		t.Fatalf("start: %q %v", got, err)
	}
	if got, err := s.StartRebuild(ctx, "p", "p_r2"); err != nil || got != "p_r1" {
		t.Fatalf("start again: %q %v, want the rebuild in progress", got, err)
	}
	if got, _ := s.ActiveCollection(ctx, "p", "p_docs"); got != "p_docs" {
		t.Fatalf("readers moved before the switch: %q", got)
	}
	if _, err := s.FinishRebuild(ctx, "p", "p_r2", "p_docs"); err == nil {
		t.Fatal("switched to a collection that is not the one being built")
	}
	c, err := s.FinishRebuild(ctx, "p", "p_r1", "p_docs")
	if err != nil || c.Active != "p_r1" || c.Previous != "p_docs" || c.Building != "" {
		t.Fatalf("finish: %+v %v", c, err)
	}
	if got, _ := s.ActiveCollection(ctx, "p", "p_docs"); got != "p_r1" {
		t.Fatalf("active %q after the switch", got)
	}
	if _, err := s.FinishRebuild(ctx, "p", "p_r1", "p_docs"); err == nil {
		t.Fatal("finished a rebuild that was not in progress")
	}
	if got, _ := s.StartRebuild(ctx, "p", "p_r3"); got != "p_r3" {
		t.Fatalf("second rebuild: %q", got)
	}
	if c, _ := s.FinishRebuild(ctx, "p", "p_r3", "p_docs"); c.Active != "p_r3" || c.Previous != "p_r1" {
		t.Fatalf("second switch: %+v", c)
	}
}

// The hold policy looks up a held document's events for each of its later
// events: PrepareHolds (the engine's Prepare, under hold) creates the index
// those lookups use; reading the held documents (status does) writes
// nothing; the lookups count per document and build.
func TestPrepareHolds_creates_the_index_of_the_held_lookups_and_Held_writes_nothing(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Database(t)
	s := mongostore.New(db)
	if held, err := s.Held(ctx, "p", "c"); err != nil || len(held) != 0 {
		t.Fatalf("held on an empty database: %v (%v)", held, err)
	}
	if names, err := db.ListCollectionNames(ctx, bson.D{}); err != nil || len(names) != 0 {
		t.Fatalf("collections after reading the held documents: %v (%v), want none", names, err)
	}
	if err := s.PrepareHolds(ctx); err != nil {
		t.Fatal(err)
	}
	for i, d := range []string{"a", "a", "b"} {
		pe := projector.ParkedEvent{Projection: "p", Document: d, Event: projector.Event{StreamID: "s-" + d, StreamRevision: uint64(i),
			ID: "e" + string(rune('0'+i)), Type: "T", Data: []byte(`{}`)}, ParkedAt: time.Now(), Held: true, Collection: "c"}
		if recorded, err := s.Park(ctx, pe); err != nil || !recorded {
			t.Fatalf("recorded %v: %v", recorded, err)
		}
		if again, err := s.Park(ctx, pe); err != nil || again {
			t.Fatalf("the same event again: recorded %v (%v), want nothing recorded", again, err)
		}
	}
	held, err := s.Held(ctx, "p", "c")
	if err != nil || held["a"] != 2 || held["b"] != 1 || len(held) != 2 {
		t.Fatalf("held %v (%v), want a: 2, b: 1", held, err)
	}
	if n, err := s.Holds(ctx, "p", "c", "a"); err != nil || n != 2 {
		t.Fatalf("holds a: %d (%v), want 2", n, err)
	}
	if n, err := s.Holds(ctx, "p", "other build", "a"); err != nil || n != 0 {
		t.Fatalf("holds a in another build: %d (%v), want 0", n, err)
	}
	specs, err := db.Collection(mongostore.ParkedCollection).Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		if strings.Contains(sp.KeysDocument.String(), `"projection"`) && strings.Contains(sp.KeysDocument.String(), `"document"`) {
			return
		}
	}
	t.Fatalf("indexes of %s: %d, none on projection and document", mongostore.ParkedCollection, len(specs))
}

// CheckURI parses without connecting: a mongodb+srv:// string is not
// resolved (a DNS failure is not a bad flag), and one that does not parse is
// an error without its password.
func TestCheckURI_parses_without_connecting(t *testing.T) {
	for _, uri := range []string{"mongodb://localhost:27017/?directConnection=true", "mongodb+srv://cluster0.example.invalid/", "MONGODB+SRV://u:p@cluster0.example.invalid/db"} {
		began := time.Now()
		if err := mongostore.CheckURI(uri); err != nil {
			t.Errorf("%s: %v", uri, err)
		}
		if took := time.Since(began); took > time.Second {
			t.Errorf("%s: %v to parse", uri, took)
		}
	}
	for _, uri := range []string{"localhost:27017", "mongodb://u:hunter2@host:99999", "mongodb+srv://u:hunter2@host:99999/"} {
		err := mongostore.CheckURI(uri)
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "invalid MongoDB URI") {
			t.Errorf("%s: %v, want an invalid URI without the password", uri, err)
		}
	}
	// Text pasted after a URI is not taken for its database.
	for _, uri := range []string{"mongodb://127.0.0.1:38003/, database projector_demo", "mongodb://u:hunter2@h:1/my db", "mongodb://h/a.b"} {
		err := mongostore.CheckURI(uri)
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "no database name has") {
			t.Errorf("%s: %v, want its database refused", uri, err)
		}
	}
	for _, uri := range []string{"mongodb://h:1/projector", "mongodb://u:p@h:1/admin?authSource=admin", "mongodb://h/my-db_1"} {
		if err := mongostore.CheckURI(uri); err != nil {
			t.Errorf("%s: %v", uri, err)
		}
	}
}

// The processes of a group that start together record their group at
// once: each record lands (two upserts of one missing record both insert,
// and the one that loses must update what the other inserted), and so does
// each error. (They record the same group: FerretDB applies updates of one
// document that run at once without isolation, and may lose one of two
// different groups recorded at the same instant.)
func TestRecordGroup_and_RecordError_from_processes_starting_together(t *testing.T) {
	s := mongostore.New(mongotest.Database(t))
	ctx := context.Background()
	const processes = 6
	for round := range 5 {
		projection := fmt.Sprint("p", round)
		var wg sync.WaitGroup
		errs := make(chan error, 2*processes)
		for i := range processes {
			wg.Go(func() { errs <- s.RecordGroup(ctx, projection, "g") })
			wg.Go(func() { errs <- s.RecordError(ctx, projection, fmt.Sprint("stopped ", i)) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		c, err := s.CollectionsOf(ctx, projection)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Groups, []string{"g"}) {
			t.Fatalf("round %d: groups %v, want [g]", round, c.Groups)
		}
	}
}

// A replay that fails again records its new cause as the park recorded the
// first: the error alone, not wrapped in where the event failed (the
// record's own fields), so that status shows the two alike.
func TestReplayed_records_the_cause_of_a_failure_again_as_the_park_did(t *testing.T) {
	ctx := context.Background()
	s := mongostore.New(mongotest.Database(t))
	ev := projector.Event{StreamID: "member-7", StreamRevision: 2, ID: "e7", Type: "PointsRedeemed", Data: []byte(`{"amount":"ten"}`)}
	pe := projector.ParkedEvent{Projection: "members", Document: "7", Event: ev, Error: "payload does not decode: first", ParkedAt: time.Now()}
	if recorded, err := s.Park(ctx, pe); err != nil || !recorded {
		t.Fatalf("recorded %v: %v", recorded, err)
	}
	cause := errors.New("payload does not decode: again")
	failed := &projector.Error{Projection: "members", Document: "7", Stream: ev.StreamID, EventID: ev.ID, EventType: ev.Type, Revision: 2, Wanted: -1, Seen: -1, Err: cause}
	if err := s.Replayed(ctx, pe, failed); err != nil {
		t.Fatal(err)
	}
	parked, err := s.Parked(ctx, "members")
	if err != nil || len(parked) != 1 {
		t.Fatalf("parked %+v (%v), want the one event, still parked", parked, err)
	}
	if got := parked[0].Error; got != cause.Error() {
		t.Errorf("recorded error %q, want the cause %q", got, cause.Error())
	}
	if parked[0].Attempts != pe.Attempts+1 {
		t.Errorf("attempts %d, want %d", parked[0].Attempts, pe.Attempts+1)
	}

	// An event parked with no document (its router could not route it) is
	// routed again by its replay: the error it fails with there says the
	// document, which the record does not.
	ev.ID, ev.StreamRevision = "e8", 3
	unrouted := projector.ParkedEvent{Projection: "members", Event: ev, Error: "cannot be routed", ParkedAt: time.Now()}
	if recorded, err := s.Park(ctx, unrouted); err != nil || !recorded {
		t.Fatalf("recorded %v: %v", recorded, err)
	}
	failed = &projector.Error{Projection: "members", Document: "7", Stream: ev.StreamID, EventID: ev.ID, EventType: ev.Type, Revision: 3, Wanted: -1, Seen: -1, Err: cause}
	if err := s.Replayed(ctx, unrouted, failed); err != nil {
		t.Fatal(err)
	}
	if parked, err = s.Parked(ctx, "members"); err != nil || len(parked) != 2 {
		t.Fatalf("parked %+v (%v), want both events, still parked", parked, err)
	}
	for _, pe := range parked {
		if pe.ID == "e8" && pe.Error != failed.Error() {
			t.Errorf("recorded error %q of the event parked with no document, want the whole error %q", pe.Error, failed.Error())
		}
	}
}

// Another server's port given as MongoDB's (the event store's, a gRPC
// server, which greets a client first) is said at its first reply, not
// after the whole timeout as "no MongoDB answered".
func TestConnect_a_server_that_is_not_MongoDB_is_named_at_its_first_reply(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	go srv.Serve(ln)
	defer srv.Stop()
	host := ln.Addr().String()
	start := time.Now()
	_, err = mongostore.Connect(context.Background(), "mongodb://"+host+"/", time.Minute)
	want := "mongostore: the server at " + host + " does not answer as MongoDB (is it the right port?): its reply does not begin as a MongoDB message does"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want one containing %q", err, want)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("took %v: the connect timeout of a minute was waited out", took)
	}
}

// A TLS port given without tls=true (an HTTPS server here; a MongoDB
// that requires TLS does the same) closes the connection at each
// handshake: the timeout says so, and names tls=true.
func TestConnect_a_server_that_closes_each_handshake_is_said_so(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // its handshake errors
	srv.StartTLS()
	defer srv.Close()
	host := srv.Listener.Addr().String()
	_, err := mongostore.Connect(context.Background(), "mongodb://"+host+"/", 2*time.Second)
	want := "mongostore: no MongoDB answered at " + host + " within 2s: the server there closed the connection at each handshake"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "tls=true") {
		t.Fatalf("err = %v, want one containing %q and naming tls=true", err, want)
	}
}

// A server that takes the connection and never answers (as one of
// another protocol that waits for its request, HTTP/1) is said so when
// the timeout ends, not as no server at all.
func TestConnect_a_server_that_never_answers_the_handshake_is_said_so(t *testing.T) {
	host := nettest.Silent(t)
	_, err := mongostore.Connect(context.Background(), "mongodb://"+host+"/", 2*time.Second)
	want := "mongostore: no MongoDB answered at " + host + " within 2s: the server there took the connection but did not answer the handshake"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want one containing %q", err, want)
	}
}

// A mongodb+srv:// host is looked up as the string is parsed: a host that
// does not resolve is said so, not called an invalid URI.
func TestConnect_an_SRV_host_that_does_not_resolve_is_no_invalid_URI(t *testing.T) {
	_, err := mongostore.Connect(context.Background(), "mongodb+srv://user:s3cret@nowhere.invalid/", 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "SRV host does not resolve") || strings.Contains(err.Error(), "invalid MongoDB URI") {
		t.Fatalf("err = %v, want it to say the SRV host does not resolve", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("the error shows the password: %v", err)
	}
}
