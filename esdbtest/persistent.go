package esdbtest

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/persistent"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// groups holds the persistent subscription groups and what they parked.
type groups struct {
	s *Server

	mu      sync.Mutex
	m       map[groupKey]*group
	stopped bool

	parkedMu sync.Mutex
	parked   map[groupKey][]parkedEntry
}

// parkedEntry is a parked message: what Parked reports, plus what a replay
// needs.
type parkedEntry struct {
	Parked
	msg       *message
	parkedRev uint64 // revision of its link in the parked stream
}

func newGroups(s *Server) *groups {
	return &groups{s: s, m: make(map[groupKey]*group), parked: make(map[groupKey][]parkedEntry)}
}

func (gs *groups) get(key groupKey) *group {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.m[key]
}

func (gs *groups) list() []*group {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	out := make([]*group, 0, len(gs.m))
	for _, g := range gs.m {
		out = append(out, g)
	}
	return out
}

func (gs *groups) create(key groupKey, settings groupSettings, start startPoint, f *filter) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.stopped {
		return status.Error(codes.Unavailable, "esdbtest: server closed")
	}
	if _, ok := gs.m[key]; ok {
		return status.Errorf(codes.AlreadyExists, "esdbtest: subscription group %s on %s exists", key.group, key.stream)
	}
	g := &group{
		s:        gs.s,
		key:      key,
		filter:   f,
		settings: settings,
		start:    start,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	g.startIdx = g.resolveStart(start)
	g.reset(g.startIdx)
	gs.m[key] = g
	gs.s.wg.Add(1)
	go func() {
		defer gs.s.wg.Done()
		g.run()
	}()
	return nil
}

func (gs *groups) remove(key groupKey) *group {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.m[key]
	delete(gs.m, key)
	return g
}

// stopAll shuts every group down for Close.
func (gs *groups) stopAll() {
	gs.mu.Lock()
	all := gs.m
	gs.m = make(map[groupKey]*group)
	gs.stopped = true
	gs.mu.Unlock()
	for _, g := range all {
		g.shutdown(codes.Unavailable, "esdbtest: server closed")
	}
}

func (gs *groups) addParked(key groupKey, e parkedEntry) {
	gs.parkedMu.Lock()
	defer gs.parkedMu.Unlock()
	gs.parked[key] = append(gs.parked[key], e)
}

func (gs *groups) parkedOf(key groupKey) []Parked {
	gs.parkedMu.Lock()
	defer gs.parkedMu.Unlock()
	var out []Parked
	for _, e := range gs.parked[key] {
		out = append(out, e.Parked)
	}
	return out
}

// takeParked removes and returns the parked entries whose link revision is
// below stopAt.
func (gs *groups) takeParked(key groupKey, stopAt uint64) []parkedEntry {
	gs.parkedMu.Lock()
	defer gs.parkedMu.Unlock()
	var taken, kept []parkedEntry
	for _, e := range gs.parked[key] {
		if e.parkedRev < stopAt {
			taken = append(taken, e)
		} else {
			kept = append(kept, e)
		}
	}
	gs.parked[key] = kept
	return taken
}

// persistentService serves the PersistentSubscriptions service.
type persistentService struct {
	persistent.UnimplementedPersistentSubscriptionsServer
	s *Server
}

// Create creates a group on a stream or on $all.
func (svc *persistentService) Create(ctx context.Context, req *persistent.CreateReq) (*persistent.CreateResp, error) {
	if !svc.s.allowOps(ctx) {
		return nil, accessDeniedError().onUnary(ctx)
	}
	opts := req.GetOptions()
	key, start, f, err := createTarget(opts)
	if err != nil {
		return nil, err
	}
	strategy := opts.GetSettings().GetConsumerStrategy()
	if strategy == "" {
		//lint:ignore SA1019 clients before 21.10 name the strategy in the deprecated field
		strategy = opts.GetSettings().GetNamedConsumerStrategy().String()
	}
	settings, err := settingsOf(opts.GetSettings(), strategy)
	if err != nil {
		return nil, err
	}
	if err := svc.s.groups.create(key, settings, start, f); err != nil {
		return nil, err
	}
	svc.s.logger.Debug("esdbtest: group created", "group", key.group, "stream", key.stream)
	return &persistent.CreateResp{}, nil
}

