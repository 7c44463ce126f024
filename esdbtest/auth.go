package esdbtest

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// User is an account of a server started with [Options.Users].
type User struct {
	Name     string
	Password string
	// Groups are the user's roles: "$admins" and "$ops" are the node's own
	// (see the package documentation for what they may do); any other
	// name matters only where a stream's $acl names it.
	Groups []string
}

// DefaultUsers returns the users a new node has: "admin" in $admins and
// "ops" in $ops, both with the password "changeit" (the defaults of the
// node's DefaultAdminPassword and DefaultOpsPassword options).
func DefaultUsers() []User {
	return []User{
		{Name: "admin", Password: "changeit", Groups: []string{roleAdmins}},
		{Name: "ops", Password: "changeit", Groups: []string{roleOps}},
	}
}

// The node's SystemRoles.
const (
	roleAdmins = "$admins"
	roleOps    = "$ops"
	roleAll    = "$all" // in an ACL: every user
)

// principal is the user a call runs as; nil is the anonymous user.
type principal struct {
	name   string
	groups []string
}

func (p *principal) authenticated() bool { return p != nil }

// isAdmin is the node's WellKnownAssertions.Admin: the user "admin" or a
// member of $admins.
func (p *principal) isAdmin() bool {
	return p != nil && (p.name == "admin" || slices.Contains(p.groups, roleAdmins))
}

// isOpsOrAdmin is the node's OperationsOrAdmins claims: an admin, the user
// "ops" or a member of $ops.
func (p *principal) isOpsOrAdmin() bool {
	return p.isAdmin() || p != nil && (p.name == "ops" || slices.Contains(p.groups, roleOps))
}

// hasRole reports whether an ACL role admits the user: $all, the user's
// name or one of its groups.
func (p *principal) hasRole(role string) bool {
	return role == roleAll || p != nil && (p.name == role || slices.Contains(p.groups, role))
}

// authenticator checks the basic credentials of calls; nil when
// authentication is off.
type authenticator struct {
	users map[string]User
}

func newAuthenticator(users []User) *authenticator {
	if len(users) == 0 {
		return nil
	}
	a := &authenticator{users: make(map[string]User, len(users))}
	for _, u := range users {
		a.users[u.Name] = u
	}
	return a
}

// identify returns the user a call runs as, as the node's
// BasicHttpAuthenticationProvider and AnonymousHttpAuthenticationProvider do:
// a call without a single "Basic user:password" authorization header runs
// as the anonymous user; one whose credentials match no user is refused
// with errUnauthenticated.
func (a *authenticator) identify(ctx context.Context) (*principal, error) {
	if a == nil {
		return nil, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get("authorization")
	if len(values) != 1 {
		return nil, nil
	}
	scheme, param, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !ok || scheme != "Basic" {
		return nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(param))
	if err != nil {
		return nil, nil
	}
	name, password, ok := strings.Cut(string(raw), ":")
	if !ok {
		return nil, nil
	}
	u, found := a.users[name]
	if !found || u.Password != password {
		return nil, errUnauthenticated
	}
	return &principal{name: u.Name, groups: u.Groups}, nil
}

// caller returns the user a call runs as; the interceptors have already
// refused calls with bad credentials.
func (s *Server) caller(ctx context.Context) *principal {
	p, _ := s.auth.identify(ctx)
	return p
}

// authUnary and authStream refuse calls whose credentials match no user.
func (s *Server) authUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if _, err := s.auth.identify(ctx); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if _, err := s.auth.identify(ss.Context()); err != nil {
		drainClient(ss, info)
		return err
	}
	return handler(srv, ss)
}
