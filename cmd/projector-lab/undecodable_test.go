package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
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

// poisonLog is a log of carts, each of a client (ten carts a client), and,
// when poisoned, one event whose payload does not decode in the middle of
// the middle cart: its events by cart and by client, in log order, as the
// folds see them (the bad event left out), and the bad event's id.
type poisonLog struct {
	carts, clients map[string][]projector.Event
	bad            string
	badCart        string
}

func appendPoisonLog(tb testing.TB, c *kurrentdb.Client, n, size int, poisoned bool) poisonLog {
	tb.Helper()
	l := poisonLog{carts: map[string][]projector.Event{}, clients: map[string][]projector.Event{}, badCart: fmt.Sprintf("p%03d", n/2)}
	r := rand.New(rand.NewPCG(11, 11))
	lives := make([][]any, n)
	for i := range lives {
		lives[i] = cart.RandomLife(r, fmt.Sprintf("p%03d", i), fmt.Sprintf("client%02d", i/10), size, time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	}
	appendOne := func(id, client, eventType string, data []byte, payload any) string {
		meta, _ := json.Marshal(cart.Metadata{ClientID: client})
		eid := uuid.New()
		if _, err := c.AppendToStream(context.Background(), cart.StreamID(id), kurrentdb.AppendToStreamOptions{},
			kurrentdb.EventData{EventID: eid, EventType: eventType, ContentType: kurrentdb.ContentTypeJson, Data: data, Metadata: meta}); err != nil {
			tb.Fatal(err)
		}
		return eid.String()
	}
	revs := map[string]uint64{}
	for round := range size {
		for i, life := range lives {
			if round >= len(life) {
				continue
			}
			id, client := fmt.Sprintf("p%03d", i), fmt.Sprintf("client%02d", i/10)
			if poisoned && id == l.badCart && round == size/2 {
				l.bad = appendOne(id, client, "ProductItemAddedToShoppingCart", []byte(`{"shoppingCartId": "`+id+`", "productItem": {`), nil)
				revs[id]++
			}
			name, data, err := cart.Registry().Encode(life[round])
			if err != nil {
				tb.Fatal(err)
			}
			appendOne(id, client, name, data, life[round])
			meta, _ := json.Marshal(cart.Metadata{ClientID: client})
			ev := projector.Event{Type: name, StreamID: cart.StreamID(id), StreamRevision: revs[id], Payload: life[round], Metadata: meta}
			revs[id]++
			l.carts[id] = append(l.carts[id], ev)
			l.clients[client] = append(l.clients[client], ev)
		}
	}
	return l
}

// check asserts that every cart's details and every client's summary in
// the collections given are the fold of their events (the bad one left
// out).
func (l poisonLog) check(tb testing.TB, store *mongostore.Store, details, summaries string) {
	tb.Helper()
	ctx := context.Background()
	for id, evs := range l.carts {
		if err := projectortest.CheckDocument(ctx, store, cart.NewDetailsProjection().InCollection(details), id, evs); err != nil {
			tb.Error(err)
		}
	}
	for id, evs := range l.clients {
		if err := projectortest.CheckDocument(ctx, store, cart.NewClientSummaryProjection().InCollection(summaries), id, evs); err != nil {
			tb.Error(err)
		}
	}
}

// One event whose payload does not decode, among 300 events of 30 carts,
// through the binary (a subprocess, stopped by SIGTERM) under park: it is
// parked, once a projection, and every other event applied in batches; its
// cart's details and its client's summary are the fold of their other
// events. Then a rebuild of the details parks it again, for its build, and
// comes out the same.
func TestRun_one_undecodable_event_is_parked_and_costs_its_document_only(t *testing.T) {
	srv := esdbtest.New(t)
	l := appendPoisonLog(t, srv.Client(t), 30, 10, true)
	db := mongotest.Database(t)
	store := mongostore.New(db)
	common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--on-failure", "park"}
	names := cart.DetailsName + "," + cart.ClientSummaryName
	p := startBinary(t, append([]string{"run", "--http", "", "--checkpoint-interval", "100ms", "--projections", names}, common...)...)
	waitCheckpointOf(t, p, store, cart.DetailsName, srv.Head())
	waitCheckpointOf(t, p, store, cart.ClientSummaryName, srv.Head())
	if code := p.terminate(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, p.stderrText())
	}
	l.check(t, store, cart.DetailsName, cart.ClientSummaryName)
	for _, name := range []string{cart.DetailsName, cart.ClientSummaryName} {
		parked, err := store.Parked(context.Background(), name)
		if err != nil || len(parked) != 1 || parked[0].ID != l.bad || parked[0].StreamID != cart.StreamID(l.badCart) {
			t.Fatalf("parked in %s: %+v (%v), want the bad event once", name, parked, err)
		}
	}

	out, errOut, code := runBinary(t, 2*time.Minute, append([]string{"rebuild", cart.DetailsName}, common...)...)
	m := regexp.MustCompile(`rebuilt cart_details: 301 events .*\(300 applied, 0 already applied, 0 skipped, 1 parked, 0 held;.*readers now use (cart_details_r\d+)`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("rebuild: exit %d\n%s\n%s", code, out, errOut)
	}
	l.check(t, store, m[1], cart.ClientSummaryName)
	parked, err := store.Parked(context.Background(), cart.DetailsName)
	if err != nil || len(parked) != 2 || !strings.Contains(parked[0].Error+parked[1].Error, "decod") {
		t.Fatalf("parked after the rebuild: %+v (%v), want the bad event in each build", parked, err)
	}
}

