package projector

import "context"

// InFlight is [Engine.inFlight] for the tests of package projector_test.
func InFlight(e *Engine) int { return e.inFlight() }

// Handles is [Projection.handles] for the tests of package projector_test.
func Handles[S any](p *Projection[S], e Event) bool { return p.handles(e) }

// Spread is, for the tests of package projector_test, where a runner of e
// spreading by document ([Engine.partitionKey]) sends ev: the key its
// worker is chosen by, and the route it gives ev ("" for none).
func Spread(e *Engine, ev Event) (worker, route string) {
	key := e.partitionKey(context.Background(), &ev)
	if id, ok := routedTo(key); ok {
		route = id
	}
	return workerKey(key), route
}