// createTarget reads which group a Create is for, where it starts and its
// filter.
func createTarget(opts *persistent.CreateReq_Options) (groupKey, startPoint, *filter, error) {
	key := groupKey{group: opts.GetGroupName()}
	var start startPoint
	var f *filter
	switch so := opts.GetStreamOption().(type) {
	case *persistent.CreateReq_Options_Stream:
		key.stream = string(so.Stream.GetStreamIdentifier().GetStreamName())
		switch v := so.Stream.GetRevisionOption().(type) {
		case *persistent.CreateReq_StreamOptions_End:
			start.kind = fromEnd
		case *persistent.CreateReq_StreamOptions_Revision:
			start = startPoint{kind: fromPoint, point: v.Revision}
		}
	case *persistent.CreateReq_Options_All:
		key.stream = allStream
		switch v := so.All.GetAllOption().(type) {
		case *persistent.CreateReq_AllOptions_End:
			start.kind = fromEnd
		case *persistent.CreateReq_AllOptions_Position:
			start = startPoint{kind: fromPoint, point: v.Position.GetCommitPosition()}
		}
		if fo := so.All.GetFilter(); fo != nil {
			var err error
			if f, err = filterOfCreate(fo); err != nil {
				return key, start, nil, err
			}
		}
	default: // clients before 21.10: the deprecated fields
		//lint:ignore SA1019 clients before 21.10 send the deprecated fields
		key.stream = string(opts.GetStreamIdentifier().GetStreamName())
		//lint:ignore SA1019 clients before 21.10 send the deprecated fields
		switch rev := opts.GetSettings().GetRevision(); rev {
		case 0:
		case math.MaxUint64:
			start.kind = fromEnd
		default:
			start = startPoint{kind: fromPoint, point: rev}
		}
	}
	if key.group == "" || key.stream == "" {
		return key, start, nil, status.Error(codes.InvalidArgument, "esdbtest: group and stream names required")
	}
	return key, start, f, nil
}

// Update changes a group's settings and restarts it. A group on $all keeps
// its filter (the protocol cannot change it).
func (svc *persistentService) Update(ctx context.Context, req *persistent.UpdateReq) (*persistent.UpdateResp, error) {
	if !svc.s.allowOps(ctx) {
		return nil, accessDeniedError().onUnary(ctx)
	}
	opts := req.GetOptions()
	key, start := updateTarget(opts)
	g := svc.s.groups.get(key)
	if g == nil {
		return nil, groupNotFound(key)
	}
	settings, err := settingsOf(opts.GetSettings(), opts.GetSettings().GetNamedConsumerStrategy().String())
	if err != nil {
		return nil, err
	}
	g.restart(settings, start, "esdbtest: persistent subscription group updated")
	return &persistent.UpdateResp{}, nil
}

// updateTarget reads which group an Update is for and its new start.
func updateTarget(opts *persistent.UpdateReq_Options) (groupKey, startPoint) {
	key := groupKey{group: opts.GetGroupName()}
	var start startPoint
	switch so := opts.GetStreamOption().(type) {
	case *persistent.UpdateReq_Options_Stream:
		key.stream = string(so.Stream.GetStreamIdentifier().GetStreamName())
		switch v := so.Stream.GetRevisionOption().(type) {
		case *persistent.UpdateReq_StreamOptions_End:
			start.kind = fromEnd
		case *persistent.UpdateReq_StreamOptions_Revision:
			start = startPoint{kind: fromPoint, point: v.Revision}
		}
	case *persistent.UpdateReq_Options_All:
		key.stream = allStream
		switch v := so.All.GetAllOption().(type) {
		case *persistent.UpdateReq_AllOptions_End:
			start.kind = fromEnd
		case *persistent.UpdateReq_AllOptions_Position:
			start = startPoint{kind: fromPoint, point: v.Position.GetCommitPosition()}
		}
	default:
		//lint:ignore SA1019 clients before 21.10 send the deprecated fields
		key.stream = string(opts.GetStreamIdentifier().GetStreamName())
	}
	return key, start
}

// Delete deletes a group and drops its consumers. Its parked stream stays.
func (svc *persistentService) Delete(ctx context.Context, req *persistent.DeleteReq) (*persistent.DeleteResp, error) {
	if !svc.s.allowOps(ctx) {
		return nil, accessDeniedError().onUnary(ctx)
	}
	opts := req.GetOptions()
	key := groupKey{group: opts.GetGroupName(), stream: allStream}
	if id := opts.GetStreamIdentifier(); id != nil {
		key.stream = string(id.GetStreamName())
	}
	g := svc.s.groups.remove(key)
	if g == nil {
		return nil, groupNotFound(key)
	}
	g.shutdown(codes.NotFound, "esdbtest: persistent subscription group deleted")
	return &persistent.DeleteResp{}, nil
}

