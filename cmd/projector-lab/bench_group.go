package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/revgate/projector/internal/cart"
	"github.com/revgate/projector/kurrent"
	"github.com/revgate/projector/mongostore"
	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/subscription"
)

// groupStall is how long G may go without an event acknowledged before
// the bench gives up on it.
const groupStall = time.Minute

// groupBench is G: the bench's log projected by competing consumers of a
// persistent subscription group on $all, as `run --group` projects it (a
// pinned group from the start of $all, each event handled as it comes and
// acknowledged once its effect is written), each consumer a runner with a
// client of its own. On a server without atomic conditional writes (FerretDB)
// the consumers share one engine, as demo's do; on MongoDB each has its own,
// as separate processes would.
type groupBench struct {
	esdbURI   string
	store     *mongostore.Store
	model     benchModel
	consumers int
	group     string // the group's name: one per round, for the server keeps a group's position
	total     int    // the events of the log
}

// groupReport is what G measured: from before its engines prepare their
// collections to every event acknowledged.
type groupReport struct {
	took      time.Duration
	server    string // the documents' server, as Capabilities names it
	shared    bool   // the consumers share one engine
	acked     uint64 // acknowledgements the server took (a duplicate delivery is acknowledged too)
	retried   uint64 // events handed back to the group, delivered again
	applied   uint64
	dupes     uint64
	waits     uint64
	batches   uint64 // batches of deliveries handled together, and the deliveries in them
	batched   uint64
	consumers int
}

// groupConsumer is one consumer of the group: its client, its source and
// the runner on it.
type groupConsumer struct {
	client *subscription.Client
	src    *subscription.Persistent
	runner *projector.Runner
}

// run runs G until every event is applied and acknowledged, then stops its
// consumers.
func (g groupBench) run(ctx context.Context) (groupReport, error) {
	rep := groupReport{consumers: g.consumers}
	began := time.Now()
	caps, err := g.store.Capabilities(ctx)
	if err != nil {
		return rep, err
	}
	rep.server, rep.shared = caps.Server, !caps.AtomicConditionalWrites
	cs, err := g.build(ctx, rep.shared)
	defer closeConsumers(cs)
	if err != nil {
		return rep, err
	}
	rctx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	errs := startConsumers(rctx, cs, &running)
	err = g.wait(ctx, cs, errs, &rep)
	rep.took = time.Since(began)
	stop()
	running.Wait()
	return rep, err
}

// build makes the consumers, with one engine shared by all of them when
// shared, else one each.
func (g groupBench) build(ctx context.Context, shared bool) ([]*groupConsumer, error) {
	var cs []*groupConsumer
	var eng *projector.Engine
	for i := range g.consumers {
		c := &groupConsumer{}
		cs = append(cs, c)
		var err error
		if c.client, err = kurrent.Dial(g.esdbURI, nil); err != nil {
			return cs, err
		}
		if c.src, err = g.source(c.client); err != nil {
			return cs, err
		}
		if eng == nil || !shared {
			if eng, err = g.engine(ctx, c.client); err != nil {
				return cs, err
			}
		}
		if c.runner, err = projector.NewRunner(fmt.Sprintf("bench-group-%d", i), eng, c.src, nil); err != nil {
			return cs, err
		}
	}
	return cs, nil
}

// source is a consumer of the group, which it creates if missing, with the
// settings `run --group` creates its groups with.
func (g groupBench) source(client *subscription.Client) (*subscription.Persistent, error) {
	return subscription.NewPersistent(client, subscription.PersistentOptions{
		Stream: subscription.AllStreams, Group: g.group,
		OnPermanentFailure: subscription.NackRetry, MaxDeliveries: 10,
		Create: &subscription.GroupSettings{
			Strategy: subscription.Pinned, MaxRetryCount: 10, FromStart: true,
			Filter: subscription.AllOptions{StreamPrefixes: []string{cart.StreamPrefix}},
		},
	})
}

// engine is an engine of the model's projection on the store, with the
// event store as its stream reader, as run's, its collections prepared.
func (g groupBench) engine(ctx context.Context, client *subscription.Client) (*projector.Engine, error) {
	eng, err := projector.NewEngine(g.store, cart.Registry(), []projector.Definition{g.model.def()}, projector.WithStreamReader(client))
	if err != nil {
		return nil, err
	}
	return eng, eng.Prepare(ctx)
}

