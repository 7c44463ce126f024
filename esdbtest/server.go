package esdbtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/persistent"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/serverfeatures"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Discovery settings written into [Server.URI]: a client retries discovery
// this many times this many milliseconds apart before it closes itself for
// good, so it survives a [Server.Refuse] window of up to about
// discoverAttempts x discoveryIntervalMS (10 s).
const (
	discoverAttempts    = 100
	discoveryIntervalMS = 100
)

// Options configures a [Server]. The zero value is ready to use.
type Options struct {
	// Addr is the TCP address to listen on; "127.0.0.1:0" (a free port on
	// the loopback interface) when empty.
	Addr string
	// Logger receives the server's own logs and those of clients built by
	// [Server.Client]; nil discards them.
	Logger *slog.Logger
	// Seed seeds the random choice of [Server.DuplicateDeliveries], so a run
	// with the same seed and the same traffic duplicates the same events.
	Seed int64
	// Now is the server's clock: the "created" time of new events, and the
	// time $maxAge and [Server.Scavenge] measure ages against. nil means
	// time.Now; a test that moves its own clock can age events at once.
	Now func() time.Time
	// SystemProjections makes the server keep the streams of a node's
	// $by_category and $by_event_type system projections: "$ce-<category>"
	// and "$et-<type>" link events, written as events are appended (see
	// the package documentation).
	SystemProjections bool
	// Users turns authentication on (a node without --insecure): calls run
	// as the user of their basic credentials, or as the anonymous user
	// without any, and the node's default access rules apply (see the
	// package documentation). The server then serves TLS with a
	// self-signed certificate, as the client sends credentials only over
	// TLS; [Server.URI] and [Server.Client] account for it.
	// [DefaultUsers] returns a node's own users. nil turns it off.
	Users []User
	// MaxAppendSize is the most bytes of event data one append may carry,
	// the node's MaxAppendSize option; 0 means its default, 1,048,576
	// (1 MiB).
	MaxAppendSize int
}

// defaultMaxAppendSize is the node's default MaxAppendSize.
const defaultMaxAppendSize = 1 << 20

// Server is a running test double of an EventStoreDB node. Its methods are
// safe for concurrent use.
type Server struct {
	log           *eventLog
	logger        *slog.Logger
	lis           net.Listener
	grpc          *grpc.Server
	faults        *faults
	auth          *authenticator // nil without authentication
	roots         *x509.CertPool // the certificate's pool, nil without TLS
	maxAppendSize int
	stats         counters
	subs          registry
	groups        *groups
	closing       chan struct{}
	wg            sync.WaitGroup // the serving goroutine, the groups' dispatchers, persistent consumers' receivers
	once          sync.Once
}

// Start listens on opts.Addr and serves the EventStoreDB protocol subset
// described in the package documentation until [Server.Close].
func Start(opts Options) (*Server, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("esdbtest: listen on %s: %w", addr, err)
	}
	s := &Server{
		log:           newEventLog(opts.Now),
		logger:        logger,
		lis:           lis,
		faults:        newFaults(opts.Seed),
		auth:          newAuthenticator(opts.Users),
		maxAppendSize: opts.MaxAppendSize,
		closing:       make(chan struct{}),
	}
	if s.maxAppendSize <= 0 {
		s.maxAppendSize = defaultMaxAppendSize
	}
	if opts.SystemProjections {
		s.log.projection = newSystemProjections()
	}
	s.subs.subs = make(map[*liveSub]struct{})
	s.groups = newGroups(s)
	serverOpts := []grpc.ServerOption{
		// The client pings every 10 s even without a call; the default
		// policy (5 min, not without streams) answers with GOAWAY.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             time.Second,
			PermitWithoutStream: true,
		}),
		// Close waits for the handlers, so none is left running.
		grpc.WaitForHandlers(true),
		grpc.ChainUnaryInterceptor(s.refuseUnary, s.authUnary),
		grpc.ChainStreamInterceptor(s.refuseStream, s.authStream),
		grpc.ForceServerCodecV2(newWireCodec()),
	}
	if s.auth != nil {
		cert, roots, err := selfSigned(time.Now())
		if err != nil {
			_ = lis.Close()
			return nil, err
		}
		s.roots = roots
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS12,
		})))
	}
	s.grpc = grpc.NewServer(serverOpts...)
	streams.RegisterStreamsServer(s.grpc, &streamsService{s: s})
	persistent.RegisterPersistentSubscriptionsServer(s.grpc, &persistentService{s: s})
	serverfeatures.RegisterServerFeaturesServer(s.grpc, featuresService{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(lis); err != nil {
			s.logger.Error("esdbtest: serve", "err", err)
		}
	}()
	s.logger.Info("esdbtest: listening", "addr", s.Addr())
	return s, nil
}

