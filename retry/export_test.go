package retry

// The virtual time of the tests.
var (
	WithTimer = withTimer
	WithClock = withClock
)
