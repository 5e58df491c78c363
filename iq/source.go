package iq

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Source supplies a Kafka Streams application's routing metadata to a
// Client and keeps it current. NewClusterSource reads it from the
// application's group on the brokers, NewHTTPSource from the metadata
// endpoint the instances serve, NewCombinedSource routes with one and
// takes lags from the other, and NewStaticSource holds fixed metadata.
//
// A polling source does nothing until Start (poll now, then every
// WithPollInterval) or Refresh (poll once, now); when a poll fails it
// keeps the last good metadata and logs at Warn. Close stops it. A Source
// is safe for concurrent use; make one with the constructors (the zero
// Source is not usable).
type Source struct {
	impl source
}

// source is what each kind of Source does.
type source interface {
	snapshot() *snapshot // nil before the first good poll
	start()
	refresh(ctx context.Context) error
	last() (lastOK time.Time, lastErr error)
	close()
}

// Start polls once right away and then every poll interval in a goroutine,
// until Close. Calling it more than once has no effect; a static source
// has nothing to poll.
func (s *Source) Start() { s.impl.start() }

// Refresh polls once, synchronously, and installs the new metadata if the
// poll succeeded; it returns the poll's error. Concurrent calls share one
// poll. ctx bounds the wait, and the poll this call starts.
func (s *Source) Refresh(ctx context.Context) error { return s.impl.refresh(ctx) }

// Metadata returns a copy of the current metadata, instances ordered by
// host then port; ok is false before the first good poll.
func (s *Source) Metadata() (md Metadata, ok bool) {
	snap := s.impl.snapshot()
	if snap == nil {
		return Metadata{}, false
	}
	return snap.metadata(), true
}

// LastPoll returns the time of the last good poll (zero before the first)
// and the error of the last poll (nil if it succeeded): what a readiness
// check wants to know.
func (s *Source) LastPoll() (lastOK time.Time, lastErr error) { return s.impl.last() }

// Close stops polling, waits for the poller to exit and closes the idle
// connections of the clients the source made itself. It is safe to call
// more than once, and without Start. It returns nil.
func (s *Source) Close() error {
	s.impl.close()
	return nil
}

func (s *Source) snapshot() *snapshot { return s.impl.snapshot() }

// NewStaticSource returns a Source that always holds md, validated and
// copied: for tests of code that queries, and for routing known in
// advance. Its Start, Refresh and Close do nothing; its LastPoll is the
// time it was made.
func NewStaticSource(md Metadata) (*Source, error) {
	snap, err := newSnapshot(md)
	if err != nil {
		return nil, err
	}
	return &Source{impl: &staticSource{snap: snap, at: time.Now()}}, nil
}

type staticSource struct {
	snap *snapshot
	at   time.Time
}

func (s *staticSource) snapshot() *snapshot           { return s.snap }
func (s *staticSource) start()                        {}
func (s *staticSource) refresh(context.Context) error { return nil }
func (s *staticSource) last() (time.Time, error)      { return s.at, nil }
func (s *staticSource) close()                        {}

// NewCombinedSource returns a Source whose routing comes from routing and
// whose lags (and zones, where routing has none) come from lags: typically
// the routing from NewClusterSource, which needs no Java-side code, and
// the measured lags from NewHTTPSource, where the instances serve the
// metadata endpoint. An instance lags does not know keeps routing's lags
// (a cluster source's upper bounds). The combined Source owns both: its
// Start, Refresh and Close act on both (Refresh fails only when routing's
// does), its LastPoll is routing's.
func NewCombinedSource(routing, lags *Source) (*Source, error) {
	if routing == nil || lags == nil {
		return nil, errors.New("iq: NewCombinedSource: nil source")
	}
	return &Source{impl: &combinedSource{routing: routing.impl, lags: lags.impl}}, nil
}

type combinedSource struct {
	routing, lags source
	cache         atomic.Pointer[combined]
}

type combined struct {
	routing, lags, out *snapshot
}

func (c *combinedSource) start()                                  { c.routing.start(); c.lags.start() }
func (c *combinedSource) last() (lastOK time.Time, lastErr error) { return c.routing.last() }
func (c *combinedSource) close()                                  { c.lags.close(); c.routing.close() }

func (c *combinedSource) refresh(ctx context.Context) error {
	_ = c.lags.refresh(ctx) // lags are optional: the routing keeps its own
	return c.routing.refresh(ctx)
}

// snapshot returns the combined metadata, or nil while the routing source
// has none. It is rebuilt only when either source's snapshot changes.
func (c *combinedSource) snapshot() *snapshot {
	r, l := c.routing.snapshot(), c.lags.snapshot()
	if r == nil {
		return nil
	}
	if l == nil {
		return r
	}
	if cached := c.cache.Load(); cached != nil && cached.routing == r && cached.lags == l {
		return cached.out
	}
	md := r.metadata()
	own := make(map[HostInfo]*Instance, len(l.md.Instances))
	for i := range l.md.Instances {
		own[l.md.Instances[i].HostInfo] = &l.md.Instances[i]
	}
	for i := range md.Instances {
		in := &md.Instances[i]
		o := own[in.HostInfo]
		if o == nil {
			continue
		}
		for store, m := range o.Lags { // the measured lags win, store by store
			if in.Lags == nil {
				in.Lags = map[string]map[int]Lag{}
			}
			in.Lags[store] = m // newSnapshot copies it
		}
		if in.AZ == "" {
			in.AZ = o.AZ
		}
	}
	out, err := newSnapshot(md)
	if err != nil { // cannot happen: md passed newSnapshot once
		return r
	}
	c.cache.Store(&combined{r, l, out})
	return out
}
