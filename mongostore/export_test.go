package mongostore

// WithBehindLimit sets how many bytes of documents the store keeps for
// writes held back before it writes them (behindLimit).
func WithBehindLimit(n int) Option {
	return func(s *Store) {
		if s.behind != nil {
			s.behind.limit = n
		}
	}
}