// startConsumers runs every consumer's runner until ctx is done, on
// running; the errors they end with go to the channel returned.
func startConsumers(ctx context.Context, cs []*groupConsumer, running *sync.WaitGroup) <-chan error {
	errs := make(chan error, len(cs))
	for _, c := range cs {
		running.Go(func() {
			if err := c.runner.Run(ctx); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	return errs
}

func closeConsumers(cs []*groupConsumer) {
	for _, c := range cs {
		if c.client != nil {
			c.client.Close()
		}
	}
}

// wait waits until the consumers are done, and fills rep with their counts.
// They are done when they have applied every event (each event is applied
// once: a redelivery is a duplicate) and acknowledged every delivery they
// handled: a runner counts a delivery's results before its source
// acknowledges it, so the acknowledgements catch up with the count of
// applied and duplicate deliveries only once the last is acknowledged.
func (g groupBench) wait(ctx context.Context, cs []*groupConsumer, errs <-chan error, rep *groupReport) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	last, moved := uint64(0), time.Now()
	for {
		select {
		case err := <-errs:
			return fmt.Errorf("a consumer ended: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		parked := rep.tally(cs)
		switch {
		case parked > 0:
			return fmt.Errorf("%d events parked in group %s", parked, g.group)
		case rep.applied >= uint64(g.total) && rep.acked >= rep.applied+rep.dupes:
			return nil
		case rep.acked != last:
			last, moved = rep.acked, time.Now()
		case time.Since(moved) > groupStall:
			return fmt.Errorf("no event acknowledged for %v: %d of %d applied, %d acknowledged", groupStall, rep.applied, g.total, rep.acked)
		}
	}
}

// tally sums the consumers' counts into rep, and returns how many events
// they parked. The acknowledgements are read first: each is sent after the
// results it settles are counted.
func (rep *groupReport) tally(cs []*groupConsumer) (parked uint64) {
	rep.acked, rep.retried, rep.applied, rep.dupes, rep.waits, rep.batches, rep.batched = 0, 0, 0, 0, 0, 0, 0
	for _, c := range cs {
		st := c.src.Stats()
		rep.acked, rep.retried, parked = rep.acked+st.Acked, rep.retried+st.Retried, parked+st.Parked
	}
	for _, c := range cs {
		st := c.runner.Stats()
		rep.applied, rep.dupes, rep.waits = rep.applied+st.Applied, rep.dupes+st.Duplicates, rep.waits+st.Waits
		rep.batches, rep.batched = rep.batches+st.Batches, rep.batched+st.Batched
	}
	return parked
}

// runG runs G once on a database of its own, and checks its documents
// against the fold. It returns its report and how many documents differ.
func (c *benchCommand) runG(ctx context.Context, round int) (groupReport, int, error) {
	var rep groupReport
	_, db, err := c.measure(ctx, "G", func(db *mongo.Database) (time.Duration, error) {
		g := groupBench{esdbURI: c.elog.server.URI(), store: mongostore.New(db), model: c.model,
			consumers: c.groupConsumers, group: fmt.Sprintf("bench-%d", round), total: c.elog.total}
		var err error
		rep, err = g.run(ctx)
		return rep.took, err
	})
	if err != nil {
		return rep, 0, err
	}
	return rep, c.want.wrong(ctx, db), nil
}

// groupRounds is what the rounds of G measured.
type groupRounds struct {
	took  []time.Duration
	last  groupReport // the last round's counts
	wrong int         // the most documents of G that differ from the fold in a round
}

// add adds a round of G to gs.
func (gs *groupRounds) add(rep groupReport, wrong int) {
	gs.took, gs.last, gs.wrong = append(gs.took, rep.took), rep, max(gs.wrong, wrong)
}

// printGroup prints G's row, its time against F's (each round's against
// that round's R and L) and A's, whether its documents equal the fold, and
// what its consumers did.
func (c *benchCommand) printGroup(rs *benchRounds) {
	gs := rs.g
	if len(gs.took) == 0 {
		return
	}
	total, g, last := c.elog.total, median(gs.took), gs.last
	label := fmt.Sprintf("G  persistent group, %d consumers", last.consumers)
	if last.shared {
		label += ", one engine"
	}
	fmt.Fprintf(c.stdout, "\n  %-44s %12.0f %10v %14s %18s\n", label, float64(total)/g.Seconds(), g.Round(time.Millisecond), "", spread(gs.took))
	each := make([]string, len(gs.took))
	for i, t := range gs.took {
		each[i] = fmt.Sprintf("%.3f", (rs.r[i]+rs.l[i]).Seconds()/t.Seconds())
	}
	floor := median(rs.r) + median(rs.l)
	fmt.Fprintf(c.stdout, "  G/F = %.3f (each round's: %s)   G/A = %.3f   G's documents equal the fold: %d of %d\n",
		floor.Seconds()/g.Seconds(), strings.Join(each, ", "), median(rs.a).Seconds()/g.Seconds(), len(c.want.docs)-gs.wrong, len(c.want.docs))
	engines := fmt.Sprintf("each consumer has an engine of its own (%s has atomic conditional writes)", last.server)
	if last.shared {
		engines = fmt.Sprintf("%s has no atomic conditional writes: the consumers share one engine", last.server)
	}
	fmt.Fprintf(c.stdout, "  G's last round: %d acknowledgements, each after its event's effect was written; %d applied, %d duplicates, %d handed back, %d gate waits; %d batches of %d deliveries in all; %s\n",
		last.acked, last.applied, last.dupes, last.retried, last.waits, last.batches, last.batched, engines)
}

// errGroupWrong says that G's documents differ from the fold.
func (c *benchCommand) errGroupWrong(rs *benchRounds) error {
	if rs.g.wrong == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d documents of G differ from the fold", rs.g.wrong, len(c.want.docs))
}
