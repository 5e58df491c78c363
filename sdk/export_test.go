package sdk

import "time"

// SetFrameGuard turns the frame guard on or off for the connections
// dialed after it, so that benchmarks can measure its cost.
func SetFrameGuard(on bool) { frameGuardOff.Store(!on) }

// SetGather turns the gathering of synchronous calls (see gather) on or
// off for the Writers made after it, so that benchmarks can measure it.
func SetGather(on bool) { gatherOff.Store(!on) }

// WithBootstrapTimeout replaces DefaultBootstrapTimeout, so that tests of
// a bootstrap that gives up need not wait 10 s.
func WithBootstrapTimeout(d time.Duration) Option {
	return set("WithBootstrapTimeout", func(c *config) { c.bootstrapTimeout = d })
}

// GatherWaiting is how many records of synchronous calls wait in the
// Writer's lanes for a request in flight to be answered.
func GatherWaiting(w *Writer) int {
	g := w.gather
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, l := range g.lanes {
		n += len(l.waiting)
	}
	return n
}

// SetGatherHold replaces how long a lane holds its next wave for the
// callers of the last one (see gather): 0 restores the default, a
// negative d holds none.
func SetGatherHold(d time.Duration) { gatherHold.Store(int64(d)) }

// CoordCommits is how many commits the Reader's own connection to its
// coordinator answered.
func CoordCommits(r *Reader) int64 {
	r.commitTurn <- struct{}{}
	defer func() { <-r.commitTurn }()
	return r.coord.sent
}

// GatherHolding is how many of the Writer's lanes hold their next wave
// for returning callers.
func GatherHolding(w *Writer) int {
	w.gather.mu.Lock()
	defer w.gather.mu.Unlock()
	n := 0
	for _, l := range w.gather.lanes {
		if l.holding {
			n++
		}
	}
	return n
}

// GatherWaves is how many waves the Writer's lanes sent and how many
// calls they carried.
func GatherWaves(w *Writer) (waves, calls int) {
	w.gather.mu.Lock()
	defer w.gather.mu.Unlock()
	return w.gather.waves, w.gather.calls
}

// HashPartition is the partition a TxnWriter's kafka.Hash gives key among
// n partitions.
func HashPartition(key []byte, n int) int { return hashPartition(key, n) }

// RecordSlabsReused is how many times a Reader's engine decoded into a
// record slab it had used before.
func RecordSlabsReused() int64 { return readerSlabs.reused.Load() }

// BufferedRecords is how many records w's engine buffers.
func BufferedRecords(w *Writer) int64 { return w.engine().BufferedProduceRecords() }

// UnsettledRecords is how many records of w's calls have no outcome yet,
// as the Writer counts them.
func UnsettledRecords(w *Writer) int64 { return w.unsettled.Load() }

// SetUnreachedAttempt replaces the bootstrap's timeout as the bound of
// each attempt r's calls make before the cluster was reached, so that
// tests can make the bootstrap give up first; call it before r is used.
func SetUnreachedAttempt(r *Reader, d time.Duration) { r.attemptLimit = d }
