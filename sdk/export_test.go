package sdk

import "time"

// SetFrameGuard turns the frame guard on or off for the connections
// dialed after it, so that benchmarks can measure its cost.
func SetFrameGuard(on bool) { frameGuardOff.Store(!on) }

// WithBootstrapTimeout replaces DefaultBootstrapTimeout, so that tests of
// a bootstrap that gives up need not wait 10 s.
func WithBootstrapTimeout(d time.Duration) Option {
	return set("WithBootstrapTimeout", func(c *config) { c.bootstrapTimeout = d })
}
