package retry

import (
	"context"
	"errors"
)

// ErrNotFound is what [IfNotFound] retries on: the thing looked for is not
// visible yet.
var ErrNotFound = errors.New("not found")

// ErrNotUpdated is what [IfNotUpdated] retries on: a conditional update
// matched no document.
var ErrNotUpdated = errors.New("update matched no document")

// IfNotFound calls find until it reports found, under policy p. It suits a
// read that waits for a write made elsewhere to become visible. When the
// retries run out, the error wraps [ErrNotFound].
func IfNotFound[T any](ctx context.Context, p Policy, find func(ctx context.Context) (T, bool, error), opts ...Option) (T, error) {
	return DoValue(ctx, p, func(ctx context.Context) (T, error) {
		v, ok, err := find(ctx)
		if err != nil {
			return v, err
		}
		if !ok {
			return v, ErrNotFound
		}
		return v, nil
	}, opts...)
}

// IfNotUpdated calls update until it reports at least one matched document,
// under policy p. Pass the matched count, not the modified count: an update
// that sets the values a document already has modifies nothing, yet it did
// happen. When the retries run out, the error wraps [ErrNotUpdated].
func IfNotUpdated(ctx context.Context, p Policy, update func(ctx context.Context) (matched int64, err error), opts ...Option) error {
	return Do(ctx, p, func(ctx context.Context) error {
		n, err := update(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrNotUpdated
		}
		return nil
	}, opts...)
}
