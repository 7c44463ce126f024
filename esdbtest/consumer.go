package esdbtest

import (
	"sync"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/persistent"
)

// consumer is one connected Read call of a group.
type consumer struct {
	id         string
	from       string
	bufferSize int
	asString   bool
	live       *liveSub
	inflight   map[uuid.UUID]*message // guarded by the group's mutex
	total      int64                  // guarded by the group's mutex

	mu     sync.Mutex
	queue  []*persistent.ReadResp
	notify chan struct{} // capacity 1
}

func (c *consumer) room() bool { return len(c.inflight) < c.bufferSize }

// push queues a message for the consumer's Read call to send; it never blocks.
func (c *consumer) push(m *persistent.ReadResp) {
	c.mu.Lock()
	c.queue = append(c.queue, m)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// take returns and clears the queued messages.
func (c *consumer) take() []*persistent.ReadResp {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queue
	c.queue = nil
	return q
}