// GetInfo describes one group.
func (svc *persistentService) GetInfo(ctx context.Context, req *persistent.GetInfoReq) (*persistent.GetInfoResp, error) {
	if !svc.s.allowAuthenticated(ctx) {
		return nil, accessDeniedError().onUnary(ctx)
	}
	opts := req.GetOptions()
	key := groupKey{group: opts.GetGroupName(), stream: allStream}
	if id := opts.GetStreamIdentifier(); id != nil {
		key.stream = string(id.GetStreamName())
	}
	g := svc.s.groups.get(key)
	if g == nil {
		return nil, groupNotFound(key)
	}
	return &persistent.GetInfoResp{SubscriptionInfo: g.info()}, nil
}

// List describes all groups, or those of one stream.
func (svc *persistentService) List(ctx context.Context, req *persistent.ListReq) (*persistent.ListResp, error) {
	if !svc.s.allowAuthenticated(ctx) {
		return nil, accessDeniedError().onUnary(ctx)
	}
	opts := req.GetOptions()
	var only *string
	if fs := opts.GetListForStream(); fs != nil {
		name := allStream
		if id := fs.GetStream(); id != nil {
			name = string(id.GetStreamName())
		}
		only = &name
	}
	resp := &persistent.ListResp{}
	for _, g := range svc.s.groups.list() {
		if only == nil || g.key.stream == *only {
			resp.Subscriptions = append(resp.Subscriptions, g.info())
		}
	}
	if only != nil && len(resp.Subscriptions) == 0 {
		return nil, status.Errorf(codes.NotFound, "esdbtest: no subscription group on %s", *only)
	}
	return resp, nil
}

// ReplayParked sends a group's parked messages again.
func (svc *persistentService) ReplayParked(ctx context.Context, req *persistent.ReplayParkedReq) (*persistent.ReplayParkedResp, error) {
	if !svc.s.allowOps(ctx) {
		return nil, accessDeniedError().onUnary(ctx)
	}
	opts := req.GetOptions()
	key := groupKey{group: opts.GetGroupName(), stream: allStream}
	if id := opts.GetStreamIdentifier(); id != nil {
		key.stream = string(id.GetStreamName())
	}
	g := svc.s.groups.get(key)
	if g == nil {
		return nil, groupNotFound(key)
	}
	stopAt := uint64(math.MaxUint64)
	if v, ok := opts.GetStopAtOption().(*persistent.ReplayParkedReq_Options_StopAt); ok && v.StopAt >= 0 {
		stopAt = uint64(v.StopAt)
	}
	g.replay(svc.s.groups.takeParked(key, stopAt))
	return &persistent.ReplayParkedResp{}, nil
}

// RestartSubsystem restarts every group after its checkpoint.
func (svc *persistentService) RestartSubsystem(ctx context.Context, _ *shared.Empty) (*shared.Empty, error) {
	if !svc.s.allowOps(ctx) {
		return nil, accessDeniedError().onUnary(ctx)
	}
	for _, g := range svc.s.groups.list() {
		g.mu.Lock()
		settings, start := g.settings, g.start
		g.mu.Unlock()
		g.restart(settings, start, "esdbtest: persistent subscriptions subsystem restarted")
	}
	return &shared.Empty{}, nil
}

// Read connects a consumer to a group: a confirmation, then the group's
// messages, while acks and nacks come the other way.
func (svc *persistentService) Read(srv persistent.PersistentSubscriptions_ReadServer) error {
	first, err := srv.Recv()
	if err != nil {
		return err
	}
	opts := first.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "esdbtest: the first message must be the options")
	}
	key := groupKey{group: opts.GetGroupName(), stream: allStream}
	if id := opts.GetStreamIdentifier(); id != nil {
		key.stream = string(id.GetStreamName())
	}
	// The node's ProcessMessages: a user who may read the group's stream.
	if !svc.s.allowStream(srv.Context(), actionRead, key.stream) {
		return accessDeniedError().onStream(srv)
	}
	g := svc.s.groups.get(key)
	if g == nil {
		return groupNotFound(key)
	}
	c := &consumer{
		id:         key.stream + "::" + key.group + "::" + uuid.NewString(),
		bufferSize: int(opts.GetBufferSize()),
		asString:   opts.GetUuidOption().GetString_() != nil,
		inflight:   make(map[uuid.UUID]*message),
		notify:     make(chan struct{}, 1),
	}
	if c.bufferSize <= 0 {
		c.bufferSize = 10
	}
	if p, ok := peer.FromContext(srv.Context()); ok {
		c.from = p.Addr.String()
	}
	c.live = svc.s.subs.add()
	defer svc.s.subs.remove(c.live)
	if err := g.addConsumer(c); err != nil {
		return err
	}
	defer g.removeConsumer(c)
	confirm := &persistent.ReadResp{Content: &persistent.ReadResp_SubscriptionConfirmation_{
		SubscriptionConfirmation: &persistent.ReadResp_SubscriptionConfirmation{SubscriptionId: key.stream + "::" + key.group},
	}}
	if err := srv.Send(confirm); err != nil {
		return err
	}

	// Acks and nacks. The goroutine ends soon after the call does (Recv
	// then fails). Close waits for it: grpc.Server.Stop waits for the
	// handlers, so this Add happens before Close's Wait.
	recvErr := make(chan error, 1)
	svc.s.wg.Add(1)
	go func() {
		defer svc.s.wg.Done()
		recvErr <- svc.receive(srv, g, c)
	}()

	for {
		select {
		case <-c.notify:
			for _, m := range c.take() {
				if err := srv.Send(m); err != nil {
					return err
				}
			}
		case <-c.live.done:
			return c.live.err
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-srv.Context().Done():
			return status.FromContextError(srv.Context().Err()).Err()
		}
	}
}