// BenchmarkOneUndecodableEvent times the binary's catch-up of 3,000 events
// (300 carts of 10, the cart details and the client summaries, under park)
// and a rebuild of the details, on a log with one event whose payload does
// not decode and on the same log without it, in turns, each on a database
// of its own; it reports each pair's ratio (slowed/clean, summed over the
// iterations). On the embedded default: PROJECTOR_TEST_POSTGRES= go test
// ./cmd/projector-lab -run '^$' -bench OneUndecodableEvent -benchtime 3x
// (make bench-undecodable).
func BenchmarkOneUndecodableEvent(b *testing.B) {
	if bin == "" {
		bin = build(b) // without the race detector: timed
	}
	type timing struct{ catchUp, rebuild time.Duration }
	measure := func(poisoned bool) timing {
		srv := esdbtest.New(b)
		l := appendPoisonLog(b, srv.Client(b), 300, 10, poisoned)
		db := mongotest.Database(b)
		store := mongostore.New(db)
		common := []string{"--esdb", srv.URI(), "--mongo", mongotest.URI(b), "--database", db.Name(), "--on-failure", "park"}
		began := time.Now()
		p := startBinary(b, append([]string{"run", "--http", "", "--checkpoint-interval", "50ms",
			"--projections", cart.DetailsName + "," + cart.ClientSummaryName}, common...)...)
		waitCheckpointOf(b, p, store, cart.DetailsName, srv.Head())
		waitCheckpointOf(b, p, store, cart.ClientSummaryName, srv.Head())
		var tm timing
		tm.catchUp = time.Since(began)
		if code := p.terminate(b); code != 0 {
			b.Fatalf("run: exit %d\n%s", code, p.stderrText())
		}
		began = time.Now()
		out, errOut, code := runBinary(b, 5*time.Minute, append([]string{"rebuild", cart.DetailsName}, common...)...)
		tm.rebuild = time.Since(began)
		m := regexp.MustCompile(`readers now use (cart_details_r\d+)`).FindStringSubmatch(out)
		if code != 0 || m == nil {
			b.Fatalf("rebuild: exit %d\n%s\n%s", code, out, errOut)
		}
		l.check(b, store, m[1], cart.ClientSummaryName)
		return tm
	}
	var clean, slowed timing
	for i := range b.N {
		for _, poisoned := range []bool{i%2 == 1, i%2 == 0} {
			tm := measure(poisoned)
			b.Logf("round %d, one undecodable event: %v; catch-up %v, rebuild %v", i, poisoned, tm.catchUp.Round(time.Millisecond), tm.rebuild.Round(time.Millisecond))
			t := &clean
			if poisoned {
				t = &slowed
			}
			t.catchUp += tm.catchUp
			t.rebuild += tm.rebuild
		}
	}
	b.ReportMetric(slowed.catchUp.Seconds()/clean.catchUp.Seconds(), "catch-up-ratio")
	b.ReportMetric(slowed.rebuild.Seconds()/clean.rebuild.Seconds(), "rebuild-ratio")
	b.ReportMetric(clean.catchUp.Seconds()/float64(b.N), "clean-catch-up-s")
	b.ReportMetric(clean.rebuild.Seconds()/float64(b.N), "clean-rebuild-s")
}