// New starts a server with default options for a test and closes it when the
// test ends; it fails the test if the server cannot start.
func New(tb testing.TB) *Server {
	tb.Helper()
	return NewWith(tb, Options{})
}

// NewWith is [New] with options.
func NewWith(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := Start(opts)
	if err != nil {
		tb.Fatalf("esdbtest: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Addr returns the address the server listens on, host:port.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// URI returns a connection string for either official client:
// "esdb://ADDR?tls=false&maxDiscoverAttempts=100&discoveryInterval=100", or
// with [Options.Users] "esdb://ADDR?tls=true&tlsVerifyCert=false&..." (the
// certificate is self-signed; [Server.Client] verifies it instead).
//
// The discovery settings matter for [Server.Refuse]: after a call fails with
// Unavailable the client rediscovers the node on its next call, and if
// discovery fails maxDiscoverAttempts times (default 10 x 100 ms) it closes
// itself for good. With 100 attempts 100 ms apart a client survives a refusal
// of about 10 s; its next call blocks until the server answers again.
func (s *Server) URI() string { return s.uri("") }

// URIAs is [Server.URI] with a user's credentials, which the client sends
// with every call: "esdb://NAME:PASSWORD@ADDR?tls=true&...".
func (s *Server) URIAs(name, password string) string {
	return s.uri(url.UserPassword(name, password).String() + "@")
}

func (s *Server) uri(userinfo string) string {
	tlsParams := "tls=false"
	if s.roots != nil {
		tlsParams = "tls=true&tlsVerifyCert=false"
	}
	return fmt.Sprintf("esdb://%s%s?%s&maxDiscoverAttempts=%d&discoveryInterval=%d",
		userinfo, s.Addr(), tlsParams, discoverAttempts, discoveryIntervalMS)
}

// Client returns an official client, KurrentDB-Client-Go's, connected to
// [Server.URI], closed when the test ends (before the server, if the server
// came from [New] earlier). Its logs go to the server's logger at debug level. With [Options.Users] it
// runs as the anonymous user unless a call carries credentials.
func (s *Server) Client(tb testing.TB) *kurrentdb.Client {
	tb.Helper()
	return s.client(tb, s.URI())
}

func (s *Server) client(tb testing.TB, uri string) *kurrentdb.Client {
	tb.Helper()
	cfg, err := kurrentdb.ParseConnectionString(uri)
	if err != nil {
		tb.Fatalf("esdbtest: parse %s: %v", uri, err)
	}
	if s.roots != nil {
		cfg.RootCAs, cfg.SkipCertificateVerification = s.roots, false
	}
	logger := s.logger
	cfg.Logger = func(level kurrentdb.LogLevel, format string, args ...interface{}) {
		logger.Debug("esdb client: "+fmt.Sprintf(format, args...), "level", level)
	}
	c, err := kurrentdb.NewClient(cfg)
	if err != nil {
		tb.Fatalf("esdbtest: client: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Close ends every call and subscription, stops listening and waits for the
// server's goroutines. It may be called more than once.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closing)
		s.subs.dropAll(codes.Unavailable, "esdbtest: server closed")
		s.groups.stopAll()
		s.grpc.Stop()
		s.wg.Wait()
		s.logger.Info("esdbtest: closed", "addr", s.Addr())
	})
}

// Head returns the commit position of the last event in $all, 0 when the log
// is empty.
func (s *Server) Head() uint64 {
	end, _ := s.log.head()
	return end
}

// size returns the number of events in the log, parked-message links and
// the events the server writes itself included, scavenged ones excluded.
func (s *Server) size() int { return s.log.size() }

// Stats counts what the server did since it started.
type Stats struct {
	Appends    int64 // successful Append calls (idempotent repeats included)
	Events     int64 // events written by Append calls
	Delivered  int64 // events sent by subscriptions, catch-up and persistent, duplicates excluded
	Duplicates int64 // extra copies sent by DuplicateDeliveries
	Dropped    int64 // subscriptions ended by DropSubscriptions or Refuse
	Acks       int64 // event ids acknowledged on persistent subscriptions
	Nacks      int64 // event ids negatively acknowledged
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	return Stats{
		Appends:    s.stats.appends.Load(),
		Events:     s.stats.events.Load(),
		Delivered:  s.stats.delivered.Load(),
		Duplicates: s.stats.duplicates.Load(),
		Dropped:    s.stats.dropped.Load(),
		Acks:       s.stats.acks.Load(),
		Nacks:      s.stats.nacks.Load(),
	}
}

type counters struct {
	appends, events, delivered, duplicates, dropped, acks, nacks atomic.Int64
}

// DropSubscriptions ends every live subscription, catch-up and persistent,
// with codes.Unavailable, as a node restart or a network cut would; the client
// sees SubscriptionDropped. It returns how many it ended. Persistent groups
// keep their state: the dropped consumers' unacked messages are redelivered.
func (s *Server) DropSubscriptions() int {
	n := s.subs.dropAll(codes.Unavailable, "esdbtest: subscription dropped (fault injected)")
	s.stats.dropped.Add(int64(n))
	if n > 0 {
		s.logger.Info("esdbtest: dropped subscriptions", "count", n)
	}
	return n
}

// Refuse makes the server unavailable for d: it drops every subscription and
// answers every call that starts before d has passed, discovery's
// GetSupportedMethods included, with codes.Unavailable (an Append is read to
// its end first, so that the client reports Unavailable rather than the EOF
// of a failed Send). Connections stay open. Overlapping calls extend the
// window.
//
// With a client built on [Server.URI], the first call to fail makes the
// client rediscover the node; its next call blocks in discovery until the
// window has passed (up to about 10 s, see [Server.URI]) and then works: the
// same client carries on.
func (s *Server) Refuse(d time.Duration) {
	s.faults.refuseFor(d)
	s.DropSubscriptions()
}

// DuplicateDeliveries makes every subscription, catch-up or persistent, send
// each event a second time right after the first with probability rate, drawn
// from a source seeded by [Options.Seed]. 0 turns it off; 1 duplicates every
// event.
func (s *Server) DuplicateDeliveries(rate float64) { s.faults.setDuplicateRate(rate) }

// Parked is an event parked by a persistent subscription group: the event (the
// resolved one when the group resolves links) and why it was parked.
type Parked struct {
	EventID  string // the event's id, as uuid.UUID.String writes it
	Stream   string // the event's stream
	Revision uint64 // the event's revision in that stream
	Reason   string // the nack's reason, or "max retry count exceeded"
}

// Parked returns the events parked by a group, oldest first, except those
// replayed since. stream is the group's stream, "$all" for a group on $all. It
// keeps answering after the group is deleted.
func (s *Server) Parked(stream, group string) []Parked {
	return s.groups.parkedOf(groupKey{stream: stream, group: group})
}

// refuseUnary and refuseStream fail every call while Refuse is in effect.
func (s *Server) refuseUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if s.faults.refusing() {
		return nil, errRefused
	}
	return handler(ctx, req)
}

func (s *Server) refuseStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !s.faults.refusing() {
		return handler(srv, ss)
	}
	drainClient(ss, info)
	return errRefused
}

// drainClient takes what a client-streaming call sends before it is answered
// with an error: a client-streaming call answered before the client has
// sent its messages makes the client's Send fail with io.EOF, which it
// reports as an unknown error (and does not treat as a reason to
// rediscover). Taking all of an Append, or the options of a persistent
// Read, lets the client see the status.
func drainClient(ss grpc.ServerStream, info *grpc.StreamServerInfo) {
	switch {
	case info.IsClientStream && !info.IsServerStream:
		for ss.RecvMsg(new(shared.Empty)) == nil {
		}
	case info.IsClientStream:
		_ = ss.RecvMsg(new(shared.Empty))
	}
}

var errRefused = status.Error(codes.Unavailable, "esdbtest: server refusing calls (fault injected)")
