package projector

// InFlight is [Engine.inFlight] for the tests of package projector_test.
func InFlight(e *Engine) int { return e.inFlight() }
