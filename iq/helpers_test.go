package iq

import (
	"context"
	"time"
)

// The variables of the package's tables, by name, for tests.
const (
	envAllowStandby = "AZKAFKA_IQ_ALLOW_STANDBY"
	envMaxLag       = "AZKAFKA_IQ_MAX_LAG"
	envAZTag        = "AZKAFKA_IQ_AZ_TAG"
)

// sourceOf returns a Source that always holds s.
func sourceOf(s *snapshot) *Source { return &Source{impl: &staticSource{snap: s}} }

// clusterOf returns the cluster source behind s.
func clusterOf(s *Source) *clusterSource { return s.impl.(*clusterSource) }

// Route is route with Kafka's partitioner, for tests.
func (s *snapshot) Route(store string, key []byte) (Route, error) { return s.route(store, key, nil) }

// Metadata is metadata, for tests.
func (s *snapshot) Metadata() Metadata { return s.metadata() }

// withRandom sets the source of randomness used to shuffle equally good
// replicas (default math/rand/v2.IntN), for tests that need one order.
func withRandom(intN func(n int) int) Option {
	return option{"withRandom", forClient, func(c *config) { c.intN = intN }}
}

// fakeSource is a source whose snapshot and refresh the test controls.
type fakeSource struct {
	snaps          []*snapshot // served in turn, one more per refresh
	refreshes      int
	starts, closes int
	lastOK         time.Time
}

func (f *fakeSource) snapshot() *snapshot {
	if len(f.snaps) == 0 {
		return nil
	}
	return f.snaps[min(f.refreshes, len(f.snaps)-1)]
}
func (f *fakeSource) start() { f.starts++ }
func (f *fakeSource) refresh(context.Context) error {
	f.refreshes++
	return nil
}
func (f *fakeSource) last() (time.Time, error) { return f.lastOK, nil }
func (f *fakeSource) close()                   { f.closes++ }
