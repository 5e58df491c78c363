package sdk

// SetFrameGuard turns the frame guard on or off for the connections
// dialed after it, so that benchmarks can measure its cost.
func SetFrameGuard(on bool) { frameGuardOff.Store(!on) }
