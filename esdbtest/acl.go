package esdbtest

import "context"

// streamAction is what a call does to a stream, as the node's stream ACLs
// name it.
type streamAction int

const (
	actionRead streamAction = iota
	actionWrite
	actionDelete
	actionMetaRead
	actionMetaWrite
)

// allowStream reports whether the caller may do action on stream, as the
// node's LegacyAuthorizationProviderFactory policy and
// LegacyStreamPermissionAssertion decide with anonymous stream access off
// (the default): the caller must be authenticated; $all can be read but
// not written or deleted; reading or writing "$$x" is reading or writing
// x's metadata; an admin may do anything else; others need a role of the
// stream's ACL: its $acl in its metadata, or else the default one (every
// user for a stream, $admins for a system stream, "$" first). Always true
// without authentication.
func (s *Server) allowStream(ctx context.Context, action streamAction, stream string) bool {
	if s.auth == nil {
		return true
	}
	p := s.caller(ctx)
	if !p.authenticated() {
		return false
	}
	if stream == "" {
		stream = allStream
	}
	if stream == allStream && (action == actionWrite || action == actionDelete) {
		return false
	}
	if isMetastream(stream) {
		switch action {
		case actionRead:
			action = actionMetaRead
		case actionWrite:
			action = actionMetaWrite
		default:
			return false
		}
		stream = originalOf(stream)
	}
	if p.isAdmin() {
		return true
	}
	for _, role := range s.log.rolesFor(stream, action) {
		if p.hasRole(role) {
			return true
		}
	}
	return false
}

// allowOps reports whether the caller may manage persistent subscriptions
// (create, update, delete, replay parked messages, restart the subsystem):
// an admin or an operator. Always true without authentication.
func (s *Server) allowOps(ctx context.Context) bool {
	return s.auth == nil || s.caller(ctx).isOpsOrAdmin()
}

// allowAuthenticated reports whether the caller is a user (the node's
// RequireAuthenticated, for persistent subscription statistics). Always
// true without authentication.
func (s *Server) allowAuthenticated(ctx context.Context) bool {
	return s.auth == nil || s.caller(ctx).authenticated()
}

// rolesFor returns the roles a stream's ACL allows an action: the stream's
// $acl, else the node's default ACL (SystemSettings.Default).
func (l *eventLog) rolesFor(stream string, action streamAction) []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if acl := l.metadataOf(stream).acl; acl != nil {
		var roles []string
		switch action {
		case actionRead:
			roles = acl.read
		case actionWrite:
			roles = acl.write
		case actionDelete:
			roles = acl.del
		case actionMetaRead:
			roles = acl.metaRead
		case actionMetaWrite:
			roles = acl.metaWrite
		}
		if roles != nil {
			return roles
		}
	}
	if isSystemStream(stream) {
		return []string{roleAdmins}
	}
	return []string{roleAll}
}
