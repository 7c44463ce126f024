package projector

// InFlight is [Engine.inFlight] for the tests of package projector_test.
func InFlight(e *Engine) int { return e.inFlight() }

// Handles is [Projection.handles] for the tests of package projector_test.
func Handles[S any](p *Projection[S], e Event) bool { return p.handles(e) }