// receive applies a consumer's acks and nacks until its call ends.
func (svc *persistentService) receive(srv persistent.PersistentSubscriptions_ReadServer, g *group, c *consumer) error {
	for {
		req, err := srv.Recv()
		if err != nil {
			return err
		}
		if ack := req.GetAck(); ack != nil {
			ids := idsOf(ack.GetIds())
			g.ack(c, ids)
			svc.s.stats.acks.Add(int64(len(ids))) // after: a test seeing the count sees the effect
		} else if nack := req.GetNack(); nack != nil {
			ids := idsOf(nack.GetIds())
			stop := g.nack(c, ids, nack.GetAction(), nack.GetReason())
			svc.s.stats.nacks.Add(int64(len(ids)))
			if stop {
				c.live.end(status.Error(codes.Aborted, "esdbtest: consumer stopped by a nack with action Stop"))
			}
		}
	}
}

func idsOf(ps []*shared.UUID) []uuid.UUID {
	ids := make([]uuid.UUID, 0, len(ps))
	for _, p := range ps {
		if id, ok := uuidFromProto(p); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

func groupNotFound(key groupKey) error {
	return status.Errorf(codes.NotFound, "esdbtest: subscription group %s on %s does not exist", key.group, key.stream)
}

// settingsMsg is what CreateReq_Settings and UpdateReq_Settings have in
// common.
type settingsMsg interface {
	GetResolveLinks() bool
	GetExtraStatistics() bool
	GetMaxRetryCount() int32
	GetMinCheckpointCount() int32
	GetMaxCheckpointCount() int32
	GetMaxSubscriberCount() int32
	GetLiveBufferSize() int32
	GetReadBatchSize() int32
	GetHistoryBufferSize() int32
	GetMessageTimeoutMs() int32
	GetMessageTimeoutTicks() int64
	GetCheckpointAfterMs() int32
	GetCheckpointAfterTicks() int64
}

func settingsOf(m settingsMsg, strategy string) (groupSettings, error) {
	switch strategy {
	case strategyRoundRobin, strategyDispatchToSingle, strategyPinned:
	default:
		return groupSettings{}, status.Errorf(codes.InvalidArgument, "esdbtest: unsupported consumer strategy %q", strategy)
	}
	timeout := time.Duration(m.GetMessageTimeoutMs()) * time.Millisecond
	if t := m.GetMessageTimeoutTicks(); t > 0 {
		timeout = time.Duration(t) * 100
	}
	after := time.Duration(m.GetCheckpointAfterMs()) * time.Millisecond
	if t := m.GetCheckpointAfterTicks(); t > 0 {
		after = time.Duration(t) * 100
	}
	return groupSettings{
		resolveLinks:       m.GetResolveLinks(),
		extraStatistics:    m.GetExtraStatistics(),
		maxRetryCount:      int(max(m.GetMaxRetryCount(), 0)),
		minCheckpointCount: m.GetMinCheckpointCount(),
		maxCheckpointCount: m.GetMaxCheckpointCount(),
		maxSubscriberCount: int(max(m.GetMaxSubscriberCount(), 0)),
		liveBufferSize:     m.GetLiveBufferSize(),
		readBatchSize:      m.GetReadBatchSize(),
		historyBufferSize:  m.GetHistoryBufferSize(),
		strategy:           strategy,
		messageTimeout:     timeout,
		checkpointAfter:    after,
	}, nil
}
